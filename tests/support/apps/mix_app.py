"""A WSGI app with two paths of different cost, for per-template figures: `/fast` answers at
once, `/slow` after a 30 ms wait (a sleep: threads overlap it, so its cost does not queue the
fast path behind it). Any other path is 404."""

import time

SLOW_S = 0.030


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path.startswith("/slow"):
        time.sleep(SLOW_S)
    elif not path.startswith("/fast"):
        start_response("404 Not Found", [("Content-Length", "0")])
        return [b""]
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
