"""Starlette: parses a ~30 KB JSON document on every request and returns it as JSON (the ASGI
twin of json_api.py: the same document, an `async def` endpoint)."""

import json

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


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


async def document(request: Request) -> JSONResponse:
    return JSONResponse(json.loads(DOCUMENT))


app = Starlette(routes=[Route("/", document)])
