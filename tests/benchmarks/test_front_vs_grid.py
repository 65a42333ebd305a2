"""benchmarks/front_vs_grid.py without a server: the grid of each server's levers as its
space ranges them, and the plan a dry run prints."""

from __future__ import annotations

import pytest

from benchmarks.front_vs_grid import main, plan_pair


def test_gunicorn_grid_is_every_worker_count_sync_and_by_each_thread_doubling() -> None:
    pair = plan_pair("fib", "gunicorn", cpus=2)
    assert pair.levers == {"workers": list(range(1, 10)), "threads": [2, 4, 8, 16, 32]}
    assert len(pair.grid) == 9 * 6  # sync, then gthread with each thread step
    assert {"workers": 3} in pair.grid
    assert {"workers": 3, "worker_class": "gthread", "threads": 16} in pair.grid


def test_configs_the_server_runs_the_same_way_are_one_grid_point() -> None:
    # uWSGI's one thread is its default: "processes alone" and "one thread" are one config.
    pair = plan_pair("iowait", "uwsgi", cpus=1)
    assert pair.levers["threads"] == [1, 2, 4, 8, 16, 32]
    assert len(pair.grid) == 5 * 6
    granian = plan_pair("iowait", "granian", cpus=1)
    assert granian.levers["blocking_threads"] == [0, 1, 2, 4, 8, 32, 128]  # its choices


def test_the_dry_run_prints_the_plan_and_runs_nothing(capsys: pytest.CaptureFixture) -> None:
    assert main(["--dry-run", "--apps", "fib,db", "--servers", "granian", "--rate", "300"]) == 0
    out = capsys.readouterr().out
    assert "rate: 300 req/s (--rate)" in out and "PostgreSQL for apps/db.py" in out
    assert "== fib (apps/fib.py GET /9000) on granian" in out and "== db (" in out
    assert "--objective multi --rate R --trials 30" in out


def test_unknown_apps_and_servers_are_refused_by_name(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["--dry-run", "--apps", "fib,nope"])
    assert "--apps nope: expected some of fib, iowait, db" in capsys.readouterr().err
