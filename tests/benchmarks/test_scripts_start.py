"""Every benchmark script starts: its imports resolve against today's `tuner` and its options
parse. A script that nobody ran since a refactor fails here, not on the day its figures are
needed. `--help` only: no server, no load."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SCRIPTS = sorted(
    path
    for path in (ROOT / "benchmarks").glob("*.py")
    if 'if __name__ == "__main__":' in path.read_text()
)


def test_the_benchmarks_folder_has_scripts() -> None:
    assert len(SCRIPTS) >= 5, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_script_answers_help(script: Path) -> None:
    # Run as the docs run it (`python benchmarks/NAME.py`), from another folder, with no
    # PYTHONPATH: the script finds its own checkout.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=script.parent.parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
