"""Plain ASGI 3: the smallest possible response, to measure the server's own overhead
(the ASGI twin of hello.py)."""

BODY = b"hello world"
HEADERS = [(b"content-type", b"text/plain"), (b"content-length", str(len(BODY)).encode())]


async def app(scope, receive, send):
    if scope["type"] == "lifespan":  # servers that run the lifespan protocol: nothing to set up
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
