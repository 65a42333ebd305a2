"""`tuner --help` (and each command's) loads none of what the commands run with.

Building the parser imports every command module; at ~0.5 s, optuna, matplotlib, rich and the
load generator made the help slow. A wall-clock limit would be flaky on a busy machine, so the
test checks the cause instead: what a fresh interpreter imported to print the help.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.cli import REPO
from tuner.servers import SERVERS

# Runs the tuner or a server in a subprocess: not in the fast set.
pytestmark = pytest.mark.usefixtures("real_servers")

# Top-level packages and tuner modules that only a running command needs.
HEAVY = (
    "optuna",
    "sqlalchemy",
    "matplotlib",
    "numpy",
    "rich",
    "psutil",
    "gevent",
    "uvloop",
    "httptools",
    "multiprocessing",
    # every adapter module: the registry names them, get_adapter imports one when asked
    *(f"tuner.servers.{name}" for name in SERVERS),
    # the load generator's engine and workers (the workload and load specs are light)
    "tuner.loadgen.engine",
    "tuner.loadgen.worker",
    "tuner.loadgen.eventloop",
    "tuner.measure",
    "tuner.procs",
    "tuner.metrics.memory",
    "tuner.report",
    "tuner.search.study",
    "tuner.workflow.tune_steps",
    "tuner.workflow.side_by_side",
    "tuner.workflow.proven_file",
)
COMMANDS = ("tune", "compare", "bench", "load", "emit", "report", "studies", "show", "workload")


def imported_for(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `python -X importtime -m tuner ARGS` and return the run and the modules it imported."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tuner", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    # Lines read "import time: <self us> | <cumulative us> | <indented module name>".
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in run.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    return run, modules


def heavy_among(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_top_level_help_imports_nothing_heavy() -> None:
    run, modules = imported_for("--help")
    assert run.returncode == 0, run.stderr[-2000:]
    assert all(command in run.stdout for command in COMMANDS)
    assert "tuner.commands.tune" in modules  # the parser was built from the command modules
    assert heavy_among(modules) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_command_help_imports_nothing_heavy(command: str) -> None:
    run, modules = imported_for(command, "--help")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith(f"usage: tuner {command}")
    assert heavy_among(modules) == []
