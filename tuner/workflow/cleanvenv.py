"""A clean virtual environment with only what an emitted file says it needs, cached per set.

An emitted config file names the packages it needs (one `pip install` line). To prove that
line is enough, the file is booted in a virtual environment made from nothing but that line:
`python -m venv` without the system's site-packages, then pip. Our own environment would hide a
missing package (gunicorn's gevent worker imports `packaging`, which the tuner's other
dependencies happen to bring), a clean one does not.

One environment per requirement set (and Python version), under a cache folder keyed by their
hash, so a study, or a test session, pays the install once. The cache folder is
`$TUNER_VENV_CACHE`, else `$XDG_CACHE_HOME/tuner/venvs` (`~/.cache/tuner/venvs`). A lock file
per environment keeps two tuners from building the same one at once; a `ready` marker, written
last, means the environment was complete, and lists what its `bin` folder held then: a cached
environment missing its interpreter or any of those (a cache folder pruned by hand or by a
cleaner) is built again, never handed on to fail at boot.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import TunerError

CACHE_ENV = "TUNER_VENV_CACHE"
READY = "tuner-ready"
# Variables that would let the clean environment see packages it does not hold, or make pip
# install somewhere else.
_LEAKS = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "VIRTUAL_ENV", "PIP_TARGET", "PIP_PREFIX")
# `pip --python` (install into another interpreter's environment) exists from pip 22.3; it
# spares each environment its own copy of pip (ensurepip costs ~3 s per environment).
_PIP_WITH_PYTHON_OPTION = (22, 3)
_INSTALL_TIMEOUT_S = 600
# The marker's lines naming a program in `bin` (the others are the requirements).
_PROGRAM = "bin: "


@dataclass(frozen=True)
class CleanVenv:
    """A virtual environment holding exactly `requirements` (and their dependencies)."""

    path: Path
    requirements: tuple[str, ...]

    @property
    def bin_dir(self) -> Path:
        return self.path / "bin"

    def environ(self) -> dict[str, str]:
        """Variables for a process run from this environment (set on top of ours): no
        PYTHONPATH of ours, no user site-packages, its bin folder first on PATH."""
        return {
            "PYTHONPATH": "",  # empty adds nothing to sys.path
            "PYTHONNOUSERSITE": "1",
            "VIRTUAL_ENV": str(self.path),
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }


def cache_dir() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tuner" / "venvs"


def requirements_key(requirements: Sequence[str]) -> str:
    """The cache key: the requirement set (order does not matter) and this Python's version."""
    text = "\n".join([sys.version, *sorted(set(requirements))])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def clean_venv(requirements: Sequence[str], cache: Path | None = None) -> CleanVenv:
    """The cached environment for `requirements`, built first if it does not exist yet.

    Raises TunerError (one line) when pip cannot install them, e.g. offline.
    """
    folder = cache or cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    wanted = tuple(dict.fromkeys(requirements))  # as given (the header's order), once each
    venv = CleanVenv(folder / requirements_key(wanted), wanted)
    if _complete(venv):
        return venv
    with _locked(folder / f"{venv.path.name}.lock"):
        if not _complete(venv):  # another tuner may have built it meanwhile
            _build(venv)
    return venv


def _complete(venv: CleanVenv) -> bool:
    """Whether the cached environment is whole: its marker, its interpreter (which may link to
    a Python that has since gone) and every program its install put in `bin`."""
    marker = venv.path / READY
    if not marker.is_file() or not (venv.bin_dir / "python").exists():
        return False
    lines = marker.read_text(encoding="utf-8").splitlines()
    programs = [line.removeprefix(_PROGRAM) for line in lines if line.startswith(_PROGRAM)]
    return all((venv.bin_dir / name).exists() for name in programs)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(venv: CleanVenv) -> None:
    shutil.rmtree(venv.path, ignore_errors=True)  # a half-built one from an interrupted run
    own_pip = not _host_pip_installs_elsewhere()
    create = [sys.executable, "-m", "venv", *([] if own_pip else ["--without-pip"]), venv.path]
    _run(create, "create a clean virtual environment", venv.requirements)
    python = venv.bin_dir / "python"
    pip = [python, "-m", "pip"] if own_pip else [sys.executable, "-m", "pip", "--python", python]
    if venv.requirements:
        install = [
            *pip,
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            *venv.requirements,
        ]
        _run(install, "install", venv.requirements)
    programs = sorted(entry.name for entry in venv.bin_dir.iterdir())
    lines = [*venv.requirements, *(f"{_PROGRAM}{name}" for name in programs)]
    (venv.path / READY).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _host_pip_installs_elsewhere() -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        parts = version("pip").split(".")[:2]
        return tuple(int(part) for part in parts) >= _PIP_WITH_PYTHON_OPTION
    except (PackageNotFoundError, ValueError):
        return False


def _run(argv: Sequence[object], what: str, requirements: Sequence[str]) -> None:
    try:
        done = subprocess.run(  # noqa: S603 - argv list, no shell
            [str(part) for part in argv],
            capture_output=True,
            text=True,
            timeout=_INSTALL_TIMEOUT_S,
            env=_scrubbed(os.environ),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TunerError(f"could not {what} {_listed(requirements)}: {exc}") from None
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr or done.stdout).splitlines()]
        errors = [line for line in lines if line.startswith("ERROR")] or lines or ["no output"]
        raise TunerError(
            f"could not {what} {_listed(requirements)} in a clean virtual environment: "
            f"{errors[-1]}; without access to the package index, pass --no-clean-venv-check"
        )


def _listed(requirements: Sequence[str]) -> str:
    return " ".join(requirements) or "(nothing)"


def _scrubbed(environ: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in environ.items() if key not in _LEAKS}
