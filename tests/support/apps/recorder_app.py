"""A WSGI app that appends `METHOD PATH CLIENT-PORT CONNECTION-HEADER` for every request to the
file named by RECORD_FILE: it shows from the server's side what the load generator really sent,
and over how many connections (one client port per connection; "-" for no Connection header)."""

import os

RECORD_FILE = os.environ.get("RECORD_FILE", os.devnull)


def app(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length:
        environ["wsgi.input"].read(length)
    port, connection = environ.get("REMOTE_PORT", ""), environ.get("HTTP_CONNECTION") or "-"
    line = f"{environ['REQUEST_METHOD']} {environ['PATH_INFO']} {port} {connection.lower()}\n"
    fd = os.open(RECORD_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one write with O_APPEND: lines from workers never mix
    finally:
        os.close(fd)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
