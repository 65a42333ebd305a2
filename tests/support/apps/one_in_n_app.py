"""A WSGI app whose latency distribution is known by construction: one request in ONE_IN_N
(counted over the whole process, in arrival order) waits SLOW_MS before it answers; every
other answers at once. Served with more threads than connections, a slow request holds only
its own connection, so exactly 1/ONE_IN_N of the answers take SLOW_MS or more."""

import itertools
import os
import threading
import time

ONE_IN_N = int(os.environ.get("ONE_IN_N", "50"))
SLOW_S = float(os.environ.get("SLOW_MS", "200")) / 1000

_count = itertools.count(1)
_lock = threading.Lock()


def app(environ, start_response):
    with _lock:
        number = next(_count)
    if number % ONE_IN_N == 0:
        time.sleep(SLOW_S)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
