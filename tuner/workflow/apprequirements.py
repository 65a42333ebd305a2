"""Where an app's own requirements come from: the way projects keep them, else its imports.

A written file names one `pip install` line, the server's packages and the app's own, and the
clean-venv check proves that line is enough. The app's part is found in this order:

1. `--app-requirements FILE`;
2. a `requirements.txt` beside the app, or in a folder above it up to the project's root: the
   nearest folder holding `.git`, `pyproject.toml`, `setup.cfg` or `setup.py`, below the
   user's home (a home folder under git for its dotfiles is nobody's project);
3. the root's `pyproject.toml`: `[project] dependencies` (PEP 621: uv, Poetry 2, setuptools,
   hatch), else Poetry's `[tool.poetry.dependencies]` (without `python`);
4. the installed distributions that provide the modules the app imports (the app imported in
   a subprocess, as the servers import it), pinned to the versions here: inferred.

A module the app imports from outside the project's own source, that no installed
distribution provides and no requirement names (a folder on PYTHONPATH), cannot be in a clean
environment: `find_app_requirements` refuses it before anything is measured.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.apps import AppRef
from tuner.errors import AppBrokenError, ConfigError

if TYPE_CHECKING:
    from tuner.search.study import StudySetup

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT_MARKERS = (".git", "pyproject.toml", "setup.cfg", "setup.py")
REQUIREMENTS_TXT = "requirements.txt"
INFERRED = "inferred from imports"
_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
# The tuner itself: the app may import it (a test app does), a deployed server never needs it.
_OWN = "tuner"

# Runs in a fresh interpreter, as `tuner.apps.check_app_imports` does: the app's folder first on
# sys.path, then the import. What the import added to sys.modules (top-level names outside the
# standard library, with where each was loaded from) goes to the file named last, not to
# stdout, which the app may print to.
_LIST_IMPORTS = """
import importlib, json, os, sys, sysconfig
stdlib = tuple(
    os.path.realpath(sysconfig.get_paths()[key]) + os.sep for key in ("stdlib", "platstdlib")
)
sys.path.insert(0, sys.argv[1])
before = set(sys.modules)
importlib.import_module(sys.argv[2])
found = {}
for name, module in list(sys.modules.items()):
    top = name.partition(".")[0]
    if name in before or module is None or top in sys.stdlib_module_names:
        continue
    where = [getattr(module, "__file__", None), *(getattr(module, "__path__", None) or [])]
    # The standard library's private modules (`_sysconfigdata_*`, which sysconfig loads)
    # are not in stdlib_module_names: what lives in its folders, outside site-packages, is it.
    if any(
        isinstance(w, str)
        and os.path.realpath(w).startswith(stdlib)
        and "site-packages" not in w
        and "dist-packages" not in w
        for w in where
    ):
        continue
    found.setdefault(top, set()).update(w for w in where if isinstance(w, str))
with open(sys.argv[3], "w") as out:
    json.dump({name: sorted(places) for name, places in found.items()}, out)
"""


@dataclass(frozen=True)
class AppRequirements:
    """The app's own requirement lines, where they came from, and how to name a missing one."""

    lines: tuple[str, ...]
    source: str  # a path relative to the project (with the table), or INFERRED
    fix: str  # where a missing requirement goes
    project: Path  # the project's root (else the app's folder): its own source needs no package

    @property
    def inferred(self) -> bool:
        return self.source == INFERRED

    def describe(self) -> str:
        """For the written file's header and the terminal."""
        if self.inferred:
            what = "the installed distributions providing the modules the app imports"
            return f"the app's requirements: {INFERRED} ({what})"
        return f"the app's requirements: from {self.source}"


@dataclass(frozen=True)
class Installed:
    """What `importlib.metadata` says about this environment: which distributions provide a
    top-level module, their versions, and what each requires (by canonical name, extras not)."""

    providers: Mapping[str, Sequence[str]]
    versions: Mapping[str, str]
    requires: Mapping[str, frozenset[str]]

    @classmethod
    def here(cls) -> Installed:
        versions: dict[str, str] = {}
        requires: dict[str, frozenset[str]] = {}
        for dist in metadata.distributions():
            name = canonical(dist.metadata["Name"] or "")
            if not name or name in versions:  # the first on sys.path is the one imported
                continue
            versions[name] = dist.version
            requires[name] = frozenset(
                requirement_name(line)
                for line in dist.requires or ()
                if "extra" not in line.partition(";")[2]  # only with an extra asked for
            )
        return cls(metadata.packages_distributions(), versions, requires)


@dataclass(frozen=True)
class Imports:
    """The app's imports, sorted: distributions that provide them, and modules nothing does."""

    distributions: tuple[str, ...]  # canonical names
    unprovided: tuple[tuple[str, str], ...]  # (module, where it was loaded from)


def study_requirements(setup: StudySetup, given: Path | None, check: bool) -> AppRequirements:
    """The requirements of the app `setup` studies, found before any measurement (`given`:
    --app-requirements); with the clean-venv check on (`check`), an import no clean
    environment can have stops here, and the study proves the rest on the default config
    before its first trial."""
    return find_app_requirements(
        setup.app,
        given,
        server_requirements=setup.adapter.requirements(setup.adapter.resolve({})),
        check_imports=check,
    )


def find_app_requirements(
    app: AppRef,
    given: Path | None,
    *,
    server_requirements: Sequence[str] = (),
    check_imports: bool = True,
    home: Path | None = None,
) -> AppRequirements:
    """The app's requirements (see the module's docstring for the order). `check_imports`
    refuses, with one line (exit 2), a module the app imports that a clean environment cannot
    have; the server's own distributions (`server_requirements`) are not the app's."""
    folder = app_folder(app)
    found = declared_requirements(folder, given, home=home)
    if found is not None and not check_imports:
        return found
    installed = Installed.here()
    project = found.project if found else (project_root(folder, home) or folder)
    server = {requirement_name(line) for line in server_requirements}
    imports = classify(
        imported_modules(app),
        installed,
        own=(project, Path(app.pythonpath)),
        skip=server | {_OWN},
        named={requirement_name(line) for line in (found.lines if found else ())},
    )
    if check_imports and imports.unprovided:
        module, where = imports.unprovided[0]
        named_by = found.source if found else "none found, so inferred from the imports"
        raise ConfigError(
            f"app {app}: it imports {module!r} (from {where}), which no installed distribution "
            f"provides and no requirement names (the app's requirements: {named_by}), so a "
            "clean virtual environment cannot have it: install it as a package and name it, "
            "move it into the project, or pass --no-clean-venv-check"
        )
    if found is not None:
        return found
    top = top_level(imports.distributions, installed, also_installed=server)
    return AppRequirements(
        tuple(_pinned(name, installed) for name in top),
        INFERRED,
        "name the app's requirements in a requirements.txt beside it or at the project's root, "
        "or with --app-requirements FILE",
        project,
    )


def _pinned(name: str, installed: Installed) -> str:
    version = installed.versions.get(name)
    return f"{name}=={version}" if version else name


def app_folder(app: AppRef) -> Path:
    """The folder of the app's module (a package's own folder)."""
    parts = app.module.split(".")
    target = Path(app.pythonpath, *parts)
    return target if target.is_dir() else target.parent


def project_root(folder: Path, home: Path | None = None) -> Path | None:
    """The nearest folder, from `folder` up, holding a project marker; never the user's home
    or above it (when `folder` is under it). None when there is none."""
    home = (home or Path.home()).resolve()
    folder = folder.resolve()
    under_home = folder.is_relative_to(home)
    for place in (folder, *folder.parents):
        if under_home and (place == home or not place.is_relative_to(home)):
            return None
        if any((place / marker).exists() for marker in ROOT_MARKERS):
            return place
    return None


def declared_requirements(
    folder: Path, given: Path | None, *, home: Path | None = None
) -> AppRequirements | None:
    """The requirements the project declares (steps 1-3 of the module's docstring), else None."""
    root = project_root(folder, home)
    project = root or folder.resolve()
    if given is not None:
        return AppRequirements(
            read_app_requirements(given),
            f"--app-requirements {given}",
            f"add it to {given}",
            project,
        )
    for place in _up_to(folder.resolve(), root):
        candidate = place / REQUIREMENTS_TXT
        if candidate.is_file():
            shown = _shown(candidate, project)
            return AppRequirements(
                read_app_requirements(candidate),
                shown,
                f"add it to {shown} or name the app's requirements with --app-requirements FILE",
                project,
            )
    pyproject = root / "pyproject.toml" if root else None
    if pyproject is None or not pyproject.is_file():
        return None
    found = pyproject_requirements(pyproject)
    if found is None:
        return None
    lines, table = found
    shown = f"{_shown(pyproject, project)} {table}"
    return AppRequirements(
        lines,
        shown,
        f"add it to {shown} or name the app's requirements with --app-requirements FILE",
        project,
    )


def _up_to(folder: Path, root: Path | None) -> Iterator[Path]:
    """`folder`, then each parent up to `root`; only `folder` itself without a root."""
    yield folder
    if root is None:
        return
    for place in folder.parents:
        if not place.is_relative_to(root):
            return
        yield place


def _shown(path: Path, project: Path) -> str:
    return str(path.relative_to(project)) if path.is_relative_to(project) else str(path)


def read_app_requirements(path: Path, _seen: tuple[Path, ...] = ()) -> tuple[str, ...]:
    """The requirement lines of a requirements file: one package per line, `#` comments and
    blank lines skipped, `-r FILE` read in place. Other pip options (-e, --index-url ...) are
    refused: the written file's header names its packages on one `pip install` line, and an
    option there would not say what gets installed."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--app-requirements {str(path)!r}: {exc.strerror}") from None
    lines: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        option, _, included = line.partition(" ")
        if option in ("-r", "--requirement") and included.strip():
            nested = (path.parent / included.strip()).resolve()
            if nested in _seen:
                raise ConfigError(f"{path}:{number}: {raw.strip()!r} includes itself")
            lines.extend(read_app_requirements(nested, (*_seen, path.resolve())))
            continue
        if line.startswith("-") or any(char.isspace() for char in line):
            raise ConfigError(
                f"{path}:{number}: {raw.strip()!r}: only one package per line (name, extras, "
                "version) or -r FILE is supported, no other pip options"
            )
        lines.append(line)
    return tuple(dict.fromkeys(lines))


def pyproject_requirements(path: Path) -> tuple[tuple[str, ...], str] | None:
    """(requirement lines, the table they came from) of a pyproject.toml, or None when it
    declares none: `[project] dependencies`, else `[tool.poetry.dependencies]`."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the app's requirements: {exc}") from None
    project = data.get("project")
    if isinstance(project, dict) and "dependencies" in project:
        listed = project["dependencies"]
        if not isinstance(listed, list) or not all(isinstance(x, str) for x in listed):
            raise ConfigError(f"{path}: [project] dependencies must be a list of strings")
        return tuple(line.strip() for line in listed), "[project] dependencies"
    tool = data.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    table = poetry.get("dependencies") if isinstance(poetry, dict) else None
    if not isinstance(table, dict):
        return None
    lines = (
        poetry_requirement(name, spec, path.parent)
        for name, spec in table.items()
        if name.lower() != "python"
    )
    return tuple(line for line in lines if line), "[tool.poetry.dependencies]"


def poetry_requirement(name: str, spec: object, folder: Path) -> str | None:
    """One Poetry dependency as a pip requirement; None for an optional one (an extra's)."""
    extras: list[str] = []
    markers = None
    if isinstance(spec, str):
        version = spec
    elif isinstance(spec, dict):
        if spec.get("optional"):
            return None
        extras = [str(extra) for extra in spec.get("extras", [])]
        markers = spec.get("markers")
        named = f"{name}[{','.join(extras)}]" if extras else name
        if "git" in spec:
            ref = spec.get("rev") or spec.get("tag") or spec.get("branch")
            return f"{named} @ git+{spec['git']}" + (f"@{ref}" if ref else "")
        if "url" in spec:
            return f"{named} @ {spec['url']}"
        if "path" in spec:
            return f"{named} @ {(folder / str(spec['path'])).resolve().as_uri()}"
        version = str(spec.get("version", "*"))
    else:  # several constraints, each for some Python or platform: the name says enough
        return name
    line = (f"{name}[{','.join(extras)}]" if extras else name) + poetry_constraint(version)
    return f"{line}; {markers}" if markers else line


def poetry_constraint(text: str) -> str:
    """A Poetry version constraint in PEP 440 terms: `^1.2` is `>=1.2,<2`, `~1.2` is
    `>=1.2,<1.3`, a bare version is `==`. An `||` (either range) has no PEP 440 form: no
    constraint then, pip picks a version and the clean-venv check proves it."""
    if "||" in text:
        return ""
    parts = []
    for raw in text.split(","):
        part = raw.strip().replace(" ", "")
        if part in ("", "*"):
            continue
        if part.startswith("^"):
            parts.append(_bounded(part[1:], caret=True))
        elif part.startswith("~") and not part.startswith("~="):
            parts.append(_bounded(part[1:], caret=False))
        elif part[0] in "<>=!~":
            parts.append(part)
        else:
            parts.append(f"=={part}")
    return ",".join(parts)


def _bounded(version: str, *, caret: bool) -> str:
    numbers = []
    for piece in version.split("."):
        if not piece.isdigit():
            break
        numbers.append(int(piece))
    if not numbers:
        return f">={version}"
    if caret:  # the first non-zero component may not change (^0.0.3 is <0.0.4)
        at = next((i for i, n in enumerate(numbers) if n), len(numbers) - 1)
    else:  # the minor version may not change (the major one if that is all there is)
        at = min(1, len(numbers) - 1)
    upper = [*numbers[:at], numbers[at] + 1]
    return f">={version},<{'.'.join(map(str, upper))}"


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(line: str) -> str:
    """The canonical distribution name a requirement line names ('' for a bare URL)."""
    match = _NAME.match(line)
    return canonical(match.group(1)) if match and "://" not in line.split("@")[0] else ""


def imported_modules(app: AppRef, timeout_s: float = 60) -> dict[str, list[str]]:
    """Import the app in a subprocess, as the servers do: {top-level module it brought in,
    outside the standard library: where it was loaded from}."""
    with tempfile.TemporaryDirectory(prefix="tuner-imports-") as folder:
        out = Path(folder) / "imports.json"
        argv = [sys.executable, "-c", _LIST_IMPORTS, app.pythonpath, app.module, str(out)]
        try:
            done = subprocess.run(  # noqa: S603 - argv list, no shell
                argv,
                cwd=app.pythonpath,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise AppBrokenError(
                f"app {app} did not finish importing within {timeout_s:g} s"
            ) from None
        if done.returncode != 0 or not out.is_file():
            lines = [line for line in done.stderr.splitlines() if line.strip()] or ["no output"]
            raise AppBrokenError(f"app {app} failed to import: {lines[-1].strip()}")
        found: dict[str, list[str]] = json.loads(out.read_text(encoding="utf-8"))
    return found


def classify(
    modules: Mapping[str, Sequence[str]],
    installed: Installed,
    *,
    own: Sequence[Path],
    skip: Set[str],
    named: Set[str],
) -> Imports:
    """Sort the app's imports: the distributions providing them (those in `skip` left out),
    and the modules no distribution provides that are neither named by a requirement (`named`,
    canonical names) nor the project's own source: under one of the `own` folders, outside a
    site-packages (a project's `.venv` is in its folder; its own package may be installed
    editable, and is still its source)."""
    distributions: set[str] = set()
    unprovided: list[tuple[str, str]] = []
    folders = [Path(folder).resolve() for folder in own]
    for module, places in sorted(modules.items()):
        paths = [Path(place).resolve() for place in places]
        if module == _OWN or any(_in_source(path, folders) for path in paths):
            continue
        providers = {canonical(name) for name in installed.providers.get(module, ())}
        if providers:
            if not providers & skip:
                distributions |= providers
            continue
        if paths and canonical(module) not in named:  # no file: made at run time
            unprovided.append((module, str(paths[0])))
    return Imports(tuple(sorted(distributions)), tuple(unprovided))


def _in_source(path: Path, folders: Sequence[Path]) -> bool:
    installed = {"site-packages", "dist-packages"} & set(path.parts)
    return not installed and any(path.is_relative_to(folder) for folder in folders)


def top_level(
    distributions: Sequence[str], installed: Installed, *, also_installed: Set[str] = frozenset()
) -> tuple[str, ...]:
    """`distributions` without those another of them (or of `also_installed`, the server's)
    requires, directly or not: `flask` brings werkzeug and jinja2, so the line says flask."""
    wanted = [name for name in distributions if name not in also_installed]

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(installed.requires.get(start, ()))
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(installed.requires.get(name, ()))
        return seen

    reached = {name: reach(name) for name in [*wanted, *also_installed]}
    kept = []
    for name in wanted:
        # Brought by another one that it does not bring back (a cycle keeps both).
        by = [other for other, below in reached.items() if other != name and name in below]
        if not any(other not in reached.get(name, set()) for other in by):
            kept.append(name)
    return tuple(kept)


def missing_module_hint(reason: str, installed: Installed) -> str:
    """For a boot that failed on `No module named 'x'`: which installed distribution provides
    it, so the fix can name the package ('' when the reason is another one)."""
    match = re.search(r"No module named '([^'.]+)", reason)
    if not match:
        return ""
    providers = sorted(installed.providers.get(match.group(1), ()))
    if not providers:
        return ""
    return f"{match.group(1)!r} is provided by the installed distribution {providers[0]}"
