"""A WSGI app whose latency-memory front has a shape the test sets (tests/commands/
test_tune_front.py): each worker process holds FRONT_SHAPE_MB of its own memory, allocated and
touched at import, and every FRONT_SHAPE_EVERY-th request a worker serves sleeps
FRONT_SHAPE_SLOW_MS (the others FRONT_SHAPE_FAST_MS). With one sync worker the requests that
arrive during a slow one wait behind it, so p99 at a fixed rate is about the slow sleep; with
more workers another one serves them and p99 falls to the fast sleep, while PSS grows by the
ballast per worker: more workers, more memory, lower p99."""

import itertools
import os
import time

BALLAST = bytearray(b"\x01") * (int(os.environ.get("FRONT_SHAPE_MB", "40")) << 20)
FAST_S = float(os.environ.get("FRONT_SHAPE_FAST_MS", "5")) / 1000
SLOW_S = float(os.environ.get("FRONT_SHAPE_SLOW_MS", "200")) / 1000
EVERY = int(os.environ.get("FRONT_SHAPE_EVERY", "200"))
SERVED = itertools.count(1)
BODY = b"ok"


def app(environ, start_response):
    time.sleep(SLOW_S if next(SERVED) % EVERY == 0 else FAST_S)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))])
    return [BODY]
