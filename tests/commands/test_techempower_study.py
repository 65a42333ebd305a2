"""TechEmpower's apps (apps/te_flask.py, apps/te_starlette.py) in real studies against a real
PostgreSQL: a study without its database stops before any trial with one line, and a pool
size the database cannot grant fails its trial with the app's own line and what it means,
while the study goes on and writes a config from the trials that fit.

The cluster allows 20 connections, and the test holds all but FREE = 2 of them while the study
runs, so that "the database refused" does not hang on how the pools shared the slots: of the
searched config's 4 processes (a socket each, so each gets requests), 2 at least get no
connection and answer 503 with the app's line. The default (1 process) fits; the fork rule's 3
processes do not either.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.cli import REPO, run_tuner
from tests.support.postgres import throwaway_postgres

MAX_CONNECTIONS = 20
FREE = 2
# The verdicts and reasons, not the figures, are tested: one 0.6 s window after 0.2 s warm-up.
SHORT_STUDY = ("--duration", "0.6", "--warmup", "0.2")


@pytest.fixture(scope="module")
def database(real_servers: None) -> Iterator[str]:
    """The URL of a fresh cluster seeded with TechEmpower's tables."""
    with throwaway_postgres(max_connections=MAX_CONNECTIONS) as url:
        seeded = subprocess.run(
            [sys.executable, str(REPO / "scripts" / "postgres"), "techempower", "--url", url],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert seeded.returncode == 0, seeded.stderr
        yield url


@contextlib.contextmanager
def all_slots_but(url: str, free: int) -> Iterator[None]:
    """All but `free` of the cluster's connections opened and held meanwhile."""
    held = [psycopg.connect(url, connect_timeout=5) for _ in range(MAX_CONNECTIONS - free)]
    try:
        yield
    finally:
        for connection in held:
            connection.close()


def test_without_its_database_the_study_stops_before_a_trial_with_one_line(
    tmp_path: Path, since: float
) -> None:
    done = run_tuner(
        "tune", "apps/te_starlette.py", "--server", "uvicorn", "--trials", "2", "--path", "/db",
        "--storage", f"sqlite:///{tmp_path / 'study.db'}", "--out", str(tmp_path / "u.sh"),
        env={"TUNER_DB_DSN": "", "DATABASE_URL": ""},
    )  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "set TUNER_DB_DSN" in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not (tmp_path / "u.sh").exists()


# app -> the space's settings beyond workers, and how the reason words its pool
CASES = {
    "te_flask": (
        '[params.worker_class]\ntype = "categorical"\nchoices = ["gthread"]\n'
        '[params.threads]\ntype = "int"\nlow = 8\nhigh = 8\n',
        "DB_POOL_SIZE 8 + DB_MAX_OVERFLOW 0",
    ),
    "te_starlette": ("", "DB_POOL_SIZE 8"),
}


def settings_file(name: str, folder: Path) -> Path:
    """The app's settings file with the pool searched at 8 only, no overflow (te_flask's), and
    a short pool timeout (a request the pool cannot serve fails in 0.2 s, not 30)."""
    text = (REPO / "apps" / f"{name}.tuner.toml").read_text()
    text = text.replace(
        "search = { low = 1, high = 32, log = true }", "search = { low = 8, high = 8 }"
    )
    text = text.replace("default = 30.0 ", "default = 0.2  ")
    text = text.replace(
        'search = { type = "categorical", choices = [0, 5, 10] }',
        'search = { type = "categorical", choices = [0] }',
    )
    assert "high = 8 }" in text and "default = 0.2 " in text, text
    path = folder / f"{name}.tuner.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_pool_the_database_cannot_grant_fails_its_trial_with_why_and_the_study_goes_on(
    database: str, name: str, tmp_path: Path, since: float
) -> None:
    extra, pool_words = CASES[name]
    space = tmp_path / "space.toml"
    space.write_text(
        'server = "gunicorn"\n'
        '[params.workers]\ntype = "int"\nlow = 4\nhigh = 4\n' + extra +
        # A socket per worker: the kernel spreads the connections over all four.
        '[params.reuse_port]\ntype = "categorical"\nchoices = [true]\n'
        # The master imports the app (and checks the database) once, before it forks.
        '[params.preload_app]\ntype = "categorical"\nchoices = [true]\n'
    )  # fmt: skip
    settings = settings_file(name, tmp_path)
    with all_slots_but(database, FREE):
        done = run_tuner(
            "tune", f"apps/{name}.py", "--server", "gunicorn", "--space", str(space),
            "--app-settings", str(settings), "--trials", "3", "--no-branch-starts",
            "--top-k", "1", "--confirm-rounds", "1", "--no-clean-venv-check",
            "--connections", "32", *SHORT_STUDY, "--path", "/db",
            "--storage", f"sqlite:///{tmp_path / 'study.db'}",
            "--out", str(tmp_path / "gunicorn.conf.py"), "--json",
            timeout=300, env={"TUNER_DB_DSN": database},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    reasons = {e["trial"]: e["reason"] for e in result["failed"] + result["cannot_win"]}
    assert 2 in reasons, result  # trials 0 and 1 are the baselines
    reason = reasons[2]
    # PostgreSQL's own words (or the pool's, for a process left without a connection), then
    # what they mean for this config.
    assert "too many clients already" in reason or "no free pooled connection" in reason, reason
    assert f"4 processes x 8 connections ({pool_words}) = 32 may be open at once" in reason, reason
    # The study went on: the config that fits, the default, was confirmed and written.
    assert result["config_file"] and Path(result["config_file"]).is_file()
    assert result["verdict"]["winner"] == "default", result["verdict"]
