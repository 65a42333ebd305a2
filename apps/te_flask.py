"""TechEmpower's six test types on Flask, with SQLAlchemy's connection pool (QueuePool).

    /json                 {"message": "Hello, World!"}
    /db                   one random World row: {"id": N, "randomNumber": M}
    /queries?queries=N    N random rows, one query each (N clamped to 1..500)
    /fortunes             the Fortune rows plus one added at request time, sorted, escaped
    /updates?queries=N    N random rows, each given a new randomNumber, written back
    /plaintext            Hello, World!

It reads `TUNER_DB_DSN` (or `DATABASE_URL`) and its pool from `DB_POOL_SIZE`,
`DB_MAX_OVERFLOW`, `DB_POOL_TIMEOUT` (declared in `apps/te_flask.tuner.toml`, searched as
apps/db.py's are), one engine per server process, made on first use in that process. The
tables: `scripts/postgres start --techempower` (apps/te_schema.py). Without a database, or
without the tables, the import exits with one line; a request the database cannot serve answers
503 and logs one line the tuner reads. The page: docs/pages/techempower.md.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from apps import te_common as te

APP = "apps/te_flask.py"
# name -> type, default (SQLAlchemy's own), minimum
POOL_SETTINGS: dict[str, tuple[type, float, float]] = {
    "DB_POOL_SIZE": (int, 5, 1),
    "DB_MAX_OVERFLOW": (int, 10, 0),
    "DB_POOL_TIMEOUT": (float, 30.0, 0.1),
}

DSN = te.dsn(APP)
POOL = te.pool_settings(APP, POOL_SETTINGS)

try:
    import sqlalchemy
    from flask import Flask, Response, jsonify, request
    from sqlalchemy import exc as sa_exc
except ImportError:
    te.fail(APP, "needs Flask, SQLAlchemy and psycopg 3: pip install -r apps/requirements.txt")

te.check_database(APP, DSN)

# One engine (and so one pool) per process, made on first use in that process: a server that
# imports the app before forking (gunicorn preload_app) must not share connections between
# workers, and a pool made in the parent would be copied into every child.
_engine: sqlalchemy.Engine | None = None
_engine_pid = 0
_engine_lock = threading.Lock()


def engine() -> sqlalchemy.Engine:
    global _engine, _engine_pid
    if _engine is None or _engine_pid != os.getpid():
        with _engine_lock:
            if _engine is None or _engine_pid != os.getpid():
                _engine = sqlalchemy.create_engine(
                    DSN.replace("postgresql://", "postgresql+psycopg://", 1),
                    pool_size=POOL["DB_POOL_SIZE"],
                    max_overflow=POOL["DB_MAX_OVERFLOW"],
                    pool_timeout=POOL["DB_POOL_TIMEOUT"],
                    connect_args={"connect_timeout": 10},
                )
                _engine_pid = os.getpid()
    return _engine


def _pool_words() -> str:
    size, overflow = POOL["DB_POOL_SIZE"], POOL["DB_MAX_OVERFLOW"]
    opens = f"DB_POOL_SIZE {size} + DB_MAX_OVERFLOW {overflow}"
    return f"this process may open {size + overflow}: {opens}"


def _why(error: Exception) -> str:
    if isinstance(error, sa_exc.TimeoutError):
        return (
            f"{APP}: no free pooled connection within DB_POOL_TIMEOUT "
            f"{POOL['DB_POOL_TIMEOUT']:g} s (pool exhausted; {_pool_words()})"
        )
    return te.refusal_line(APP, error, _pool_words())


app = Flask(__name__)


@app.errorhandler(sa_exc.SQLAlchemyError)
def database_failed(error: Exception) -> tuple[Response, int]:
    line = _why(error)
    print(line, file=sys.stderr, flush=True)
    return jsonify(error=line), 503


def _read_worlds(connection: sqlalchemy.Connection, ids: list[int]) -> list[dict[str, int]]:
    # One query per row, as the test types require; the driver's own statement, as written.
    return [te.world(connection.exec_driver_sql(te.READ_WORLD, (i,)).one()) for i in ids]


@app.route("/json")
def json_serialization() -> Response:
    return jsonify(message=te.HELLO)


@app.route("/plaintext")
def plaintext() -> Response:
    return Response(te.HELLO, mimetype="text/plain")


@app.route("/db")
def single_query() -> Response:
    with engine().connect() as connection:
        worlds = _read_worlds(connection, te.world_ids(1))
    return jsonify(worlds[0])


@app.route("/queries")
def multiple_queries() -> Response:
    count = te.query_count(request.args.get("queries"))
    with engine().connect() as connection:
        worlds = _read_worlds(connection, te.world_ids(count))
    return jsonify(worlds)


@app.route("/fortunes")
def fortunes() -> Response:
    with engine().connect() as connection:
        rows: list[Any] = list(connection.exec_driver_sql(te.READ_FORTUNES).all())
    page = te.fortunes_page((int(row[0]), str(row[1])) for row in rows)
    return Response(page, content_type="text/html; charset=utf-8")


@app.route("/updates")
def updates() -> Response:
    count = te.query_count(request.args.get("queries"))
    with engine().begin() as connection:  # one transaction, committed at exit
        worlds = _read_worlds(connection, te.world_ids(count))
        for item in worlds:
            item["randomNumber"] = te.random_number()
        # In id order: two requests updating the same rows lock them in the same order.
        ordered = sorted(worlds, key=lambda w: w["id"])
        connection.exec_driver_sql(te.WRITE_WORLD, [(w["randomNumber"], w["id"]) for w in ordered])
    return jsonify(worlds)
