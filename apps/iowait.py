"""Plain WSGI that waits 50 ms per request, like a slow database call.

Uses `time.sleep`, so gevent's monkey patching and thread pools can overlap the waits.
(Not named `io.py`: that would shadow the standard library's `io` when loaded by path.)
"""

import time

WAIT_S = 0.050
BODY = b"done waiting"


def app(environ, start_response):
    time.sleep(WAIT_S)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))])
    return [BODY]
