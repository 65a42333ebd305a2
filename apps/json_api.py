"""Flask: parses a ~30 KB JSON document on every request and returns it with `jsonify`."""

import json

from flask import Flask, jsonify

app = Flask(__name__)


def _build_document() -> str:
    # Deterministic content: the same bytes on every import, so runs are comparable.
    items = [
        {
            "id": i,
            "name": f"item-{i:04d}",
            "price": round(i * 1.37 % 100, 2),
            "tags": [f"tag{(i * 7 + k) % 23}" for k in range(3)],
            "in_stock": i % 3 != 0,
        }
        for i in range(250)
    ]
    return json.dumps({"items": items, "count": len(items)})


DOCUMENT = _build_document()


@app.route("/")
def document():
    return jsonify(json.loads(DOCUMENT))
