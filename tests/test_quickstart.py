"""The README's first command, `./scripts/quickstart`, as a new user runs it on a fresh copy of
the checkout, in the set-ups of issue 43:

- with the distribution's own python3 first on PATH (Debian's and Ubuntu's: it refuses installs,
  PEP 668), where the script makes the project's .venv and says so;
- inside a virtual environment the user made and activated, where it installs into that one.

Each run installs the package and its dependencies for real (pip's cache keeps that short) and
runs a two-trial study, so the test is slow; it checks that the config file is written and that
the installed `tuner` runs afterwards. (The third set-up, a python3 that allows installs,
takes the scripts' old path; CI, which runs the suite from the distribution's python3 where
that one refuses installs, does not pass through it.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import unavailable
from tests.support.cli import REPO

DISTRIBUTION_PYTHON = Path("/usr/bin/python3")
# Two trials (the default and 2*cpus+1, the study's first two), one finalist, one round.
TINY = ["--trials", "2", "--duration", "1", "--warmup", "0.3", "--top-k", "1"]
TINY += ["--confirm-rounds", "1"]
WRITTEN = Path("studies/fib-gunicorn-throughput/gunicorn.conf.py")
PEP_668_LINE = "python3 here refuses installs (PEP 668): using the project's virtual environment"
# Installs from pip's cache and a tiny study take about a minute here; generous for a machine
# twice as slow whose cache is cold.
TIMEOUT_S = 900


# Left out of a copy of a checkout that is not a git clone (an unpacked archive): what the
# scripts, the tests and the tuner make (.gitignore says the same).
_MADE = (".git", ".venv", "studies", "__pycache__", "*.egg-info", "build", ".*_cache", "site")


def _fresh_copy(tmp: Path) -> Path:
    """What a fresh clone holds, with this working tree's edits: the files git tracks or would
    (no .venv, no studies, no caches)."""
    copy = tmp / "checkout"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:  # not a git checkout
        shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(*_MADE))
        return copy
    for name in filter(None, listed.stdout.split("\0")):
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the working tree is listed too
            target = copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            target.chmod(source.stat().st_mode)
    return copy


def _path_without_venvs() -> list[str]:
    """This PATH less any virtual environment's bin folder (the tests may run in one)."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return [f for f in folders if f and not (Path(f).parent / "pyvenv.cfg").is_file()]


def _base_env() -> dict[str, str]:
    # No trace of the environment running the tests: a new user's shell has none of these.
    drop = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "CONDA_PREFIX"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "200"  # the study's name on one line of `tuner studies`
    return env


def _externally_managed(python: Path) -> bool:
    if not python.is_file():
        return False
    stdlib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return bool(stdlib) and (Path(stdlib) / "EXTERNALLY-MANAGED").is_file()


def _quickstart(copy: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        [str(copy / "scripts" / "quickstart"), *TINY],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
        check=False,
    )
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    assert (copy / WRITTEN).is_file(), run.stdout[-3000:]
    return run


def _runs_afterwards(venv: Path, copy: Path, env: dict[str, str]) -> None:
    """The venv holds the copy's editable install, and its `tuner`, run by its path as the
    README says, finds the study."""
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import tuner; print(tuner.__file__)"],
        cwd=copy.parent,  # not the copy, whose tuner/ '' on sys.path would import anyway
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.strip()
    assert Path(where).resolve().is_relative_to(copy.resolve()), where
    studies = subprocess.run(
        [str(venv / "bin" / "tuner"), "studies"],
        cwd=copy,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert studies.returncode == 0, studies.stderr
    assert "fib-gunicorn-throughput" in studies.stdout, studies.stdout


@pytest.mark.slow
@pytest.mark.timeout(2 * TIMEOUT_S)
def test_quickstart_with_the_distribution_python(tmp_path: Path, since: float) -> None:
    if not _externally_managed(DISTRIBUTION_PYTHON):
        unavailable(f"no {DISTRIBUTION_PYTHON} that refuses installs (PEP 668) on this machine")
    copy = _fresh_copy(tmp_path)
    env = _base_env()
    env["PATH"] = os.pathsep.join([str(DISTRIBUTION_PYTHON.parent), *_path_without_venvs()])

    run = _quickstart(copy, env)
    assert run.stderr.count(PEP_668_LINE) == 1, run.stderr[-3000:]
    venv = copy / ".venv"
    assert (venv / "pyvenv.cfg").is_file()
    _runs_afterwards(venv, copy, env)


@pytest.mark.slow
@pytest.mark.timeout(2 * TIMEOUT_S)
def test_quickstart_in_an_activated_venv(tmp_path: Path, since: float) -> None:
    copy = _fresh_copy(tmp_path)
    # The user's own venv, from the interpreter running the tests (inside a venv, venv makes
    # one of its base interpreter).
    venv = tmp_path / "user-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=TIMEOUT_S)
    # What bin/activate does to the environment.
    env = _base_env()
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *_path_without_venvs()])

    run = _quickstart(copy, env)
    assert PEP_668_LINE not in run.stderr, run.stderr[-3000:]
    assert not (copy / ".venv").exists(), "the script made .venv inside an active venv"
    _runs_afterwards(venv, copy, env)
