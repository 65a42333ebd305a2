"""An ASGI app with a real database behind it, the async twin of apps/db.py.

Plain ASGI 3 on psycopg's async pool (`psycopg_pool.AsyncConnectionPool`), one pool per server
process, made in that process's event loop on its first request. Each request runs the queries
apps/db.py runs, on the same tables (create them once with `python -m apps.db --init`): a read
by primary key, an aggregate over a join, one request in WRITE_EVERY an update; `?db_wait_ms=N`
adds a slow query. It reads `TUNER_DB_DSN` (or `DATABASE_URL`) and its pool from `DB_POOL_SIZE`
and `DB_POOL_TIMEOUT` (declared in `apps/async_db.tuner.toml`). One event loop serves every
connection of its process, so the pool, not a thread count, bounds how many queries run at once;
when the database refuses or the pool runs dry it answers 503 and logs one line the tuner reads.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import urllib.parse
from typing import Any

DSN_ENVS = ("TUNER_DB_DSN", "DATABASE_URL")
USERS = 10_000  # the rows `python -m apps.db --init` seeds
WRITE_EVERY = 10
MAX_WAIT_MS = 1000

# The settings this app reads, their defaults (psycopg_pool's min_size 4, timeout 30 s).
POOL_SETTINGS: dict[str, tuple[type, float]] = {
    "DB_POOL_SIZE": (int, 4),
    "DB_POOL_TIMEOUT": (float, 30.0),
}

READ_USER = "SELECT id, name, visits FROM users WHERE id = %s"
ORDER_TOTALS = """
SELECT count(o.id), coalesce(sum(o.amount_cents), 0)
FROM users u JOIN orders o ON o.user_id = u.id
WHERE u.id = %s
"""
WRITE_VISIT = "UPDATE users SET visits = visits + 1 WHERE id = %s"
SLOW_QUERY = "SELECT pg_sleep(%s)"


def _fail(message: str) -> None:
    """One clear line, no traceback: the server (and the tuner's import check) shows it."""
    sys.exit(f"apps/async_db.py: {message}")


def _dsn() -> str:
    for name in DSN_ENVS:
        if value := os.environ.get(name, "").strip():
            scheme, sep, rest = value.partition("://")
            if not sep or scheme not in ("postgresql", "postgres"):
                _fail(f"{name}={value!r}: expected a postgresql://USER@HOST:PORT/DB URL")
            return f"postgresql://{rest}"
    _fail(
        "set TUNER_DB_DSN to a PostgreSQL URL (e.g. the one `scripts/postgres start` prints), "
        "then create the tables once with `python -m apps.db --init`"
    )
    raise AssertionError("unreachable")


def _pool_settings() -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, (kind, default) in POOL_SETTINGS.items():
        raw = os.environ.get(name, "").strip()
        try:
            value = kind(raw) if raw else kind(default)
        except ValueError:
            _fail(f"{name}={raw!r}: expected {'an integer' if kind is int else 'a number'}")
        if value < (1 if name == "DB_POOL_SIZE" else 0.1):
            _fail(f"{name}={raw!r}: expected a value >= {1 if name == 'DB_POOL_SIZE' else 0.1}")
        values[name] = value
    return values


DSN = _dsn()
POOL = _pool_settings()

try:
    import psycopg
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
except ImportError:
    _fail("needs psycopg 3 and psycopg_pool: pip install -r apps/requirements.txt")

# One pool per process and event loop, opened on the first request: a pool made at import time
# would belong to no loop yet, and one made before a fork would be shared by every worker.
_pool: AsyncConnectionPool | None = None
_pool_pid = 0
_pool_lock: asyncio.Lock | None = None
_requests = 0


async def pool() -> AsyncConnectionPool:
    global _pool, _pool_pid, _pool_lock
    if _pool is not None and _pool_pid == os.getpid():
        return _pool
    if _pool_lock is None or _pool_pid != os.getpid():
        _pool_lock, _pool_pid, _pool = asyncio.Lock(), os.getpid(), None
    async with _pool_lock:
        if _pool is None:
            made = AsyncConnectionPool(
                DSN,
                min_size=POOL["DB_POOL_SIZE"],
                max_size=POOL["DB_POOL_SIZE"],
                timeout=POOL["DB_POOL_TIMEOUT"],
                kwargs={"connect_timeout": 10},
                open=False,
            )
            await made.open(wait=False)  # connections are made in the background
            _pool = made
    return _pool


def _why(error: Exception) -> str:
    """The log line for a request the database could not serve (one line, the cause first)."""
    size = POOL["DB_POOL_SIZE"]
    if isinstance(error, PoolTimeout):
        return (
            f"apps/async_db.py: no free pooled connection within DB_POOL_TIMEOUT "
            f"{POOL['DB_POOL_TIMEOUT']:g} s (pool exhausted; DB_POOL_SIZE {size} per process)"
        )
    text = " ".join(str(error).split())
    if "too many clients" in text or "connection slots are reserved" in text:
        return (
            "apps/async_db.py: PostgreSQL refused a connection: too many clients already "
            f"(this process opens DB_POOL_SIZE {size})"
        )
    if "does not exist" in text:
        return f"apps/async_db.py: {text[:120]}: create the tables with `python -m apps.db --init`"
    return f"apps/async_db.py: database error: {text[:200]}"


async def handle(user_id: int, wait_ms: int = 0) -> dict[str, Any]:
    global _requests
    _requests += 1
    async with (await pool()).connection() as connection:  # one transaction, committed at exit
        row = await (await connection.execute(READ_USER, (user_id,))).fetchone()
        if row is None:
            raise LookupError(user_id)
        count, total = await (await connection.execute(ORDER_TOTALS, (user_id,))).fetchone()
        if wait_ms:
            await connection.execute(SLOW_QUERY, (wait_ms / 1000,))
        if _requests % WRITE_EVERY == 0:
            await connection.execute(WRITE_VISIT, (user_id,))
    return {"id": row[0], "name": row[1], "visits": row[2], "orders": count, "cents": total}


async def _respond(send: Any, status: int, payload: object) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Any, send: Any) -> None:
    while (message := await receive())["type"] != "lifespan.shutdown":
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
    if _pool is not None and _pool_pid == os.getpid():
        await _pool.close()
    await send({"type": "lifespan.shutdown.complete"})


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """GET /users/ID answers for that user; any other path for a random one. The query
    `db_wait_ms=N` adds a slow query of N ms."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
    wait = (query.get("db_wait_ms") or ["0"])[0]
    wait_ms = min(int(wait), MAX_WAIT_MS) if wait.isdigit() else 0
    head, _, tail = scope.get("path", "/").rpartition("/")
    user_id = int(tail) if head == "/users" and tail.isdigit() else random.randint(1, USERS)
    try:
        await _respond(send, 200, await handle(user_id, wait_ms))
    except LookupError:
        await _respond(send, 404, {"error": f"no user {user_id}"})
    except (psycopg.Error, PoolTimeout) as error:
        line = _why(error)
        print(line, file=sys.stderr, flush=True)
        await _respond(send, 503, {"error": line})
