"""An ASGI 3 app that answers with what serves it: the module of the event loop running it,
whether the httptools parser is loaded in its process, and its pid (`loop|httptools|pid`)."""

import asyncio
import os
import sys

HEADERS = [(b"content-type", b"text/plain")]


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
    body = f"{loop}|{'httptools' in sys.modules}|{os.getpid()}".encode()
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": body})
