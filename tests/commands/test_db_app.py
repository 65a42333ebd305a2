"""apps/db.py against a real PostgreSQL: a pool that fits serves without errors, a config whose
processes x pool passes the database's max_connections fails and the trial says why, and a
short tune with the pool in the search space writes a file that sets the pool. Its ASGI twin,
apps/async_db.py, on uvicorn: its pool bounds the queries a process runs at once.

The cluster runs with max_connections = 20 on purpose, so that a small config passes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import REPO, run_tuner
from tests.support.postgres import throwaway_postgres

MAX_CONNECTIONS = 20
SHORT = ("--duration", "1", "--warmup", "0.5")
# The studies' verdicts and reasons, not their figures, are tested: one 0.6 s window (a window
# counts from 0.5 s) after 0.2 s of warm-up.
SHORT_STUDY = ("--duration", "0.6", "--warmup", "0.2")


@pytest.fixture(scope="module")
def db_env(real_servers: None) -> Iterator[dict[str, str]]:
    """TUNER_DB_DSN of a fresh cluster whose tables apps/db.py created (`--init`)."""
    with throwaway_postgres(max_connections=MAX_CONNECTIONS) as url:
        env = {"TUNER_DB_DSN": url}
        init = subprocess.run(
            [sys.executable, "-m", "apps.db", "--init"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **env},
        )
        assert init.returncode == 0, init.stderr
        assert "10000 users" in init.stdout
        yield env


def tuner_json(env: dict[str, str], *args: str, timeout: float = 300) -> dict[str, Any]:
    done = run_tuner(*args, "--json", timeout=timeout, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_without_a_database_url_the_study_stops_with_one_line(since: float) -> None:
    env = {"TUNER_DB_DSN": "", "DATABASE_URL": ""}
    done = run_tuner("bench", "apps/db.py", "--server", "gunicorn", *SHORT, env=env)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "set TUNER_DB_DSN" in lines[0], done.stderr


def test_a_pool_that_fits_serves_without_errors(db_env: dict[str, str], since: float) -> None:
    # 2 processes x 4 threads, a pool of 4 each: 8 connections of the 20 allowed.
    result = tuner_json(
        db_env,
        "bench", "apps/db.py", "--server", "gunicorn", "--connections", "16", *SHORT,
        "--set", "workers=2", "--set", "worker_class=gthread", "--set", "threads=4",
        "--set", "DB_POOL_SIZE=4", "--set", "DB_MAX_OVERFLOW=0",
    )  # fmt: skip
    assert result["settings"]["DB_POOL_SIZE"] == 4
    assert result["requests"] > 100
    assert sum(result["errors"].values()) == 0, result["errors"]
    assert not result.get("server_log")


def test_more_connections_than_the_database_allows_fail_and_the_trial_says_why(
    db_env: dict[str, str], tmp_path: Path, since: float
) -> None:
    # Every searched config: 4 gthread workers x 8 threads, each with a pool of 8 (no
    # overflow): 32 connections against max_connections = 20.
    space = tmp_path / "gunicorn.toml"
    space.write_text(
        'server = "gunicorn"\n'
        '[params.worker_class]\ntype = "categorical"\nchoices = ["gthread"]\n'
        '[params.workers]\ntype = "int"\nlow = 4\nhigh = 4\n'
        '[params.threads]\ntype = "int"\nlow = 8\nhigh = 8\n'
        # A socket per worker: the kernel spreads the 32 kept-alive connections over the four
        # (on one shared socket the first worker awake took them all: 8 threads, 8 queries).
        '[params.reuse_port]\ntype = "categorical"\nchoices = [true]\n'
        # The master imports the app, and so asks max_connections, before any worker serves: a
        # worker that imports it under load may find every slot taken and log "unknown" (CI did).
        '[params.preload_app]\ntype = "categorical"\nchoices = [true]\n'
    )
    declared = (REPO / "apps" / "db.tuner.toml").read_text()
    declared = declared.replace(
        "search = { low = 1, high = 32, log = true }", "search = { low = 8, high = 8 }"
    )
    declared = declared.replace("default = 10   ", "default = 0    ")  # no overflow
    declared = declared.replace('search = { type = "categorical", choices = [0, 5, 10] }', "")
    settings = tmp_path / "db.tuner.toml"
    settings.write_text(declared)
    result = tuner_json(
        db_env,
        "tune", "apps/db.py", "--server", "gunicorn", "--space", str(space),
        "--app-settings", str(settings), "--trials", "3", "--no-branch-starts", "--top-k", "1",
        "--confirm-rounds", "1", "--no-clean-venv-check", "--connections", "32", *SHORT_STUDY,
        # Queries of 100 ms: every thread holds a connection, even when the server has little CPU.
        "--path", "/?db_wait_ms=100",
        "--storage", f"sqlite:///{tmp_path / 'study.db'}", "--out", str(tmp_path / "g.conf.py"),
    )  # fmt: skip
    reasons = {entry["trial"]: entry["reason"] for entry in result["cannot_win"]}
    assert 2 in reasons, result  # trials 0 and 1 are the baselines (sync workers: they fit)
    reason = reasons[2]
    # Its errors break --max-error-rate (or, with fast 503s, its clients were served unevenly);
    # either way the server log's line and its meaning follow.
    assert reason.startswith(("violates SLO: ", "unfair: ")), reason
    assert "too many clients already" in reason and "max_connections 20" in reason, reason
    assert (
        "the database refused connections: 4 processes x 8 connections "
        "(DB_POOL_SIZE 8 + DB_MAX_OVERFLOW 0) = 32 may be open at once" in reason
    ), reason
    # The baselines fit (one connection per sync worker) and one of them is written.
    assert result["config_file"] and not result["failed"]


def test_a_short_tune_with_the_pool_in_the_space_writes_it(
    db_env: dict[str, str], tmp_path: Path, since: float
) -> None:
    out = tmp_path / "gunicorn.conf.py"
    result = tuner_json(
        db_env,
        "tune", "apps/db.py", "--server", "gunicorn", "--trials", "3", "--top-k", "1",
        "--confirm-rounds", "1", "--connections", "16", *SHORT_STUDY, "--seed", "3",
        "--storage", f"sqlite:///{tmp_path / 'study.db'}", "--out", str(out),
    )  # fmt: skip
    assert result["config_file"] == str(out)
    text = out.read_text()
    winner = result["verdict"]["winner"]
    chosen = next(c for c in result["confirmation"] if c["label"] == winner)["settings"]
    pool = chosen["DB_POOL_SIZE"]  # every config holds the app's settings, baselines too
    assert f"'DB_POOL_SIZE={pool}'" in text and "raw_env = [" in text, text
    # The header names what the app needs too; the clean-venv check booted it with only that.
    assert "psycopg" in text and "sqlalchemy" in text.lower()
    assert "booted in a clean virtual environment" in text


def test_the_async_apps_pool_bounds_its_queries_on_uvicorn(
    db_env: dict[str, str], since: float
) -> None:
    # Each request holds its connection >= 20 ms: one pooled connection serves at most 50
    # requests a second whatever the loop does; eight overlap their waits in the one loop.
    figures = {}
    for pool in (1, 8):
        result = tuner_json(
            db_env,
            "bench", "apps/async_db.py", "--server", "uvicorn", "--connections", "16", *SHORT,
            "--path", "/?db_wait_ms=20", "--set", "workers=1", "--set", f"DB_POOL_SIZE={pool}",
        )  # fmt: skip
        assert result["settings"]["DB_POOL_SIZE"] == pool
        assert sum(result["errors"].values()) == 0, result["errors"]
        assert not result.get("server_log")
        figures[pool] = result["rps"]
    assert figures[1] <= 1000 / 20 * 1.1, figures
    assert figures[8] > 2 * figures[1], figures
