"""Starlette: an LLM-style token stream, as chat backends serve it, beside short requests.

`GET /stream` answers server-sent events (`text/event-stream`): one `data: <token>` event
every 20-50 ms for 2-10 s, each stream its own length, then `event: done` / `data: [DONE]`,
and ends. The knobs `STREAM_SECONDS` and `TOKEN_MS` (a number or a range LOW-HIGH, read at
import) and `?seed=N` are described in apps/stream_knobs.py. `GET /healthz` answers `ok` at
once, as a liveness probe expects; `GET /` answers a small JSON body after a 5 ms await, the
request lane. Every wait is awaited, so one event loop carries many streams at once.

Run it: `uvicorn apps.stream_tokens:app`, then `curl -N localhost:8000/stream`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route

from apps.stream_knobs import DONE, HEADERS, MEDIA_TYPE, StreamKnobs, event, stream_seed

REQUEST_WAIT_S = 0.005


def create_app(environ: Mapping[str, str] | None = None) -> Starlette:
    """The app, with its knobs read from `environ` (the process's environment by default)."""
    knobs = StreamKnobs.from_env(os.environ if environ is None else environ)

    async def tokens(seed: int) -> AsyncIterator[bytes]:
        for gap_s, token in knobs.plan(seed):
            await asyncio.sleep(gap_s)
            yield event(token)
        yield DONE

    async def stream(request: Request) -> StreamingResponse:
        seed = stream_seed(request.query_params.get("seed"))
        return StreamingResponse(tokens(seed), headers=HEADERS, media_type=MEDIA_TYPE)

    async def healthz(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    async def index(request: Request) -> JSONResponse:
        await asyncio.sleep(REQUEST_WAIT_S)
        return JSONResponse({"status": "ok", "stream": "/stream"})

    routes = [Route("/stream", stream), Route("/healthz", healthz), Route("/", index)]
    return Starlette(routes=routes)


app = create_app()
