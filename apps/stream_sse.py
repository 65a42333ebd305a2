"""Flask on WSGI: the same server-sent event stream as stream_tokens.py, the WSGI way.

`GET /stream` answers `text/event-stream` from a generator that sleeps between events: one
`data: <token>` event every 20-50 ms for 2-10 s, then `event: done` / `data: [DONE]`. The
knobs `STREAM_SECONDS` and `TOKEN_MS` (read at import) and `?seed=N` are described in
apps/stream_knobs.py. `GET /healthz` answers `ok` at once; `GET /` a small JSON body after
5 ms, the request lane.

On WSGI a response is iterated by the worker (or thread) that took the request, so each stream
holds one for its whole length: a sync worker serves nothing else meanwhile, and streams beside
short requests show how many a config can hold, and whether a probe still gets through.

Run it: `gunicorn apps.stream_sse:app`, then `curl -N localhost:8000/stream`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping

from flask import Flask, Response, request

from apps.stream_knobs import DONE, HEADERS, MEDIA_TYPE, StreamKnobs, event, stream_seed

REQUEST_WAIT_S = 0.005


def create_app(environ: Mapping[str, str] | None = None) -> Flask:
    """The app, with its knobs read from `environ` (the process's environment by default)."""
    knobs = StreamKnobs.from_env(os.environ if environ is None else environ)
    flask_app = Flask(__name__)

    def tokens(seed: int) -> Iterator[bytes]:
        for gap_s, token in knobs.plan(seed):
            time.sleep(gap_s)
            yield event(token)
        yield DONE

    @flask_app.get("/stream")
    def stream() -> Response:
        seed = stream_seed(request.args.get("seed"))
        return Response(tokens(seed), mimetype=MEDIA_TYPE, headers=HEADERS)

    @flask_app.get("/healthz")
    def healthz() -> Response:
        return Response("ok", mimetype="text/plain")

    @flask_app.get("/")
    def index() -> dict[str, str]:
        time.sleep(REQUEST_WAIT_S)
        return {"status": "ok", "stream": "/stream"}

    return flask_app


app = create_app()
