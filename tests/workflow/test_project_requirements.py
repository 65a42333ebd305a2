"""A Flask app laid out as projects keep one: in a folder of its own, its requirements at the
project's root. `tuner tune` finds them, proves the default config with them in a clean virtual
environment before the first trial, and never throws a finished study away.

Real tuner runs on gunicorn (the fastest server to boot), kept short as tests/test_tune.py keeps
its runs: the baselines only, short windows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from tests.support.cli import REPO, read_until
from tuner.cli import main
from tuner.workflow.cleanvenv import CACHE_ENV, READY

SHORT = ["--duration", "0.6", "--warmup", "0.2", "--connections", "16", "--trials", "2"]
FLASK_APP = """import flask

app = flask.Flask(__name__)


@app.get("/")
def index() -> str:
    return "hello"
"""


def project(tmp_path: Path, app_imports: str = "") -> Path:
    """shop/ with its requirements in pyproject.toml only, the app in shop/web/app.py."""
    root = tmp_path / "shop"
    (root / "web").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "shop"\nversion = "1.0"\ndependencies = ["flask>=3"]\n'
    )
    app = root / "web" / "app.py"
    app.write_text(app_imports + FLASK_APP)
    return app


def tuner(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tuner", *args, "--storage", f"sqlite:///{tmp_path}/s.db"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


def measured_trials(tmp_path: Path, study: str) -> int:
    storage = f"sqlite:///{tmp_path}/s.db"
    if study not in optuna.study.get_all_study_names(storage):
        return 0
    trials = optuna.load_study(study_name=study, storage=storage).trials
    return sum(t.state.name != "WAITING" for t in trials)


def test_requirements_in_the_parents_pyproject_are_found_and_proven(
    tmp_path: Path, since: float
) -> None:
    app, out = project(tmp_path), tmp_path / "deploy" / "gunicorn.conf.py"
    proc = tuner(
        tmp_path, "tune", str(app), "--server", "gunicorn", "--out", str(out), "--json", *SHORT
    )
    code, stdout, stderr = finish(proc)
    assert code == 0, stderr
    result = json.loads(stdout)
    assert result["app_requirements"] == {
        "packages": ["flask>=3"],
        "source": "pyproject.toml [project] dependencies",
    }
    text = out.read_text()
    assert "'flask>=3'\n" in text  # on the needs: line, after the server's packages
    assert "(the app's requirements: from pyproject.toml [project] dependencies)" in text
    assert "booted in a clean virtual environment holding only these" in text
    assert not out.with_name(out.name + ".unproven").exists()


def test_an_import_no_distribution_provides_stops_before_the_first_trial(
    tmp_path: Path, since: float
) -> None:
    # A module on the tuner's PYTHONPATH, outside the project, that no package provides: the
    # servers here import it, a clean virtual environment never could.
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "secretlib.py").write_text("VALUE = 1\n")
    app, out = project(tmp_path, "import secretlib\n"), tmp_path / "gunicorn.conf.py"
    path = os.pathsep.join([str(vendor), os.environ.get("PYTHONPATH", "")])
    proc = tuner(
        tmp_path, "tune", str(app), "--server", "gunicorn", "--out", str(out), *SHORT,
        env={"PYTHONPATH": path},
    )  # fmt: skip
    code, _, stderr = finish(proc)
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ") and "'secretlib'" in lines[0]
    assert str(vendor / "secretlib.py") in lines[0]
    assert measured_trials(tmp_path, "app-gunicorn-throughput") == 0
    assert not out.exists() and not out.with_name(out.name + ".unproven").exists()


def test_a_requirement_the_project_lacks_fails_in_seconds_with_the_fix(
    tmp_path: Path, since: float
) -> None:
    app, out = project(tmp_path), tmp_path / "gunicorn.conf.py"
    # A requirements.txt at the root comes before pyproject.toml, and it forgot Flask.
    (app.parents[1] / "requirements.txt").write_text("itsdangerous\n")
    proc = tuner(tmp_path, "tune", str(app), "--server", "gunicorn", "--out", str(out), *SHORT)
    code, _, stderr = finish(proc)
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    line = lines[0]
    assert "the default gunicorn config does not boot in a clean virtual environment" in line
    assert "No module named 'flask'" in line
    assert "provided by the installed distribution flask" in line.lower()
    assert (
        "add it to requirements.txt or name the app's requirements with --app-requirements" in line
    )
    assert measured_trials(tmp_path, "app-gunicorn-throughput") == 0
    assert not out.exists()


def test_a_finished_study_whose_file_cannot_be_proven_is_kept(tmp_path: Path, since: float) -> None:
    """The study proves its default in a clean environment, which then loses the app's package
    before the end (a pruned cache, an index that changed): the picked config must not be lost
    with it. Only `workers` is searched, so every config needs the default's packages and the
    end checks in the same (cached) environment."""
    app, out = project(tmp_path), tmp_path / "deploy" / "gunicorn.conf.py"
    space = tmp_path / "workers.toml"
    space.write_text('server = "gunicorn"\n[params.workers]\ntype = "int"\nlow = 1\nhigh = 3\n')
    cache = tmp_path / "venvs"  # this test's own: it breaks one
    proc = tuner(
        tmp_path, "tune", str(app), "--server", "gunicorn", "--out", str(out), "--space",
        str(space), "--no-branch-starts", "--study-name", "shop", *SHORT,
        env={CACHE_ENV: str(cache)},
    )  # fmt: skip
    try:
        read_until(proc.stderr, "trial ", 1)  # the default was proven clean; the study runs
        (venv,) = [p.parent for p in cache.glob(f"*/{READY}")]
        (site,) = venv.glob("lib/python*/site-packages")
        shutil.rmtree(site / "flask")
    finally:
        code, _, stderr = finish(proc)
    assert code == 3, stderr
    kept = out.with_name(out.name + ".unproven")
    assert not out.exists() and kept.is_file()
    text = kept.read_text()
    assert "NOT PROVEN: it boots with the tuner's own packages, but not in a clean" in text
    assert "No module named 'flask'" in text
    assert "NOT proven in a clean virtual environment" in stderr
    hint = f"tuner emit --study shop --out {out} --storage sqlite:///{tmp_path}/s.db"
    assert hint in stderr
    # Once the requirements are named (here a new set: a fresh environment), emit writes it.
    named = tmp_path / "deploy-requirements.txt"
    named.write_text("flask>=3.0\n")
    emit = tuner(
        tmp_path, "emit", "--study", "shop", "--out", str(out), "--app-requirements", str(named),
        env={CACHE_ENV: str(cache)},
    )  # fmt: skip
    code, _, stderr = finish(emit)
    assert code == 0, stderr
    written = out.read_text()
    assert "study 'shop'" in written and "verdict: " in written  # the study's own header
    assert f"(the app's requirements: from --app-requirements {named})" in written
    assert "booted in a clean virtual environment holding only these" in written
    assert "NOT PROVEN" not in written


def test_emit_without_a_trial_needs_a_study_that_picked_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path}/s.db"
    optuna.create_study(study_name="unfinished", storage=storage)
    out = tmp_path / "gunicorn.conf.py"
    code = main(["emit", "--study", "unfinished", "--out", str(out), "--storage", storage])
    assert code == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line
    assert "--study 'unfinished': `tuner tune` has not picked a config for it yet" in line
    assert "give --trial N" in line
    assert not out.exists()
