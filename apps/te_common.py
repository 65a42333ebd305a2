"""What TechEmpower's test types ask of every app, said once for apps/te_starlette.py and
apps/te_flask.py: the database URL and pool settings read from the environment (as apps/db.py
reads them), a check at startup that the database is there and seeded, the `queries` count
clamped to 1..500, the fortunes page (the fortune added at request time, sorted by message,
escaped), and the one line a request the database could not serve logs.

Each failure is one line, no traceback: at import (no URL, no server, no tables) the app exits
with it, so the tuner's import check stops the study before a trial; under load (PostgreSQL
refusing a connection, the pool running dry) the request answers 503 and logs it, and the
app's `.tuner.toml` names those lines, so the trial is recorded with them.
"""

from __future__ import annotations

import html
import os
import random
import sys
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from apps.te_schema import HIGHEST_NUMBER, WORLD_ROWS

DSN_ENVS = ("TUNER_DB_DSN", "DATABASE_URL")
MAX_QUERIES = 500
HELLO = "Hello, World!"
EXTRA_FORTUNE = "Additional fortune added at request time."
SEED_HINT = "seed it once with `scripts/postgres techempower --url URL`"
REFUSED = ("too many clients", "connection slots are reserved")

READ_WORLD = 'SELECT id, "randomNumber" FROM "World" WHERE id = %s'
READ_FORTUNES = 'SELECT id, message FROM "Fortune"'
WRITE_WORLD = 'UPDATE "World" SET "randomNumber" = %s WHERE id = %s'

PAGE_HEAD = (
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
    "<tr><th>id</th><th>message</th></tr>"
)
PAGE_TAIL = "</table></body></html>"


def fail(app: str, message: str) -> NoReturn:
    """One clear line, no traceback: the server (and the tuner's import check) shows it."""
    sys.exit(f"{app}: {message}")


def dsn(app: str) -> str:
    """The postgresql:// URL in TUNER_DB_DSN (or DATABASE_URL); exits with one line if none."""
    for name in DSN_ENVS:
        if value := os.environ.get(name, "").strip():
            scheme, sep, rest = value.partition("://")
            if not sep or scheme not in ("postgresql", "postgres"):
                fail(app, f"{name}={value!r}: expected a postgresql://USER@HOST:PORT/DB URL")
            return f"postgresql://{rest}"
    fail(
        app,
        "set TUNER_DB_DSN to a PostgreSQL URL with TechEmpower's tables, e.g. "
        "`export TUNER_DB_DSN=$(scripts/postgres start --techempower)`",
    )


def pool_settings(app: str, declared: Mapping[str, tuple[type, float, float]]) -> dict[str, Any]:
    """Each declared variable (name -> type, default, minimum) read from the environment."""
    values: dict[str, Any] = {}
    for name, (kind, default, minimum) in declared.items():
        raw = os.environ.get(name, "").strip()
        try:
            value = kind(raw) if raw else kind(default)
        except ValueError:
            fail(app, f"{name}={raw!r}: expected {'an integer' if kind is int else 'a number'}")
        if value < minimum:
            fail(app, f"{name}={raw!r}: expected a value >= {minimum:g}")
        values[name] = value
    return values


def where(url: str) -> str:
    """HOST:PORT/DB of a URL, without its user or password, for the lines the app logs."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'}"


def check_database(app: str, url: str) -> None:
    """At import: exit with one line if PostgreSQL cannot be reached or the tables are not
    there. A refusal for too many clients passes: the server may be starting its processes
    while another holds the slots, and the requests say it with the pool's figures."""
    try:
        import psycopg
    except ImportError:
        fail(app, "needs psycopg 3: pip install -r apps/requirements.txt")
    try:
        with psycopg.connect(url, connect_timeout=5) as connection:
            for table in ("World", "Fortune"):
                connection.execute(f'SELECT 1 FROM "{table}" LIMIT 1')
    except psycopg.errors.UndefinedTable as error:
        fail(app, f"{one_line(error)} in {where(url)}: {SEED_HINT}")
    except psycopg.Error as error:
        text = one_line(error)
        if not any(words in text for words in REFUSED):
            fail(app, f"cannot reach PostgreSQL at {where(url)}: {text[:200]}")


def one_line(error: BaseException) -> str:
    return " ".join(str(getattr(error, "orig", None) or error).split())


def refusal_line(app: str, error: BaseException, pool_words: str) -> str:
    """The log line for a request the database could not serve (the cause first)."""
    text = one_line(error)
    if any(words in text for words in REFUSED):
        return f"{app}: PostgreSQL refused a connection: too many clients already ({pool_words})"
    if "does not exist" in text:
        return f"{app}: {text[:120]}: {SEED_HINT}"
    return f"{app}: database error: {text[:200]}"


def query_count(raw: str | None) -> int:
    """The `queries` parameter as TechEmpower reads it: missing or not a number is 1, below 1
    is 1, above 500 is 500."""
    try:
        count = int(raw) if raw is not None else 1
    except ValueError:
        return 1
    return min(max(count, 1), MAX_QUERIES)


def world_ids(count: int) -> list[int]:
    """`count` distinct random row ids: an update of the same row twice in one request would
    answer a value the table no longer holds."""
    return random.sample(range(1, WORLD_ROWS + 1), count)


def random_number() -> int:
    return random.randint(1, HIGHEST_NUMBER)


def world(row: Iterable[int]) -> dict[str, int]:
    ident, number = row
    return {"id": ident, "randomNumber": number}


def fortunes_page(rows: Iterable[tuple[int, str]]) -> str:
    """The fortunes page: the rows read plus the one added at request time, sorted by message,
    every message escaped."""
    every = [*rows, (0, EXTRA_FORTUNE)]
    every.sort(key=lambda row: row[1])
    body = "".join(
        f"<tr><td>{ident}</td><td>{html.escape(text)}</td></tr>" for ident, text in every
    )
    return PAGE_HEAD + body + PAGE_TAIL
