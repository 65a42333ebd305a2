"""`tuner tune` on a terminal (a pseudo-terminal here): the live display, and in the same study
the latency objective end to end and --timeout ending the search."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import optuna

from tests.support.cli import REPO
from tuner.search.study import load_records

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def run_on_a_terminal(argv: list[str], timeout_s: float = 240) -> tuple[int, str]:
    """Run with stdin, stdout and stderr on a pseudo-terminal; returns (code, text shown)."""
    controller, terminal = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CI")}
    proc = subprocess.Popen(
        argv, cwd=REPO, stdin=terminal, stdout=terminal, stderr=terminal,
        env={**env, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "50"},
    )  # fmt: skip
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: every holder of the terminal is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    code = proc.wait(timeout=timeout_s)
    return code, ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


def test_live_display_latency_objective_and_study_timeout(tmp_path: Path, since: float) -> None:
    storage = f"sqlite:///{tmp_path}/s.db"
    code, shown = run_on_a_terminal(
        [sys.executable, "-m", "tuner", "tune", "apps/hello.py", "--server", "gunicorn",
         "--objective", "latency", "--trials", "100", "--timeout", "4", "--top-k", "1",
         "--confirm-rounds", "1", "--storage", storage, "--study-name", "live",
         "--out", str(tmp_path / "gunicorn.conf.py"), "--seed", "1", "--no-clean-venv-check",
         "--duration", "0.6", "--warmup", "0.2", "--connections", "8"]
    )  # fmt: skip
    assert code == 0, shown[-3000:]
    # The live view: its table of the best trials and the confirmation phase were drawn.
    assert "best so far" in shown and "confirming: round 1" in shown, shown[-3000:]
    assert "verdict:" in shown and "wrote " in shown

    # --timeout 4 ended a search asked for 100 trials after a few.
    study = optuna.load_study(study_name="live", storage=storage)
    assert 2 <= len(study.trials) < 10, len(study.trials)
    # --objective latency: a minimizing study, and the confirmed trial is the lowest p99.
    assert study.directions == [optuna.study.StudyDirection.MINIMIZE]
    assert study.user_attrs["setup"]["objective"] == "latency"
    _, records = load_records(storage, "live")
    usable = [r for r in records if r.state == "COMPLETE" and r.feasible and not r.baseline]
    searched = [
        c["trial"]
        for c in study.user_attrs["result"]["confirmation"]
        if c["label"] == f"trial {c['trial']}"  # searched, as measured (not a variant of it)
    ]
    baselines = [r.settings for r in records if r.baseline]
    if usable and min(usable, key=lambda r: r.p99_ms).settings not in baselines:
        assert searched == [min(usable, key=lambda r: r.p99_ms).number]
    verdict = next(line for line in shown.splitlines() if line.startswith("verdict:"))
    assert "p99" in verdict or "default config" in verdict, verdict
