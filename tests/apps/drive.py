"""Drive a sample app in-process, without a server: one GET through its ASGI or WSGI callable,
each body chunk kept with the moment it was sent, and an ASGI app's lifespan around a block."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from werkzeug.test import create_environ

ASGI = {"version": "3.0", "spec_version": "2.3"}


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # names in lower case
    chunks: list[tuple[float, bytes]]  # (seconds since the request began, a non-empty chunk)

    @property
    def body(self) -> bytes:
        return b"".join(chunk for _, chunk in self.chunks)


async def asgi_get(app: Any, path: str, query: str = "") -> Reply:
    """GET `path` from an ASGI 3 app; the client stays connected until the response ends."""
    started = time.perf_counter()
    reply = Reply(0, {}, [])
    ended = asyncio.Event()
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await ended.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            reply.status = message["status"]
            reply.headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            if message.get("body"):
                reply.chunks.append((time.perf_counter() - started, message["body"]))
            if not message.get("more_body", False):
                ended.set()

    scope = {
        "type": "http",
        "asgi": ASGI,
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    await app(scope, receive, send)
    assert ended.is_set(), f"GET {path}: the app returned before its last body message"
    return reply


@contextlib.asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    """The app started (its lifespan's startup done) for the block, then shut down."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    scope = {"type": "lifespan", "asgi": ASGI, "state": {}}
    running = asyncio.create_task(app(scope, inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    assert (await outbox.get())["type"] == "lifespan.startup.complete"
    try:
        yield
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        assert (await outbox.get())["type"] == "lifespan.shutdown.complete"
        await running


def wsgi_get(app: Callable[..., Iterable[bytes]], path: str, query: str = "") -> Reply:
    """GET `path` from a WSGI app, reading its body as a server does, chunk by chunk."""
    started = time.perf_counter()
    reply = Reply(0, {}, [])

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        reply.status = int(status.split()[0])
        reply.headers = {name.lower(): value for name, value in headers}

    body = app(create_environ(path, query_string=query), start_response)
    try:
        for chunk in body:
            if chunk:
                reply.chunks.append((time.perf_counter() - started, chunk))
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()
    return reply
