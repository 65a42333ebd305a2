"""Real short studies whose pages the report, compare and browser tests all read.

Registered as a plugin (`pytest_plugins` in tests/conftest.py), so each fixture is one
definition for the whole session: the studies run once, whichever of those tests comes first,
instead of once per test module.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import REPO, SHORT
from tests.support.cli import run_tuner as tuner
from tests.support.serverwatch import wait_none_left

STUDIES = {"single": ("gunicorn", "throughput"), "multi": ("uwsgi", "multi")}
COMPARED_SERVERS = ("gunicorn", "uwsgi")
COMPARE_NAME = "cmp"


@pytest.fixture(scope="session")
def storage(tmp_path_factory: pytest.TempPathFactory, real_servers: None) -> str:
    """One real short study per objective kind. The two run at once to halve the wait: their
    figures are meaningless, only their shape is tested."""
    started = time.time()
    folder = tmp_path_factory.mktemp("studies")
    url = f"sqlite:///{folder}/s.db"
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tuner",
                "tune",
                "apps/hello.py",
                "--server",
                server,
                "--objective",
                objective,
                "--trials",
                "3",
                "--top-k",
                "1",
                "--confirm-rounds",
                "1",
                "--seed",
                "1",
                "--storage",
                url,
                "--study-name",
                name,
                "--json",
                "--no-clean-venv-check",  # reports read the study, not the written file
                *SHORT,
            ],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, (server, objective) in STUDIES.items()
    ]
    for run in runs:
        _, err = run.communicate(timeout=240)
        assert run.returncode == 0, err
    assert wait_none_left(started) == []
    return url


@pytest.fixture(scope="session")
def compared(
    tmp_path_factory: pytest.TempPathFactory, real_servers: None
) -> tuple[subprocess.CompletedProcess, Path]:
    """`tuner compare` of gunicorn and uWSGI on apps/hello.py: its output and its folder (the
    studies in s.db, the pages and files in COMPARE_NAME/)."""
    started = time.time()
    folder = tmp_path_factory.mktemp("compare")
    done = tuner(
        "compare",
        "apps/hello.py",
        "--servers",
        ",".join(COMPARED_SERVERS),
        "--full",  # a study of --trials per server: the race has its own test
        "--trials",
        "3",
        "--top-k",
        "1",
        "--confirm-rounds",
        "1",
        "--compare-rounds",
        "1",
        "--seed",
        "1",
        "--name",
        COMPARE_NAME,
        "--no-clean-venv-check",  # the written files' boot is checked in test_tune.py
        "--storage",
        f"sqlite:///{folder}/s.db",
        *SHORT,
    )
    assert done.returncode == 0, done.stderr
    assert wait_none_left(started) == []
    return done, folder
