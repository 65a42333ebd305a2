"""TechEmpower's Python entries as data: each one's server, its own launch line as published,
and the settings that line sets, some derived from the CPU count; and their translation to the
CPUs a benchmark here gives the server.

In TechEmpower's containers `multiprocessing.cpu_count()` and `nproc` both return the machine's
CPU count, so an entry's `workers = cpu_count()` means one worker per CPU the server has. Here
the server is pinned to a set of CPUs, and the faithful translation is that set's size (what
`nproc` returns in the pinned process; `cpu_count()` would still count every CPU of the machine,
which is not what the entry's author saw). Origins are files of
github.com/TechEmpower/FrameworkBenchmarks under frameworks/Python/, as issue 42 quotes them.

Our apps serve the entries' test types (apps/te_starlette.py for the ASGI entries,
apps/te_flask.py for the WSGI ones, the Django project's views for Django's); an entry's pool is
its own app's, so where it is known it is set here (asyncpg's default pool of 10 in the
Starlette and FastAPI apps), else our app's default stays.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from tuner.apps import Interface
from tuner.settings import Value

STARLETTE_APP = "apps/te_starlette.py"
FLASK_APP = "apps/te_flask.py"
DJANGO_APP = "mysite/wsgi.py:application"  # from apps/djangoproject, as its users run it
DJANGO_FOLDER = "apps/djangoproject"
ASYNCPG_POOL = 10  # asyncpg.create_pool's min_size = max_size default, used by those apps

# The test types and the path each is loaded at (TechEmpower's own URLs).
TESTS: Mapping[str, str] = MappingProxyType(
    {
        "json": "/json",
        "db": "/db",
        "queries": "/queries?queries=20",
        "fortunes": "/fortunes",
        "updates": "/updates?queries=20",
        "plaintext": "/plaintext",
    }
)
DEFAULT_TESTS = ("json", "db", "queries", "fortunes")  # the rows issue 42's proof asks for

# What an entry's line or config file writes for the CPU count, in the forms they use.
_CPU_WORDS = re.compile(r"\$\(nproc\)|\$CPU_COUNT|multiprocessing\.cpu_count\(\)")


@dataclass(frozen=True)
class PerCpu:
    """A setting an entry derives from the CPU count: `factor` x the count, rounded down as
    `int()` does, at least 1."""

    factor: float = 1.0

    def at(self, cpus: int) -> int:
        return max(1, int(self.factor * cpus))


CPU = PerCpu()


@dataclass(frozen=True)
class Entry:
    """One entry: the server, our app that serves its test types, its line as published and
    the settings that line sets (the CPU-derived ones as `PerCpu`)."""

    name: str
    server: str
    app: str
    interface: Interface
    published: str
    settings: Mapping[str, Value | PerCpu]
    origin: str
    # What the line sets that no setting here expresses, and why the comparison stands anyway.
    untranslated: str = ""
    folder: str = ""  # run from this folder (the Django project), else the checkout's root
    app_settings: Mapping[str, Value] = field(default_factory=dict)

    def translated(self, cpus: int) -> dict[str, Value]:
        """The settings at `cpus` CPUs: each `PerCpu` is its count there; the app's too."""
        values: dict[str, Value] = {
            name: value.at(cpus) if isinstance(value, PerCpu) else value
            for name, value in self.settings.items()
        }
        return {**values, **self.app_settings}

    def line_at(self, cpus: int) -> str:
        """The published line with the CPU count written as it evaluates at `cpus` CPUs."""
        return _CPU_WORDS.sub(str(cpus), self.published)


ENTRIES: tuple[Entry, ...] = (
    # frameworks/Python/starlette/starlette.dockerfile and starlette_conf.py (FastAPI's
    # fastapi.dockerfile and fastapi_conf.py are the same: workers = cpu_count(), keepalive 120).
    Entry(
        "starlette-gunicorn",
        "gunicorn",
        STARLETTE_APP,
        Interface.ASGI,
        "gunicorn app:app -k uvicorn.workers.UvicornWorker -c starlette_conf.py"
        "  # workers = multiprocessing.cpu_count(); keepalive = 120; loglevel = 'error'",
        {"workers": CPU, "keepalive": 120},
        "frameworks/Python/starlette/starlette_conf.py",
        untranslated="loglevel 'error' (no access log either way: gunicorn logs none by default)",
        app_settings={"DB_POOL_SIZE": ASYNCPG_POOL},
    ),
    # frameworks/Python/fastapi/fastapi-uvicorn.dockerfile; uvicorn's access log is its INFO
    # lines, so --log-level error turns it off (issue 42: "--no-access-log").
    Entry(
        "fastapi-uvicorn",
        "uvicorn",
        STARLETTE_APP,
        Interface.ASGI,
        "uvicorn app:app --host 0.0.0.0 --port 8080 --workers $(nproc) --log-level error",
        {"workers": CPU, "access_log": False},
        "frameworks/Python/fastapi/fastapi-uvicorn.dockerfile",
        app_settings={"DB_POOL_SIZE": ASYNCPG_POOL},
    ),
    # frameworks/Python/fastapi/fastapi-hypercorn.dockerfile: workers only, hypercorn's defaults.
    Entry(
        "fastapi-hypercorn",
        "hypercorn",
        STARLETTE_APP,
        Interface.ASGI,
        "hypercorn app:app --bind 0.0.0.0:8080 --workers $(nproc)",
        {"workers": CPU},
        "frameworks/Python/fastapi/fastapi-hypercorn.dockerfile",
        app_settings={"DB_POOL_SIZE": ASYNCPG_POOL},
    ),
    # frameworks/Python/quart/quart.dockerfile and hypercorn_conf.py: workers = cpu_count(),
    # keep_alive_timeout = 120, worker_class = "uvloop".
    Entry(
        "quart-hypercorn",
        "hypercorn",
        STARLETTE_APP,
        Interface.ASGI,
        "hypercorn app:app --config=python:hypercorn_conf.py  # workers = "
        "multiprocessing.cpu_count(); keep_alive_timeout = 120; worker_class = 'uvloop'",
        {"workers": CPU, "worker_class": "uvloop", "keep_alive_timeout": 120.0},
        "frameworks/Python/quart/hypercorn_conf.py",
        untranslated="Quart's own app: ours is Starlette, on the same server settings",
    ),
    # frameworks/Python/granian/run.py: workers = cpu (issue 42; 0.75 x cpu is for RSGI, which
    # no app here speaks), backlog 16384, HTTP/1 only.
    Entry(
        "granian-asgi",
        "granian",
        STARLETTE_APP,
        Interface.ASGI,
        "Granian('app_asgi:main', interface='asgi', workers=multiprocessing.cpu_count(), "
        "backlog=16384, http='1').serve()",
        {"workers": CPU, "backlog": 16384, "http": "1"},
        "frameworks/Python/granian/run.py",
        untranslated="websockets=False (no websocket route here; nothing to serve)",
    ),
    # frameworks/Python/granian/run.py for WSGI: one blocking thread ("we don't run any I/O in
    # WSGI benches"), backlog 16384, HTTP/1 only.
    Entry(
        "granian-wsgi",
        "granian",
        FLASK_APP,
        Interface.WSGI,
        "Granian('app_wsgi:main', interface='wsgi', workers=multiprocessing.cpu_count(), "
        "blocking_threads=1, backlog=16384, http='1').serve()",
        {"workers": CPU, "blocking_threads": 1, "backlog": 16384, "http": "1"},
        "frameworks/Python/granian/run.py",
        untranslated="websockets=False (no websocket route here; nothing to serve)",
    ),
    # frameworks/Python/uwsgi/uwsgi.dockerfile: the HTTP router with keep-alive in front of
    # $CPU_COUNT gevent workers of 1000 async cores each, no request log, listen queue 5000.
    Entry(
        "uwsgi-gevent",
        "uwsgi",
        FLASK_APP,
        Interface.WSGI,
        "uwsgi --master -L -l 5000 --gevent 1000 --http :8080 --http-keepalive "
        "--http-processes $CPU_COUNT -p $CPU_COUNT -w hello "
        '--add-header "Connection: keep-alive"',
        {
            "master": True,
            "disable-logging": True,
            "listen": 5000,
            "gevent": 1000,
            "protocol": "http",
            "http-keepalive": 1,
            "http-processes": CPU,
            "processes": CPU,
        },
        "frameworks/Python/uwsgi/uwsgi.dockerfile",
        untranslated="--add-header 'Connection: keep-alive' (HTTP/1.1 keeps the connection "
        "alive without it); -l 5000 needs net.core.somaxconn >= 5000, else uWSGI refuses to start",
    ),
    # frameworks/Python/django/gunicorn_conf.py: gthread workers = cpu, threads = 4 (issue 42).
    Entry(
        "django-gunicorn",
        "gunicorn",
        DJANGO_APP,
        Interface.WSGI,
        "gunicorn hello.wsgi:application -c gunicorn_conf.py"
        "  # workers = multiprocessing.cpu_count(); worker_class = 'gthread'; threads = 4",
        {"workers": CPU, "worker_class": "gthread", "threads": 4},
        "frameworks/Python/django/gunicorn_conf.py",
        folder=DJANGO_FOLDER,
    ),
)
ENTRY_NAMES = tuple(entry.name for entry in ENTRIES)


def entry_named(name: str) -> Entry:
    return next(entry for entry in ENTRIES if entry.name == name)


def parse_cases(text: str) -> list[tuple[Entry, str]]:
    """`--cases`: ENTRY:TEST items, comma-separated; a bare ENTRY means its default tests, and
    `all` every entry with them. ValueError names the first unknown item."""
    cases: list[tuple[Entry, str]] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, test = item.partition(":")
        if name != "all" and name not in ENTRY_NAMES:
            raise ValueError(f"{item!r}: no entry {name!r}; entries: {', '.join(ENTRY_NAMES)}")
        if test and test not in TESTS:
            raise ValueError(f"{item!r}: no test type {test!r}; test types: {', '.join(TESTS)}")
        entries = ENTRIES if name == "all" else (entry_named(name),)
        cases += [(entry, t) for entry in entries for t in ((test,) if test else DEFAULT_TESTS)]
    if not cases:
        raise ValueError("no case given")
    return cases
