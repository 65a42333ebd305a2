"""Plain WSGI: the smallest possible response, to measure the server's own overhead."""

BODY = b"hello world"


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))])
    return [BODY]
