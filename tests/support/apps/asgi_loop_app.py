"""An ASGI 3 app that answers with the pid of the process it runs in and the event loop it runs
on (`asyncio` and the loop's class, or `trio`), so a test sees which loop a server's worker
really runs."""

import asyncio
import os


def _loop() -> str:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not on an asyncio loop: hypercorn's trio worker runs trio's own
        return "trio"
    return f"asyncio {type(loop).__module__}.{type(loop).__name__}"


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = f"{os.getpid()} {_loop()}".encode()
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
