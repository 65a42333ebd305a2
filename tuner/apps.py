"""Which app to serve: parse `module:callable` or `path/to/file.py:callable`, check that it
imports, and find which interface it speaks (WSGI or ASGI 3) by inspecting the object.

Both forms end up as (module, callable, pythonpath) because that is what every server
understands: the server puts `pythonpath` on sys.path and imports `module`.
"""

from __future__ import annotations

import keyword
import os
import subprocess
import sys
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from tuner.errors import AppBrokenError, ConfigError

DEFAULT_CALLABLE = "app"

# Runs in a fresh interpreter so a broken app (or one that calls sys.exit, or segfaults) cannot
# take the tuner down. It prints the interface it found; exit 3/4/5 mean "attribute missing",
# "not callable" and bad input (an interface no server here speaks, ASGI 2; a Django settings
# module that cannot be imported), apart from a crash.
_IMPORT_CHECK = """
import importlib, inspect, os, sys
sys.path.insert(0, sys.argv[1])
given = os.environ.get("DJANGO_SETTINGS_MODULE")
try:
    module = importlib.import_module(sys.argv[2])
except ImportError as exc:
    # A Django project whose settings module does not import (a typo, a stale variable in the
    # shell, or the project's folder not on sys.path): say which one, and who named it.
    settings, missing = os.environ.get("DJANGO_SETTINGS_MODULE"), exc.name or ""
    if not (settings and missing and (settings + ".").startswith(missing + ".")):
        raise
    who = "from the environment" if given else "as the app sets it"
    print(f"Django's settings module {settings!r} cannot be imported from {sys.argv[1]} "
          f"(DJANGO_SETTINGS_MODULE={settings!r}, {who}): No module named {missing!r}",
          file=sys.stderr)
    sys.exit(5)
target = getattr(module, sys.argv[3], None)
if target is None:
    print(f"module {sys.argv[2]!r} has no attribute {sys.argv[3]!r}", file=sys.stderr)
    sys.exit(3)
if not callable(target):
    print(f"{sys.argv[3]!r} is a {type(target).__name__}, not a WSGI or ASGI callable",
          file=sys.stderr)
    sys.exit(4)

def coroutine(obj):
    if inspect.isclass(obj):  # calling it makes an instance, whatever its __call__ is
        return False
    return inspect.iscoroutinefunction(obj) or inspect.iscoroutinefunction(
        getattr(obj, "__call__", None))

try:
    params = inspect.signature(target).parameters.values()
except (TypeError, ValueError):  # a builtin or C callable: nothing to inspect
    params = None
if params is None:
    print("wsgi")
    sys.exit(0)
positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
if coroutine(target):
    if len(positional) == 3 or varargs:
        print("asgi")
        sys.exit(0)
    names = ", ".join(p.name for p in positional) or "nothing"
    print(f"{sys.argv[3]!r} is a coroutine function taking ({names}): an ASGI 3 app takes "
          "(scope, receive, send)", file=sys.stderr)
    sys.exit(5)
if len(positional) == 1 and not varargs:
    print(f"{sys.argv[3]!r} takes one argument ({positional[0].name}): an ASGI 2 double "
          "callable; the servers here run ASGI 3 apps (scope, receive, send): wrap it with "
          "asgiref.compatibility.guarantee_single_callable", file=sys.stderr)
    sys.exit(5)
print("wsgi")
"""


class Interface(str, Enum):
    """What an app speaks to its server: WSGI (a sync `app(environ, start_response)`) or
    ASGI 3 (a coroutine `app(scope, receive, send)`)."""

    WSGI = "wsgi"
    ASGI = "asgi"

    def __str__(self) -> str:
        return str(self.value)

    def describe(self) -> str:
        return "a WSGI application" if self is Interface.WSGI else "an ASGI 3 application"


@dataclass(frozen=True)
class AppRef:
    """An app as the servers load it: `import module` with `pythonpath` on sys.path, and the
    interface it speaks (WSGI until `check_app_imports` has looked)."""

    module: str
    callable: str
    pythonpath: str
    interface: Interface = Interface.WSGI

    @property
    def spec(self) -> str:
        """`module:callable`, the form both servers take on their command line."""
        return f"{self.module}:{self.callable}"

    def __str__(self) -> str:
        return self.spec


def _is_name(text: str) -> bool:
    return text.isidentifier() and not keyword.iskeyword(text)


def _is_dotted_name(text: str) -> bool:
    return all(_is_name(part) for part in text.split("."))


def _module_of_file(path: Path) -> tuple[str, Path]:
    """(dotted module name, folder to put on sys.path) of a .py file: a file inside packages
    (folders holding `__init__.py`) is imported by its dotted name from the first folder above
    them, as Python imports it; its relative imports and the names its project uses for it
    (Django's `DJANGO_SETTINGS_MODULE = "mysite.settings"` beside `mysite/wsgi.py`) work so."""
    parts = [] if path.stem == "__init__" else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file() and _is_name(folder.name):
        parts.insert(0, folder.name)
        folder = folder.parent
    if not parts:  # an __init__.py in a folder no import can name: import the file itself
        parts, folder = [path.stem], path.parent
    return ".".join(parts), folder


def parse_app(text: str, cwd: Path | None = None) -> AppRef:
    """`apps.hello:app`, `apps.hello`, `apps/hello.py:app` or `/abs/x.py` -> AppRef. A path
    inside packages names the same module as the dotted form (`apps/hello.py` is `apps.hello`
    from the folder above `apps/`, which holds an `__init__.py`).

    The callable must be a plain attribute name: uWSGI cannot call a factory like
    `create_app()`, and both servers must load the same thing.
    """
    base = Path(cwd) if cwd is not None else Path.cwd()
    target, sep, name = text.strip().rpartition(":")
    if not sep:
        target, name = text.strip(), DEFAULT_CALLABLE
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ConfigError(f"app {text!r}: callable {name!r} must be a plain attribute name")
    if not target:
        raise ConfigError(f"app {text!r}: expected module:callable or path/to/file.py:callable")

    if target.endswith(".py") or os.sep in target or "/" in target:
        path = (base / target).resolve()
        if not path.is_file():
            raise ConfigError(f"app {text!r}: file {path} does not exist")
        if path.suffix != ".py":
            raise ConfigError(f"app {text!r}: {path.name} is not a .py file")
        if not _is_name(path.stem):
            raise ConfigError(f"app {text!r}: {path.name} is not importable as a module name")
        module, pythonpath = _module_of_file(path)
        top = module.partition(".")[0]
        if top in sys.stdlib_module_names:
            # The app's pythonpath goes first on sys.path, so this file would replace the
            # standard library module for the server itself (apps/iowait.py tells the story).
            what = path.name if module == top else f"its package {top!r}"
            raise ConfigError(
                f"app {text!r}: {what} shadows the standard library module {top!r}; rename it"
            )
        return AppRef(module=module, callable=name, pythonpath=str(pythonpath))

    if not _is_dotted_name(target):
        raise ConfigError(
            f"app {text!r}: {target!r} is not a module name; "
            "expected module:callable or path/to/file.py:callable"
        )
    return AppRef(module=target, callable=name, pythonpath=str(base.resolve()))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no error output"


def check_app_imports(app: AppRef, timeout_s: float = 30) -> AppRef:
    """Import the app once in a subprocess and return it with the interface it speaks;
    AppBrokenError if it fails or is not callable, ConfigError if it speaks no interface that
    a server here runs (an ASGI 2 double callable).

    Done once before a study so a broken app stops everything with one clear message instead
    of failing every trial.
    """
    argv = [sys.executable, "-c", _IMPORT_CHECK, app.pythonpath, app.module, app.callable]
    try:
        result = subprocess.run(
            argv, cwd=app.pythonpath, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        raise AppBrokenError(f"app {app} did not finish importing within {timeout_s:g} s") from None
    if result.returncode == 0:
        found = result.stdout.strip().splitlines()
        return replace(app, interface=Interface(found[-1] if found else "wsgi"))
    reason = _last_line(result.stderr)
    if result.returncode == 5:
        raise ConfigError(f"app {app}: {reason}")
    if result.returncode in (3, 4):
        raise AppBrokenError(f"app {app} is not usable: {reason}")
    raise AppBrokenError(f"app {app} failed to import: {reason}")
