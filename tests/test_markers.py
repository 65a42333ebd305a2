"""The suite's own rules, proven on small throw-away test files run by a nested pytest:
a test that starts the tuner without a server fixture fails instead of slipping into the fast
set; a server fixture marks its tests `server`; with CI=true a skip fails the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import _starts_a_server

REPO = Path(__file__).resolve().parents[1]

UNMARKED = """
from tests.support.cli import run_tuner

def test_forgot_the_fixture():
    run_tuner("--help")
"""

MARKED = """
def test_has_the_fixture(since):
    pass

def test_unit():
    pass
"""

SKIPPING = """
import pytest

def test_passes():
    pass

def test_skips():
    pytest.skip("a precondition is missing")
"""


def nested_pytest(
    tmp_path: Path, source: str, *args: str, ci: bool = False
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_nested.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(REPO)
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-c", str(REPO / "pyproject.toml")]
        + ["--rootdir", str(tmp_path), "-p", "no:cacheprovider", "-q", *args]
        + [str(tmp_path / "test_nested.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def test_an_unmarked_test_that_runs_the_tuner_fails_naming_the_fixture(tmp_path: Path) -> None:
    done = nested_pytest(tmp_path, UNMARKED)
    assert done.returncode == 1, done.stdout
    assert "is not marked `server`: request the `since` fixture" in done.stdout


def test_a_server_fixture_marks_the_test(tmp_path: Path) -> None:
    done = nested_pytest(tmp_path, MARKED, "--collect-only", "-m", "server")
    assert "test_has_the_fixture" in done.stdout and "test_unit" not in done.stdout, done.stdout
    assert "1/2 tests collected (1 deselected)" in done.stdout


def test_a_skip_fails_the_run_only_in_ci(tmp_path: Path) -> None:
    assert nested_pytest(tmp_path, SKIPPING).returncode == 0
    done = nested_pytest(tmp_path, SKIPPING, ci=True)
    assert done.returncode == 1, done.stdout
    assert "CI=true: 1 passed, 1 skipped" in done.stdout


def test_what_counts_as_starting_a_server() -> None:
    python = sys.executable
    assert _starts_a_server(["gunicorn", "-b", "127.0.0.1:1", "app:app"])
    assert _starts_a_server(["/usr/bin/uwsgi", "--http-socket", ":1"])
    assert _starts_a_server([python, "-m", "tuner", "tune", "apps/hello.py"])
    assert _starts_a_server([python, "-c", "from tuner.cli import main; main()"])
    assert _starts_a_server([python, "-c", "from tests.conftest import running"])
    assert not _starts_a_server([python, "-c", "import json"])
    assert not _starts_a_server(["initdb", "-D", "/tmp/x"])
    assert not _starts_a_server([python, "-m", "pytest"])
