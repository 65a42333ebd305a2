"""Running the `tuner` command the way a user does, from the repository root, and watching a
running tuner by polling (its output, its process tree, its study) instead of sleeping."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

import optuna
import psutil

REPO = Path(__file__).resolve().parents[2]

# The short studies of tests/commands (tune, compare, report) check wiring and shapes, not
# figures: one 0.6 s window (the engine counts a window from 0.5 s) after 0.2 s of warm-up.
SHORT = ["--duration", "0.6", "--warmup", "0.2", "--connections", "16"]
# A raced compare in a one-minute budget: room for the first rung (its smallest, 3 trials a
# server) and one final round, one config per finalist besides its baselines; the written
# files' boot in a clean venv is checked in test_tune.py.
SHORT_RACE = [
    *("--budget", "1", "--top-k", "1", "--compare-rounds", "1", "--seed", "1"),
    "--no-clean-venv-check",
]


def run_tuner(
    *args: str, timeout: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuner", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )


def read_until(stream: IO[str] | None, prefix: str, count: int) -> list[str]:
    """Lines of a running tuner's output until `count` of them start with `prefix`. At end of
    file (the tuner died) it fails at once with what was read, instead of spinning on empty
    reads to a deadline; a tuner that hangs is stopped by pytest-timeout."""
    assert stream is not None
    lines: list[str] = []
    while sum(line.startswith(prefix) for line in lines) < count:
        line = stream.readline()
        if not line:
            raise AssertionError(
                f"the tuner's output ended before {count} lines starting {prefix!r}:\n"
                + "".join(lines)[-4000:]
            )
        lines.append(line)
    return lines


def wait_under_load(
    proc: subprocess.Popen[str], server: str = "gunicorn", timeout_s: float = 120
) -> list[psutil.Process]:
    """Wait until the tuner's next trial is under load (its server and its load workers are both
    running); returns the tuner's process tree at that moment."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the tuner exited ({proc.returncode}) before the next trial")
        tree = psutil.Process(proc.pid).children(recursive=True)
        lines = []
        for child in tree:
            with contextlib.suppress(psutil.Error):
                lines.append(" ".join(child.cmdline()))
        if any(server in line for line in lines) and any(
            "multiprocessing.spawn" in line for line in lines
        ):
            return tree
        time.sleep(0.05)
    raise AssertionError("the next trial never got under load")


def wait_until_stale(
    storage_url: str,
    study_name: str,
    trial_number: int,
    env: Mapping[str, str],
    timeout_s: float = 60,
) -> None:
    """Poll until the trial's last heartbeat is older than the grace period in `env` (the one the
    tuners run with), i.e. until any tuner opening the study will fail it."""
    from tuner.search.storage import with_postgres_driver

    storage = optuna.storages.RDBStorage(
        with_postgres_driver(storage_url),
        heartbeat_interval=int(env["TUNER_HEARTBEAT_S"]),
        grace_period=int(env["TUNER_HEARTBEAT_GRACE_S"]),
    )
    study_id = storage.get_study_id_from_name(study_name)
    trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, trial_number)
    deadline = time.monotonic() + timeout_s
    # NOTE: _get_stale_trial_ids is Optuna's own staleness test (private, but the exact rule
    # the tuner relies on); calling fail_stale_trials here would do the tuner's job for it.
    while trial_id not in storage._get_stale_trial_ids(study_id):
        assert time.monotonic() < deadline, f"trial {trial_number} never went stale"
        time.sleep(0.1)
    storage.engine.dispose()
