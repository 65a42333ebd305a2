"""TechEmpower's test types in our three apps (apps/te_starlette.py, apps/te_flask.py, the Django
project's views), in process against a real PostgreSQL seeded by `scripts/postgres techempower`:
each endpoint checked by the rules of TechEmpower's public requirements (the JSON shapes, the
`queries` clamp, the fortunes sorted, escaped and with the one added at request time, updates
that persist), the seeding itself, and a database that refuses connections: 503 and the line
the app's settings file names.

No web server: Starlette's TestClient, Flask's test client and Django's test client call the
apps in this process. The cluster is `tests/support/postgres.py`'s, as tests/commands/test_db_app.py
uses it, and so is its marker: the fixture requests `real_servers` (a PostgreSQL is started).
"""

from __future__ import annotations

import contextlib
import html
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType

import psycopg
import pytest

from tests.support.cli import REPO
from tests.support.postgres import throwaway_postgres
from tuner.appsettings import load_app_settings

MAX_CONNECTIONS = 20
DJANGO_PROJECT = REPO / "apps" / "djangoproject"
EXTRA = "Additional fortune added at request time."
FIXED_ENV = ("TUNER_DB_DSN", "DATABASE_URL", "DB_POOL_SIZE", "DB_MAX_OVERFLOW", "DB_POOL_TIMEOUT")


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    text: str

    def json(self) -> object:
        return json.loads(self.text)


Get = Callable[[str], Answer]


def seed(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "postgres"), "techempower", "--url", url],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def database(real_servers: None) -> Iterator[str]:
    """The URL of a fresh cluster with TechEmpower's tables, seeded by the user's command."""
    with throwaway_postgres(max_connections=MAX_CONNECTIONS) as url:
        done = seed(url)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "scripts/postgres: 10000 worlds, 12 fortunes"
        yield url


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in (*FIXED_ENV, *values)}
    for name in FIXED_ENV:
        os.environ.pop(name, None)
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def fresh(module: str, **env: str) -> ModuleType:
    """The app module imported anew with `env` (each reads its settings when it is imported)."""
    sys.modules.pop(module, None)
    with environment(**env):
        return importlib.import_module(module)


@contextlib.contextmanager
def starlette_client(url: str, **env: str) -> Iterator[Get]:
    from starlette.testclient import TestClient

    app = fresh("apps.te_starlette", TUNER_DB_DSN=url, **env).app
    with TestClient(app) as client:

        def get(path: str) -> Answer:
            answer = client.get(path)
            return Answer(answer.status_code, answer.headers["content-type"], answer.text)

        yield get


@contextlib.contextmanager
def flask_client(url: str, **env: str) -> Iterator[Get]:
    client = fresh("apps.te_flask", TUNER_DB_DSN=url, **env).app.test_client()

    def get(path: str) -> Answer:
        answer = client.get(path)
        return Answer(answer.status_code, answer.content_type, answer.get_data(as_text=True))

    yield get


@contextlib.contextmanager
def django_client(url: str) -> Iterator[Get]:
    if str(DJANGO_PROJECT) not in sys.path:
        sys.path.insert(0, str(DJANGO_PROJECT))
    with environment(DATABASE_URL=url, DJANGO_SETTINGS_MODULE="mysite.settings"):
        import django
        from django.test import Client

        django.setup()
        client = Client(SERVER_NAME="localhost")  # one of the project's ALLOWED_HOSTS

        def get(path: str) -> Answer:
            answer = client.get(path)
            return Answer(answer.status_code, answer["Content-Type"], answer.content.decode())

        yield get


CLIENTS = {"starlette": starlette_client, "flask": flask_client, "django": django_client}


@pytest.fixture(scope="module", params=list(CLIENTS))
def get(request: pytest.FixtureRequest, database: str) -> Iterator[Get]:
    with CLIENTS[request.param](database) as client:
        yield client


def stored(url: str, ident: int) -> int:
    with psycopg.connect(url) as connection:
        row = connection.execute('SELECT "randomNumber" FROM "World" WHERE id = %s', (ident,))
        found = row.fetchone()
    assert found is not None
    return int(found[0])


def check_world(item: object) -> dict[str, int]:
    assert isinstance(item, dict) and set(item) == {"id", "randomNumber"}, item
    assert 1 <= item["id"] <= 10_000 and 1 <= item["randomNumber"] <= 10_000, item
    return item


def test_json_serialization(get: Get) -> None:
    answer = get("/json")
    assert answer.status == 200 and answer.content_type.startswith("application/json")
    assert answer.json() == {"message": "Hello, World!"}


def test_plaintext(get: Get) -> None:
    answer = get("/plaintext")
    assert answer.status == 200 and answer.content_type.startswith("text/plain")
    assert answer.text == "Hello, World!"


def test_single_query_answers_one_row_as_stored(get: Get, database: str) -> None:
    answer = get("/db")
    assert answer.status == 200 and answer.content_type.startswith("application/json")
    item = check_world(answer.json())
    assert stored(database, item["id"]) == item["randomNumber"]


@pytest.mark.parametrize(
    ("query", "count"),
    [("", 1), ("?queries=", 1), ("?queries=foo", 1), ("?queries=0", 1), ("?queries=-3", 1),
     ("?queries=1", 1), ("?queries=20", 20), ("?queries=500", 500), ("?queries=501", 500),
     ("?queries=10000", 500)],
)  # fmt: skip
def test_multiple_queries_clamp_the_count_to_1_through_500(
    get: Get, database: str, query: str, count: int
) -> None:
    answer = get(f"/queries{query}")
    assert answer.status == 200 and answer.content_type.startswith("application/json")
    items = answer.json()
    assert isinstance(items, list) and len(items) == count
    worlds = [check_world(item) for item in items]
    first = worlds[0]
    assert stored(database, first["id"]) == first["randomNumber"]


def test_fortunes_are_sorted_escaped_and_include_the_added_one(get: Get) -> None:
    answer = get("/fortunes")
    assert answer.status == 200
    assert answer.content_type.replace(" ", "").lower() == "text/html;charset=utf-8"
    page = answer.text
    assert page.startswith("<!DOCTYPE html>") and "<title>Fortunes</title>" in page
    # The script is text, not markup; the Japanese fortune comes through as UTF-8.
    assert "<script>" not in page and "&lt;script&gt;alert(" in page
    assert "フレームワークのベンチマーク" in page
    cells = page.split("<tr><td>")[1:]
    rows = [cell.split("</td></tr>")[0].split("</td><td>") for cell in cells]
    assert len(rows) == 13
    messages = [html.unescape(message) for _, message in rows]
    assert messages == sorted(messages)
    assert ["0", EXTRA] in [[ident, html.unescape(m)] for ident, m in rows]
    assert sorted(int(ident) for ident, _ in rows) == list(range(13))


@pytest.mark.parametrize(("query", "count"), [("?queries=5", 5), ("?queries=0", 1)])
def test_updates_answer_the_new_numbers_and_persist_them(
    get: Get, database: str, query: str, count: int
) -> None:
    answer = get(f"/updates{query}")
    assert answer.status == 200 and answer.content_type.startswith("application/json")
    items = answer.json()
    assert isinstance(items, list) and len(items) == count
    for item in map(check_world, items):
        assert stored(database, item["id"]) == item["randomNumber"], item


def test_the_seeding_fills_the_tables_once(database: str) -> None:
    with psycopg.connect(database) as connection:
        numbers = connection.execute('SELECT id, "randomNumber" FROM "World" ORDER BY id')
        worlds = numbers.fetchall()
        fortunes = dict(connection.execute('SELECT id, message FROM "Fortune"').fetchall())
    assert [ident for ident, _ in worlds] == list(range(1, 10_001))
    assert all(1 <= number <= 10_000 for _, number in worlds)
    assert len({number for _, number in worlds}) > 5_000  # random, not one value
    assert sorted(fortunes) == list(range(1, 13))
    assert fortunes[11].startswith("<script>") and fortunes[12] == "フレームワークのベンチマーク"
    assert fortunes[1] == "fortune: No such file or directory"
    # A second run leaves the rows as they are.
    again = seed(database)
    assert again.returncode == 0 and "10000 worlds, 12 fortunes" in again.stdout
    with psycopg.connect(database) as connection:
        after = connection.execute('SELECT id, "randomNumber" FROM "World" ORDER BY id').fetchall()
    assert after == worlds


def test_an_unseeded_database_stops_the_import_with_the_command_to_run(database: str) -> None:
    empty = database.rsplit("/", 1)[0] + "/postgres"  # the cluster's own, without the tables
    for module in ("apps.te_starlette", "apps.te_flask"):
        with pytest.raises(SystemExit) as stopped:
            fresh(module, TUNER_DB_DSN=empty)
        line = str(stopped.value.code)
        assert "\n" not in line and '"World" does not exist' in line, line
        assert "scripts/postgres techempower --url URL" in line


@contextlib.contextmanager
def every_slot_taken(url: str) -> Iterator[None]:
    """Connections opened until PostgreSQL refuses one, held meanwhile."""
    held = []
    try:
        for _ in range(MAX_CONNECTIONS + 5):
            try:
                held.append(psycopg.connect(url, connect_timeout=5))
            except psycopg.OperationalError as error:
                assert "too many clients" in str(error)
                break
        else:
            pytest.fail(f"PostgreSQL took {len(held)} connections, max_connections is 20")
        yield
    finally:
        for connection in held:
            connection.close()


@pytest.mark.parametrize("name", ["te_starlette", "te_flask"])
def test_a_database_that_refuses_connections_is_503_and_the_line_the_settings_name(
    database: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    declared = load_app_settings(REPO / "apps" / f"{name}.tuner.toml")
    clients = {"te_starlette": starlette_client, "te_flask": flask_client}
    with (
        clients[name](database, DB_POOL_SIZE="2", DB_POOL_TIMEOUT="1") as client,
        every_slot_taken(database),
    ):
        answer = client("/db")
    assert answer.status == 503
    logged = [line for line in capsys.readouterr().err.splitlines() if line.startswith("apps/")]
    assert logged, "no line logged"
    line = logged[-1]
    assert line.startswith(f"apps/{name}.py: "), line
    # The tuner reads the server's log for these texts: the trial is recorded with the line.
    assert any(text in line for text in (*declared.refused, *declared.exhausted)), line


@pytest.fixture(scope="module", autouse=True)
def forget_the_apps() -> Iterator[None]:
    """The app modules imported here read this module's database: gone for the next module."""
    yield
    for module in ("apps.te_starlette", "apps.te_flask"):
        sys.modules.pop(module, None)


def test_the_apps_settings_files_declare_the_pools_the_apps_read() -> None:
    for name, names in [
        ("te_starlette", {"DB_POOL_SIZE", "DB_POOL_TIMEOUT"}),
        ("te_flask", {"DB_POOL_SIZE", "DB_MAX_OVERFLOW", "DB_POOL_TIMEOUT"}),
    ]:
        declared = load_app_settings(REPO / "apps" / f"{name}.tuner.toml")
        assert set(declared.names()) == names
        assert "DB_POOL_SIZE" in declared.search and declared.per_process[0] == "DB_POOL_SIZE"
