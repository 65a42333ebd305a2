"""`tune --for-cpus`: a short real run measures the reference size and a count-only study at the
other, and writes a gunicorn.conf.py whose counts are computed at boot from the fitted rule."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import optuna
import pytest

from tests.support.cli import SHORT, run_tuner

pytestmark = pytest.mark.usefixtures("real_servers")


def written_rule(text: str) -> object:
    """The SIZING_RULE literal a written file holds."""
    line = next(line for line in text.splitlines() if line.startswith("SIZING_RULE = "))
    return ast.literal_eval(line.removeprefix("SIZING_RULE = "))


def test_for_cpus_measures_each_size_and_writes_a_file_sized_at_boot(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path}/s.db"
    out = tmp_path / "gunicorn.conf.py"
    done = run_tuner(
        "tune",
        "apps/hello.py",
        "--server",
        "gunicorn",
        "--for-cpus",
        "0.5,1",
        "--trials",
        "3",
        "--top-k",
        "1",
        "--confirm-rounds",
        "1",
        "--no-clean-venv-check",
        "--storage",
        storage,
        "--out",
        str(out),
        "--json",
        *SHORT,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    sizing = result["sizing"]
    assert sizing["measured_cpus"] == [0.5, 1.0] and sizing["env"] == "WEB_CONCURRENCY"
    assert sizing["master_mb"] > 0 and sizing["process_mb"] > 0
    text = out.read_text()
    assert written_rule(text) == sizing
    assert "# Sized at boot:" in text and "#   0.5 CPUs: " in text and "#   1 CPUs: " in text
    assert "deploy it with the same" not in text  # the reference's limit is not the box's
    # The other size's own study, with the counts only: the winner's other settings pinned.
    names = {s.study_name for s in optuna.get_all_study_summaries(storage)}
    assert names == {result["study"], f"{result['study']}-0.5cpus"}
    small = optuna.load_study(study_name=f"{result['study']}-0.5cpus", storage=storage)
    searched = [t for t in small.trials if t.state.name == "COMPLETE" and t.params]
    others = {
        tuple(sorted((k, v) for k, v in t.params.items() if k not in ("workers", "threads")))
        for t in searched
    }
    assert searched and len(others) == 1, others
    # emit writes the pick sized at boot again, from the rule kept with it.
    again = tmp_path / "again.conf.py"
    emitted = run_tuner(
        "emit", "--study", result["study"], "--out", str(again), "--storage", storage,
        "--no-clean-venv-check",
    )  # fmt: skip
    assert emitted.returncode == 0, emitted.stderr[-2000:]
    assert written_rule(again.read_text()) == sizing


def test_for_cpus_on_a_one_process_server_sizes_its_threads(tmp_path: Path) -> None:
    """waitress: one process, so the rule scales its threads, WAITRESS_THREADS overrides them,
    and the written files are the shell launcher and the Python launcher beside it, booted
    (as `python3 waitress_sized.py`) before they were written."""
    storage = f"sqlite:///{tmp_path}/s.db"
    out = tmp_path / "waitress-serve.sh"
    done = run_tuner(
        "tune", "apps/hello.py", "--server", "waitress", "--for-cpus", "0.5,1",
        "--trials", "3", "--top-k", "1", "--confirm-rounds", "1", "--no-clean-venv-check",
        "--storage", storage, "--out", str(out), "--json", *SHORT,
        timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    sizing = json.loads(done.stdout)["sizing"]
    assert sizing["env"] == "WAITRESS_THREADS" and sizing["overrides"] == "threads"
    assert sizing["processes"] == [0.0, 1.0]  # one process at every size
    launcher = (tmp_path / "waitress_sized.py").read_text()
    assert written_rule(launcher) == sizing
    assert '--threads="${WAITRESS_THREADS:-' in out.read_text()
    assert "WAITRESS_THREADS=N overrides the thread count" in launcher
