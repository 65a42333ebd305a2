"""Plain WSGI that misbehaves on purpose, to test that the tuner copes with broken apps.

The path picks the fault, `?every=N` (default 20) makes it hit one request in N per worker:
`/` answers 200, `/crash` kills the worker, `/hang` never answers, `/error` answers 500,
`/leak` keeps `?kb=N` (64) KB per request. `FAULTY_START_S=S` delays the import (a slow
start); `FAULTY_BROKEN_IN_SERVER=1` raises at import under gunicorn or uWSGI only. The list
with every option: docs/pages/commands/tune.md, "Why a trial failed".
"""

import os
import sys
import time
from urllib.parse import parse_qs

if os.environ.get("FAULTY_BROKEN_IN_SERVER") == "1" and (
    "gunicorn" in sys.modules or "uwsgi" in sys.modules
):
    raise RuntimeError("faulty: refusing to load under a server (FAULTY_BROKEN_IN_SERVER=1)")

time.sleep(float(os.environ.get("FAULTY_START_S", "0")))

BODY = b"hello world"
_served = 0
_leaked: list[bytes] = []


def _query(environ, name, default):
    values = parse_qs(environ.get("QUERY_STRING", "")).get(name)
    return int(values[0]) if values else default


def app(environ, start_response):
    global _served
    _served += 1
    path = environ.get("PATH_INFO", "/")
    hit = _served % max(1, _query(environ, "every", 20)) == 0
    status = "200 OK"
    if path == "/crash" and hit:
        os._exit(1)
    elif path == "/hang" and hit:
        time.sleep(3600)
    elif path == "/error" and hit:
        status = "500 Internal Server Error"
    elif path == "/leak":
        _leaked.append(os.urandom(1024) * _query(environ, "kb", 64))
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))])
    return [BODY]
