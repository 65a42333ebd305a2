"""The package as a user installs it: a wheel in a fresh virtualenv, used from another folder.

The slow test builds the wheel from a copy of the sources, installs it into a new virtualenv and
runs the installed `tuner` from a folder outside the checkout, against a real gunicorn.

To keep it quick, the virtualenv borrows the dependencies (optuna, matplotlib, gunicorn, ...)
from the environment running the tests, however that was made (a system or pyenv interpreter,
a user's virtual environment, the project's .venv): a .pth file appends that environment's
site-packages folders to the virtualenv's path. (`--system-site-packages` would not do: inside a
virtual environment it reaches the base interpreter's packages, not the active environment's.)
That environment usually holds an editable install of this checkout, which could hand a broken
wheel the checkout's own files (its import hook resolves `tuner.search_spaces` when the wheel
lacks it). The borrowed folders come after the virtualenv's own and their .pth files are not
run, so that hook stays out; and the test does not only run the commands: it checks that the
installed code and the search spaces it reads lie inside the virtualenv, and that the wheel
itself holds every module and every space file.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.support.cli import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10 only
    import tomli as tomllib

SPACES = sorted(p.name for p in (REPO / "search_spaces").glob("*.toml"))


def test_every_package_folder_is_listed_in_pyproject() -> None:
    """The package list is written out (for tuner.search_spaces): a new folder must join it."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "tuner").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert set(config["packages"]) == folders | {"tuner.search_spaces"}
    assert config["package-dir"] == {"tuner.search_spaces": "search_spaces"}
    assert SPACES, "no search_spaces/*.toml in the checkout"


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    # Without PYTHONPATH: a developer's PYTHONPATH=<checkout> would import the checkout instead.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["NO_COLOR"] = "1"
    run = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    return run


def _ok(run: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert run.returncode == 0, f"{run.args}: exit {run.returncode}\n{run.stderr[-3000:]}"
    return run


def _build_wheel(tmp: Path) -> Path:
    """Build from a copy, so the checkout gets no build/ folder and no stale file gets in."""
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    for folder in ("tuner", "search_spaces"):
        shutil.copytree(
            REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    dist = tmp / "dist"
    _ok(
        _run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), "."], source
        )
    )
    (wheel,) = dist.glob("tuner-*.whl")
    return wheel


def _running_site_packages() -> list[str]:
    """Where the running interpreter's installed packages are, however its environment was
    made: its own site-packages (a venv's, or a system or pyenv interpreter's), the folders
    `--system-site-packages` or the user's site add to it, and the scheme's purelib/platlib."""
    paths = sysconfig.get_paths()
    folders = [*site.getsitepackages(), paths["purelib"], paths["platlib"]]
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    return [folder for folder in dict.fromkeys(folders) if Path(folder).is_dir()]


def _borrow_site_packages(python: Path) -> None:
    """Plain folder lines in a .pth file of the virtualenv: `site` appends them to sys.path
    after the virtualenv's own site-packages, and runs none of their .pth files (the
    checkout's editable finder, when the running environment has one)."""
    purelib = _ok(
        _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], REPO)
    ).stdout.strip()
    (Path(purelib) / "_running_env.pth").write_text("\n".join(_running_site_packages()) + "\n")


# Run by the virtualenv's Python: where the installed code and its default spaces are.
_WHERE = """
import json, tuner
from tuner.search.space import default_space_path, load_space
from tuner.servers import SERVERS, get_adapter

spaces = {}
for name in SERVERS:
    path = default_space_path(name)
    load_space(path, get_adapter(name).table, name)
    spaces[name] = str(path)
print(json.dumps({"tuner": tuner.__file__, "spaces": spaces}))
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.usefixtures("real_servers")  # runs the tuner and a server from the wheel
def test_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    shipped = {p.relative_to(REPO).as_posix() for p in (REPO / "tuner").rglob("*.py")}
    shipped |= {f"tuner/search_spaces/{name}" for name in SPACES}
    assert sorted(shipped - names) == []

    venv = tmp_path / "venv"
    _ok(_run([sys.executable, "-m", "venv", str(venv)], tmp_path))
    python, tuner = venv / "bin" / "python", venv / "bin" / "tuner"
    # The dependencies come from the running environment; only the wheel is installed.
    _borrow_site_packages(python)
    _ok(
        _run(
            [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
            tmp_path,
        )
    )

    # A user's own folder, far from the checkout, with their app in it.
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy2(REPO / "apps" / "hello.py", project / "hello.py")

    where = json.loads(_ok(_run([str(python), "-c", _WHERE], project)).stdout)
    site = venv.resolve()
    assert Path(where["tuner"]).resolve().is_relative_to(site), where
    for server, path in where["spaces"].items():
        assert Path(path).resolve().is_relative_to(site), (server, path)

    # `tune` gets past loading its default space: the study name is the first thing it refuses.
    tune = _run(
        [str(tuner), "tune", "hello.py", "--server", "gunicorn", "--study-name", "!"], project
    )
    assert tune.returncode == 2 and "--study-name '!'" in tune.stderr, tune.stderr

    bench = _ok(
        _run(
            [str(tuner), "bench", "hello.py", "--server", "gunicorn", "--json"]
            + ["--duration", "1", "--warmup", "0.5", "--connections", "8"],
            project,
        )
    )
    result = json.loads(bench.stdout)
    assert result["rps"] > 0 and result["error_rate"] == 0, result
