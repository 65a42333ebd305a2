"""Plain WSGI whose requests wait in a blocking C client, one connection per process.

Each request does a little Python work, then two waits inside C code, as a database or RPC
client written in C does them: a short one holding the process's single connection (a pool of
one, as many apps size theirs per process), and a longer one that needs no connection (a call
to another service). The waits release the GIL, so threads overlap them; they are not Python
sockets, so gevent's monkey patching cannot make them cooperative, and a greenlet that waits
blocks its whole process. The connection caps each process, so throughput needs several
processes, each with several threads: the shape where a search that stays on one process per
model never looks.

The query's length sets how many processes the best needs: `C_DRIVER_HELD_US` (read at import,
default 1,000 µs) caps each process near 1 / that many requests a second, so on one CPU the
best needs three processes or more. Until 2026-12-06 it was 3,000, whose best (8-11 processes
on one CPU) lies past the search space's bound of `4*cpus+1` processes.

Standard library only (`ctypes` calls libc's `usleep`).
"""

import ctypes
import os
import threading

_LIBC = ctypes.CDLL(None, use_errno=True)
HELD_US = int(os.environ.get("C_DRIVER_HELD_US", "1000"))  # the query on the one connection
OTHER_US = 20_000  # the call to another service, no connection needed
PYTHON_WORK = 3000  # loop iterations of Python work per request, holding the GIL
BODY = b"driver done"

_CONNECTION = threading.Lock()  # one per process: each forked worker holds its own copy


def _python_work() -> int:
    total = 0
    for index in range(PYTHON_WORK):
        total += index * index % 7
    return total


def app(environ, start_response):
    _python_work()
    with _CONNECTION:
        _LIBC.usleep(HELD_US)
    _LIBC.usleep(OTHER_US)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))])
    return [BODY]
