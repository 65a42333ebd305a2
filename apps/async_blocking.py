"""The bad example: ASGI 3 that waits 50 ms per request with `time.sleep` inside `async def`.

A synchronous call in a coroutine never yields to the event loop: the loop sleeps with it, and
every other connection of that worker waits, so one worker serves one request at a time
(about 20 a second) however many connections it holds. No server setting fixes it; awaiting
`asyncio.sleep` (apps/async_wait.py, its correct twin), or running the sync call in a thread
with `asyncio.to_thread`, does. The tuner reports it ("event loop blocked").
"""

import time

WAIT_S = 0.050
BODY = b"done waiting"
HEADERS = [(b"content-type", b"text/plain"), (b"content-length", str(len(BODY)).encode())]


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    time.sleep(WAIT_S)  # the defect this app exists to show: it blocks the event loop
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
