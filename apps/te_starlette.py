"""TechEmpower's six test types on Starlette (FastAPI's core), with psycopg's async pool.

    /json                 {"message": "Hello, World!"}
    /db                   one random World row: {"id": N, "randomNumber": M}
    /queries?queries=N    N random rows, one query each (N clamped to 1..500)
    /fortunes             the Fortune rows plus one added at request time, sorted, escaped
    /updates?queries=N    N random rows, each given a new randomNumber, written back
    /plaintext            Hello, World!

It reads `TUNER_DB_DSN` (or `DATABASE_URL`) and its pool from `DB_POOL_SIZE` and
`DB_POOL_TIMEOUT` (declared in `apps/te_starlette.tuner.toml`, searched as apps/async_db.py's
are), one pool per server process, made in that process's event loop on its first request.
The tables: `scripts/postgres start --techempower` (apps/te_schema.py). Without a database, or
without the tables, the import exits with one line; a request the database cannot serve answers
503 and logs one line the tuner reads. The page: docs/pages/techempower.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

from apps import te_common as te

APP = "apps/te_starlette.py"
# name -> type, default (psycopg_pool's min_size 4, timeout 30 s), minimum
POOL_SETTINGS: dict[str, tuple[type, float, float]] = {
    "DB_POOL_SIZE": (int, 4, 1),
    "DB_POOL_TIMEOUT": (float, 30.0, 0.1),
}

DSN = te.dsn(APP)
POOL = te.pool_settings(APP, POOL_SETTINGS)

try:
    import psycopg
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route
except ImportError:
    te.fail(APP, "needs Starlette, psycopg 3, psycopg_pool: pip install -r apps/requirements.txt")

te.check_database(APP, DSN)

# One pool per process and event loop, opened on the first request: a pool made at import time
# would belong to no loop yet, and one made before a fork would be shared by every worker.
_pool: AsyncConnectionPool | None = None
_pool_pid = 0
_pool_lock: asyncio.Lock | None = None


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
    size = POOL["DB_POOL_SIZE"]
    if isinstance(error, PoolTimeout):
        return (
            f"{APP}: no free pooled connection within DB_POOL_TIMEOUT "
            f"{POOL['DB_POOL_TIMEOUT']:g} s (pool exhausted; DB_POOL_SIZE {size} per process)"
        )
    return te.refusal_line(APP, error, f"this process opens DB_POOL_SIZE {size}")


Endpoint = Callable[[Request], Awaitable[Response]]


def uses_database(endpoint: Endpoint) -> Endpoint:
    """The endpoint, answering 503 with one logged line when the database cannot serve it."""

    async def guarded(request: Request) -> Response:
        try:
            return await endpoint(request)
        except (psycopg.Error, PoolTimeout) as error:
            line = _why(error)
            print(line, file=sys.stderr, flush=True)
            return JSONResponse({"error": line}, status_code=503)

    return guarded


async def json_serialization(request: Request) -> Response:
    return JSONResponse({"message": te.HELLO})


async def plaintext(request: Request) -> Response:
    return PlainTextResponse(te.HELLO)


async def _read_worlds(connection: psycopg.AsyncConnection, ids: list[int]) -> list[dict]:
    worlds = []
    for ident in ids:  # one query per row, as the test types require
        row = await (await connection.execute(te.READ_WORLD, (ident,))).fetchone()
        worlds.append(te.world(row))
    return worlds


@uses_database
async def single_query(request: Request) -> Response:
    async with (await pool()).connection() as connection:
        worlds = await _read_worlds(connection, te.world_ids(1))
    return JSONResponse(worlds[0])


@uses_database
async def multiple_queries(request: Request) -> Response:
    count = te.query_count(request.query_params.get("queries"))
    async with (await pool()).connection() as connection:
        worlds = await _read_worlds(connection, te.world_ids(count))
    return JSONResponse(worlds)


@uses_database
async def fortunes(request: Request) -> Response:
    async with (await pool()).connection() as connection:
        rows = await (await connection.execute(te.READ_FORTUNES)).fetchall()
    return HTMLResponse(te.fortunes_page(rows))


@uses_database
async def updates(request: Request) -> Response:
    count = te.query_count(request.query_params.get("queries"))
    async with (await pool()).connection() as connection:  # one transaction, committed at exit
        worlds = await _read_worlds(connection, te.world_ids(count))
        for item in worlds:
            item["randomNumber"] = te.random_number()
        # In id order: two requests updating the same rows lock them in the same order.
        changes = [(w["randomNumber"], w["id"]) for w in sorted(worlds, key=lambda w: w["id"])]
        async with connection.cursor() as cursor:
            await cursor.executemany(te.WRITE_WORLD, changes)
    return JSONResponse(worlds)


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    global _pool, _pool_lock
    yield
    if _pool is not None and _pool_pid == os.getpid():
        closing, _pool, _pool_lock = _pool, None, None  # a later loop makes its own
        await closing.close()


app = Starlette(
    routes=[
        Route("/json", json_serialization),
        Route("/db", single_query),
        Route("/queries", multiple_queries),
        Route("/fortunes", fortunes),
        Route("/updates", updates),
        Route("/plaintext", plaintext),
    ],
    lifespan=lifespan,
)
