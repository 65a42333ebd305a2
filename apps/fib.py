"""Flask: `GET /<number>` returns the Fibonacci sequence up to `number` as JSON (load /9000)."""

import json

from flask import Flask

app = Flask(__name__)


@app.route("/<int:number>")
def fibonacci(number: int) -> str:
    sequence = [0, 1]
    while sequence[-1] < number:
        sequence.append(sequence[-1] + sequence[-2])
    return json.dumps(sequence)


@app.route("/")
def index() -> str:
    return fibonacci(9000)
