"""Starlette with sync `def` endpoints that block, as FastAPI apps on a blocking driver have.

`GET /` and `GET /items/ID` are plain `def` functions that block `BLOCK_MS` (default 50 ms, a
blocking database or HTTP client call): Starlette, like FastAPI, runs each on a thread through
anyio's default thread limiter, 40 tokens per event loop unless the app says otherwise. That
limiter is a hidden cap: a worker never runs more than its tokens of these endpoints at once,
whatever the server allows, and the rest wait for a token. `GET /healthz` is `async def`, so it
answers at once without a token, as a probe should.

The cap is the app setting `THREAD_LIMIT` (declared in apps/sync_endpoints.tuner.toml): read
at import, set at startup in the app's lifespan (unset: anyio's 40). A server that runs no
lifespan (daphne) keeps the default.

Run it: `THREAD_LIMIT=8 uvicorn apps.sync_endpoints:app`.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TypeVar

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

BLOCK_MS = "BLOCK_MS"
THREAD_LIMIT = "THREAD_LIMIT"
DEFAULT_BLOCK_MS = 50.0

Number = TypeVar("Number", int, float)


def _positive(environ: Mapping[str, str], name: str, kind: type[Number]) -> Number | None:
    """The variable `name` as a positive number of `kind`; None if unset; else one line, exit."""
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = kind(raw)
    except ValueError:
        value = kind(0)
    if not (math.isfinite(value) and value > 0):
        what = "a whole number" if kind is int else "a number"
        sys.exit(f"apps/sync_endpoints.py: {name}={raw!r}: expected {what} above 0")
    return value


def create_app(environ: Mapping[str, str] | None = None) -> Starlette:
    """The app, with `BLOCK_MS` and `THREAD_LIMIT` read from `environ` (default: the process's)."""
    environ = os.environ if environ is None else environ
    block_s = (_positive(environ, BLOCK_MS, float) or DEFAULT_BLOCK_MS) / 1000
    thread_limit = _positive(environ, THREAD_LIMIT, int)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # The limiter belongs to the event loop the lifespan runs on, the one that serves.
        if thread_limit is not None:
            anyio.to_thread.current_default_thread_limiter().total_tokens = thread_limit
        yield

    def index(request: Request) -> JSONResponse:
        time.sleep(block_s)  # the blocking call, on one of the limiter's threads
        return JSONResponse({"status": "ok"})

    def item(request: Request) -> JSONResponse:
        time.sleep(block_s)
        return JSONResponse({"id": request.path_params["item_id"], "name": "item"})

    async def healthz(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    routes = [
        Route("/", index),
        Route("/items/{item_id:int}", item),
        Route("/healthz", healthz),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


app = create_app()
