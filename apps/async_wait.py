"""Plain ASGI 3 that waits 50 ms per request with `asyncio.sleep`, like an awaited database
call: one event loop can overlap every wait (the ASGI twin of iowait.py)."""

import asyncio

WAIT_S = 0.050
BODY = b"done waiting"
HEADERS = [(b"content-type", b"text/plain"), (b"content-length", str(len(BODY)).encode())]


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await asyncio.sleep(WAIT_S)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
