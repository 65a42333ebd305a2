"""The TechEmpower benchmark's pure pieces (benchmarks/techempower_entries.py and
benchmarks/vs_techempower.py): each entry's launch line translated to a CPU count, its settings
valid for its server, the cases parsed, and the plan a dry run prints. No server, no database."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.techempower_entries import (
    CPU,
    DEFAULT_TESTS,
    ENTRIES,
    ENTRY_NAMES,
    TESTS,
    Entry,
    PerCpu,
    entry_named,
    parse_cases,
)
from benchmarks.vs_techempower import ENTRY, TUNER, app_of, main, wrk_cases, wrk_rounds
from benchmarks.wrk import WrkFigures
from tuner.servers.appenv import adapter_for_app
from tuner.workflow.confirm import Candidate


@pytest.mark.parametrize(
    ("name", "cpus", "expected"),
    [
        ("starlette-gunicorn", 4, {"workers": 4, "keepalive": 120, "DB_POOL_SIZE": 10}),
        ("fastapi-uvicorn", 1, {"workers": 1, "access_log": False, "DB_POOL_SIZE": 10}),
        ("fastapi-hypercorn", 2, {"workers": 2, "DB_POOL_SIZE": 10}),
        (
            "quart-hypercorn",
            8,
            {"workers": 8, "worker_class": "uvloop", "keep_alive_timeout": 120.0},
        ),
        ("granian-asgi", 3, {"workers": 3, "backlog": 16384, "http": "1"}),
        (
            "granian-wsgi",
            2,
            {"workers": 2, "blocking_threads": 1, "backlog": 16384, "http": "1"},
        ),
        (
            "uwsgi-gevent",
            6,
            {
                "master": True,
                "disable-logging": True,
                "listen": 5000,
                "gevent": 1000,
                "protocol": "http",
                "http-keepalive": 1,
                "http-processes": 6,
                "processes": 6,
            },
        ),
        ("django-gunicorn", 2, {"workers": 2, "worker_class": "gthread", "threads": 4}),
    ],
)
def test_each_entry_translates_to_the_cpu_count_given(
    name: str, cpus: int, expected: dict[str, object]
) -> None:
    assert entry_named(name).translated(cpus) == expected


def test_the_published_line_is_written_at_the_cpu_count() -> None:
    uvicorn = entry_named("fastapi-uvicorn")
    assert uvicorn.line_at(2) == (
        "uvicorn app:app --host 0.0.0.0 --port 8080 --workers 2 --log-level error"
    )
    uwsgi = entry_named("uwsgi-gevent").line_at(3)
    assert "--http-processes 3 -p 3 " in uwsgi and "$CPU_COUNT" not in uwsgi
    gunicorn = entry_named("starlette-gunicorn").line_at(4)
    assert "workers = 4;" in gunicorn and "cpu_count" not in gunicorn
    for entry in ENTRIES:  # every line names the count in a form the translation knows
        assert entry.line_at(7) != entry.published, entry.name


def test_a_per_cpu_setting_is_rounded_down_and_at_least_one() -> None:
    assert CPU.at(1) == 1 and CPU.at(16) == 16
    rsgi = PerCpu(0.75)  # granian's RSGI rule, "leave 25% to the Rust runtime"
    assert (rsgi.at(1), rsgi.at(2), rsgi.at(4), rsgi.at(6)) == (1, 1, 3, 4)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.name)
def test_every_entry_sets_settings_its_server_has(entry: Entry) -> None:
    # resolve validates each value against the server's table plus the app's own settings: a
    # misspelt name or a value out of range fails here, not on the benchmark's day.
    adapter = adapter_for_app(entry.server, app_of(entry), None)
    resolved = adapter.resolve(entry.translated(2))
    for name, value in entry.translated(2).items():
        assert resolved[name] == value, name


def test_cases_parse_by_entry_test_or_all() -> None:
    assert [(e.name, t) for e, t in parse_cases("fastapi-uvicorn:db")] == [
        ("fastapi-uvicorn", "db")
    ]
    assert [t for _, t in parse_cases("granian-wsgi")] == list(DEFAULT_TESTS)
    assert len(parse_cases("all")) == len(ENTRIES) * len(DEFAULT_TESTS)
    assert {e.name for e, _ in parse_cases("all:updates")} == set(ENTRY_NAMES)
    with pytest.raises(ValueError, match="no entry 'nginx-unit'"):
        parse_cases("nginx-unit:json")
    with pytest.raises(ValueError, match="no test type 'cached'"):
        parse_cases("fastapi-uvicorn:cached")
    with pytest.raises(ValueError, match="no case given"):
        parse_cases(" , ")


def test_the_test_types_load_techempowers_paths() -> None:
    assert TESTS["queries"] == "/queries?queries=20" and TESTS["updates"] == "/updates?queries=20"
    assert set(DEFAULT_TESTS) == {"json", "db", "queries", "fortunes"}


def test_the_dry_run_prints_the_plan_and_runs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dry-run", "--cases", "fastapi-uvicorn:db,uwsgi-gevent:fortunes"]) == 0
    out = capsys.readouterr().out
    assert "cpu_count() and nproc are" in out and "PostgreSQL: a throwaway cluster" in out
    assert "== fastapi-uvicorn on uvicorn" in out and "GET /db" in out
    assert "--no-access-log" in out  # the translated line as the runner starts it
    assert "== uwsgi-gevent on uwsgi" in out and "--gevent 1000" in out
    assert "not set:" in out and "Connection: keep-alive" in out


def test_wrk_checks_the_first_case_of_each_test_type() -> None:
    cases = parse_cases("granian-asgi:json,uwsgi-gevent:json,uwsgi-gevent:db,granian-wsgi:db")
    assert wrk_cases(cases) == {("granian-asgi", "json"), ("uwsgi-gevent", "db")}


def test_wrk_rounds_alternate_the_order_and_ratio_within_each_round() -> None:
    entry, tuned = Candidate(ENTRY, None, {}), Candidate(TUNER, 3, {})
    order: list[str] = []
    # The entry's rounds: 100, 200, 400 req/s; the pick's: 110, 180, 440 (x1.1, x0.9, x1.1).
    rates = {ENTRY: iter([100.0, 200.0, 400.0]), TUNER: iter([110.0, 180.0, 440.0])}

    def run(candidate: Candidate) -> WrkFigures:
        order.append(candidate.label)
        rps = next(rates[candidate.label])
        return WrkFigures(rps=rps, p50_ms=1.0, p90_ms=2.0, p99_ms=1000 / rps, errors=1)

    args = argparse.Namespace(rounds=3)
    found = wrk_rounds([entry, tuned], args, run)
    assert order == [ENTRY, TUNER, TUNER, ENTRY, ENTRY, TUNER]
    assert found["rps_ratio"] == pytest.approx([0.9, 1.1, 1.1])
    assert found["p99_ratio"] == pytest.approx([1 / 1.1, 1 / 1.1, 1 / 0.9])
    assert found["entry_rps"] == [100.0, 200.0, 400.0]
    assert found["errors"] == {ENTRY: 3, TUNER: 3}
