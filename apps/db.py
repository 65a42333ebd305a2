"""A WSGI app with a real database behind it, as most production apps have.

Each request runs a few SQL queries against PostgreSQL in one transaction (a read by primary
key, an aggregate over a join, one request in WRITE_EVERY an update; `?db_wait_ms=N` adds a
slow query), through a SQLAlchemy QueuePool per server process. It reads `TUNER_DB_DSN` (or
`DATABASE_URL`) and its pool from `DB_POOL_SIZE`, `DB_MAX_OVERFLOW`, `DB_POOL_TIMEOUT`
(declared in `apps/db.tuner.toml`); when the database refuses or the pool runs dry it answers
503 and logs one line the tuner reads. `python -m apps.db --init` creates the tables and the
seed rows. How to run it, and what it shows: docs/pages/deployed/app-settings.md.

(Loaded by path it is `apps.db`, as apps/ is a package: imported from the folder above it.)
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import urllib.parse
from typing import Any

DSN_ENVS = ("TUNER_DB_DSN", "DATABASE_URL")
USERS = 10_000
ORDERS_PER_USER = 5
WRITE_EVERY = 10  # one request in ten writes, as a read-mostly app does

# The settings this app reads, their defaults (SQLAlchemy's own) and their types.
POOL_SETTINGS: dict[str, tuple[type, float]] = {
    "DB_POOL_SIZE": (int, 5),
    "DB_MAX_OVERFLOW": (int, 10),
    "DB_POOL_TIMEOUT": (float, 30.0),
}

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    id integer PRIMARY KEY,
    name text NOT NULL,
    visits integer NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS orders (
    id serial PRIMARY KEY,
    user_id integer NOT NULL REFERENCES users (id),
    amount_cents integer NOT NULL
);
CREATE INDEX IF NOT EXISTS orders_user_id ON orders (user_id);
"""
SEED = f"""
INSERT INTO users (id, name)
    SELECT n, 'user ' || n FROM generate_series(1, {USERS}) AS n
    ON CONFLICT (id) DO NOTHING;
INSERT INTO orders (user_id, amount_cents)
    SELECT 1 + mod(n, {USERS}), 100 + mod(n * 37, 9900)
    FROM generate_series(1, {USERS * ORDERS_PER_USER}) AS n
    WHERE NOT EXISTS (SELECT 1 FROM orders);
ANALYZE users;
ANALYZE orders;
"""
READ_USER = "SELECT id, name, visits FROM users WHERE id = :id"
ORDER_TOTALS = """
SELECT count(o.id), coalesce(sum(o.amount_cents), 0)
FROM users u JOIN orders o ON o.user_id = u.id
WHERE u.id = :id
"""
WRITE_VISIT = "UPDATE users SET visits = visits + 1 WHERE id = :id"
# `?db_wait_ms=N`: the database also works N ms per request (a slow query), holding the
# connection meanwhile, as real queries that touch the disk do; at most MAX_WAIT_MS.
SLOW_QUERY = "SELECT pg_sleep(:seconds)"
MAX_WAIT_MS = 1000


def _fail(message: str) -> None:
    """One clear line, no traceback: the server (and the tuner's import check) shows it."""
    sys.exit(f"apps/db.py: {message}")


def _dsn() -> str:
    for name in DSN_ENVS:
        if value := os.environ.get(name, "").strip():
            scheme, sep, rest = value.partition("://")
            if not sep or scheme not in ("postgresql", "postgres", "postgresql+psycopg"):
                _fail(f"{name}={value!r}: expected a postgresql://USER@HOST:PORT/DB URL")
            return f"postgresql+psycopg://{rest}"  # psycopg 3, whatever SQLAlchemy's default
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
        if value < (1 if name == "DB_POOL_SIZE" else 0):
            _fail(f"{name}={raw!r}: expected a value >= {1 if name == 'DB_POOL_SIZE' else 0}")
        values[name] = value
    return values


DSN = _dsn()
POOL = _pool_settings()

try:
    import psycopg
    import sqlalchemy
    from sqlalchemy import exc as sa_exc
except ImportError:
    _fail("needs SQLAlchemy and psycopg 3: pip install -r apps/requirements.txt")

# One engine (and so one pool) per process, made on first use in that process: a server that
# imports the app before forking (gunicorn preload_app) must not share connections between
# workers, and a pool made in the parent would be copied into every child.
_engine: sqlalchemy.Engine | None = None
_engine_pid = 0
_engine_lock = threading.Lock()


def _ask_max_connections() -> str:
    """PostgreSQL's max_connections, asked once when the process imports the app, for the log
    lines below; "unknown" if it cannot be asked. A worker that imports the app while the load
    already holds every slot cannot ask; with gunicorn's preload_app the master asks, before
    any worker serves."""
    try:
        with psycopg.connect(DSN.replace("+psycopg", "", 1), connect_timeout=3) as connection:
            row = connection.execute("SHOW max_connections").fetchone()
    except psycopg.Error:
        return "unknown"
    return str(row[0]) if row else "unknown"


_max_connections: str = _ask_max_connections()
_requests = 0


def engine() -> sqlalchemy.Engine:
    global _engine, _engine_pid
    if _engine is None or _engine_pid != os.getpid():
        with _engine_lock:
            if _engine is None or _engine_pid != os.getpid():
                _engine = sqlalchemy.create_engine(
                    DSN,
                    pool_size=POOL["DB_POOL_SIZE"],
                    max_overflow=POOL["DB_MAX_OVERFLOW"],
                    pool_timeout=POOL["DB_POOL_TIMEOUT"],
                    connect_args={"connect_timeout": 10},
                )
                _engine_pid = os.getpid()
    return _engine


def _pool_words() -> str:
    size, overflow = POOL["DB_POOL_SIZE"], POOL["DB_MAX_OVERFLOW"]
    return (
        f"this process may open {size + overflow}: DB_POOL_SIZE {size} + DB_MAX_OVERFLOW "
        f"{overflow}; max_connections {_max_connections}"
    )


def _why(error: Exception) -> str:
    """The log line for a request the database could not serve (one line, the cause first)."""
    if isinstance(error, sa_exc.TimeoutError):
        return (
            f"apps/db.py: no free pooled connection within DB_POOL_TIMEOUT "
            f"{POOL['DB_POOL_TIMEOUT']:g} s (pool exhausted; {_pool_words()})"
        )
    text = " ".join(str(getattr(error, "orig", None) or error).split())
    if "too many clients" in text or "connection slots are reserved" in text:
        refused = "PostgreSQL refused a connection: too many clients already"
        return f"apps/db.py: {refused} ({_pool_words()})"
    if "does not exist" in text:
        return f"apps/db.py: {text[:120]}: create the tables with `python -m apps.db --init`"
    return f"apps/db.py: database error: {text[:200]}"


def handle(user_id: int, wait_ms: int = 0) -> dict[str, Any]:
    global _max_connections, _requests
    _requests += 1  # a per-process count, good enough to write one request in WRITE_EVERY
    with engine().begin() as connection:
        if _max_connections == "unknown":  # once per process, for the log lines above
            _max_connections = str(connection.exec_driver_sql("SHOW max_connections").scalar())
        row = connection.execute(sqlalchemy.text(READ_USER), {"id": user_id}).one_or_none()
        if row is None:
            raise LookupError(user_id)
        count, total = connection.execute(sqlalchemy.text(ORDER_TOTALS), {"id": user_id}).one()
        if wait_ms:
            connection.execute(sqlalchemy.text(SLOW_QUERY), {"seconds": wait_ms / 1000})
        if _requests % WRITE_EVERY == 0:
            connection.execute(sqlalchemy.text(WRITE_VISIT), {"id": user_id})
    return {"id": row.id, "name": row.name, "visits": row.visits, "orders": count, "cents": total}


def _respond(start_response: Any, status: str, payload: object) -> list[bytes]:
    body = json.dumps(payload).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    start_response(status, headers)
    return [body]


def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """GET /users/ID answers for that user; any other path for a random one. The query
    `db_wait_ms=N` adds a slow query of N ms."""
    path = environ.get("PATH_INFO", "/")
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    wait = (query.get("db_wait_ms") or ["0"])[0]
    wait_ms = min(int(wait), MAX_WAIT_MS) if wait.isdigit() else 0
    head, _, tail = path.rpartition("/")
    user_id = int(tail) if head == "/users" and tail.isdigit() else random.randint(1, USERS)
    try:
        return _respond(start_response, "200 OK", handle(user_id, wait_ms))
    except LookupError:
        return _respond(start_response, "404 Not Found", {"error": f"no user {user_id}"})
    except sa_exc.SQLAlchemyError as error:
        line = _why(error)
        print(line, file=sys.stderr, flush=True)
        return _respond(start_response, "503 Service Unavailable", {"error": line})


def init() -> str:
    """Create the tables and seed rows; returns what is there."""
    with engine().begin() as connection:
        connection.exec_driver_sql(SCHEMA)
        connection.exec_driver_sql(SEED)
        users = connection.exec_driver_sql("SELECT count(*) FROM users").scalar()
        orders = connection.exec_driver_sql("SELECT count(*) FROM orders").scalar()
    return f"apps/db.py: {users} users, {orders} orders"


if __name__ == "__main__":
    if sys.argv[1:] != ["--init"]:
        _fail("usage: python -m apps.db --init  (creates the tables and seed rows)")
    try:
        print(init())
    except sa_exc.SQLAlchemyError as error:
        _fail(f"cannot create the tables: {' '.join(str(error).split())[:300]}")
