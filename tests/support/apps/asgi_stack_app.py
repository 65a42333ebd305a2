"""An ASGI 3 app that answers with what runs it: the class of its event loop and the module of
the server code that called it (the frame that awaits the app), as `LOOP|MODULE`. A test reads
which loop and which HTTP implementation a server really runs."""

import asyncio
import sys


def _caller_module(skip: str) -> str:
    """The first module up the stack that is neither this file nor `skip` (middleware)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name != __name__ and not name.startswith(skip):
            return name
        frame = frame.f_back
    return "unknown"


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    loop = type(asyncio.get_running_loop())
    body = f"{loop.__module__}.{loop.__name__}|{_caller_module('uvicorn.middleware')}".encode()
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
