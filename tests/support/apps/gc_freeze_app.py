"""A WSGI app that makes many small objects the cyclic collector tracks when it is imported
(tests/servers/test_memory_levers.py): GC_FREEZE_APP_OBJECTS lists of one int each, about
100 bytes apiece, spread over every page of the memory they take.

GET /collect runs a full collection in the worker that serves it first: the walk over every
tracked object that copies a preloaded app's pages into the worker unless gc.freeze() moved
them out of its reach. Every answer is that worker's collector state,
"<gc.get_freeze_count()> <1 if gc.isenabled() else 0>".
"""

import gc
import os

OBJECTS = [[i] for i in range(int(os.environ.get("GC_FREEZE_APP_OBJECTS", "400000")))]


def app(environ, start_response):
    if environ.get("PATH_INFO") == "/collect":
        gc.collect()
    body = f"{gc.get_freeze_count()} {int(gc.isenabled())}".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
