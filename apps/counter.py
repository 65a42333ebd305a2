"""Plain WSGI that counts every request it serves, for exact accounting tests.

The count lives in a file shared by all workers and processes (append one byte per request,
atomic with O_APPEND); `GET /count` returns how many requests were served before it.
`COUNTER_FILE` in the environment chooses the file. `GET /streamed` is counted too but sends
no Content-Length, so under a server that neither chunks nor keeps the connection (uWSGI
--http-socket) its body ends when the connection closes. A request body is read and dropped,
so a large POST is consumed before the server closes the connection. `GET /events` is a short
event stream (five events 20 ms apart) and, like `/count`, is not counted: the load's streams
and probes beside the counted requests leave the count to the requests alone.
"""

import os
import tempfile
import time

COUNTER_FILE = os.environ.get("COUNTER_FILE") or os.path.join(
    tempfile.gettempdir(), "tuner-counter.log"
)


def _served() -> int:
    try:
        return os.path.getsize(COUNTER_FILE)
    except FileNotFoundError:
        return 0


def _events():
    for number in range(5):
        time.sleep(0.02)
        yield f"data: {number}\n\n".encode()


def app(environ, start_response):
    if environ.get("PATH_INFO") == "/events":
        start_response("200 OK", [("Content-Type", "text/event-stream")])
        return _events()
    length = int(environ.get("CONTENT_LENGTH") or 0)
    while length > 0:
        chunk = environ["wsgi.input"].read(min(length, 65536))
        if not chunk:
            break
        length -= len(chunk)
    if environ.get("PATH_INFO") == "/count":
        body = str(_served()).encode()
    else:
        fd = os.open(COUNTER_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, b".")
        finally:
            os.close(fd)
        body = b"counted"
    headers = [("Content-Type", "text/plain")]
    if environ.get("PATH_INFO") != "/streamed":
        headers.append(("Content-Length", str(len(body))))
    start_response("200 OK", headers)
    return [body]
