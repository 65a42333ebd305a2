"""An ASGI 3 app that answers with two environment variables as the server imported it with
(the ASGI twin of env_app.py, for the servers that serve ASGI)."""

import os

NAMES = ("TUNER_TEST_APP_SETTING", "TUNER_TEST_APP_WORDS")
BODY = "|".join(os.environ.get(name, "unset") for name in NAMES).encode()
HEADERS = [(b"content-type", b"text/plain"), (b"content-length", str(len(BODY)).encode())]


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
