"""Plain WSGI doing ~5 ms of pure-Python CPU work per request (holds the GIL throughout)."""

# Iterations calibrated on the reference machine to take about 5 ms; deterministic work,
# not a timed loop, so a slower or busier CPU shows up as a slower server.
ITERATIONS = 75_000


def _work() -> int:
    total = 0
    for i in range(ITERATIONS):
        total = (total + i * i) % 1_000_003
    return total


def app(environ, start_response):
    body = str(_work()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
