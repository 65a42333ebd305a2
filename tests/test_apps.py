"""App references: parsing both forms, and the one-off import check before a study."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tuner.apps import AppRef, Interface, check_app_imports, parse_app
from tuner.errors import AppBrokenError, ConfigError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("apps.hello:app", AppRef("apps.hello", "app", str(ROOT))),
        ("apps.hello", AppRef("apps.hello", "app", str(ROOT))),
        ("apps.fib:app", AppRef("apps.fib", "app", str(ROOT))),
        ("apps/hello.py:app", AppRef("hello", "app", str(ROOT / "apps"))),
        ("apps/hello.py", AppRef("hello", "app", str(ROOT / "apps"))),
        (f"{ROOT}/apps/cpu.py:app", AppRef("cpu", "app", str(ROOT / "apps"))),
    ],
)
def test_both_forms_parse(text: str, expected: AppRef) -> None:
    assert parse_app(text, cwd=ROOT) == expected
    assert expected.spec == f"{expected.module}:{expected.callable}"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("apps/nope.py:app", "does not exist"),
        ("apps/hello.txt:app", "does not exist"),
        ("apps.hello:create_app()", "plain attribute name"),
        ("apps.hello:", "plain attribute name"),
        (":app", "expected module:callable"),
        ("apps..hello:app", "not a module name"),
        ("apps.class:app", "not a module name"),
        ("my-app:app", "not a module name"),
    ],
)
def test_bad_references_are_config_errors_naming_the_value(text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as caught:
        parse_app(text, cwd=ROOT)
    assert repr(text) in str(caught.value)


def test_a_file_named_like_a_stdlib_module_is_refused(tmp_path: Path) -> None:
    (tmp_path / "io.py").write_text("app = None\n")
    (tmp_path / "my-app.py").write_text("app = None\n")
    with pytest.raises(ConfigError, match="shadows the standard library"):
        parse_app("io.py", cwd=tmp_path)
    with pytest.raises(ConfigError, match="not importable"):
        parse_app("my-app.py", cwd=tmp_path)


@pytest.mark.parametrize(
    "text", ["apps.hello:app", "apps.fib:app", "apps/json_api.py:app", "apps.counter"]
)
def test_sample_apps_import(text: str) -> None:
    check_app_imports(parse_app(text, cwd=ROOT))


@pytest.mark.parametrize(
    ("source", "callable_name", "words"),
    [
        ("import no_such_module_anywhere\n", "app", "failed to import: ModuleNotFoundError"),
        ("def broken(:\n", "app", "failed to import: SyntaxError"),
        ("raise RuntimeError('needs DATABASE_URL')\n", "app", "RuntimeError: needs DATABASE_URL"),
        ("application = None\n", "app", "has no attribute 'app'"),
        ("app = 42\n", "app", "not a WSGI or ASGI callable"),
    ],
)
def test_broken_apps_are_app_broken(
    tmp_path: Path, source: str, callable_name: str, words: str
) -> None:
    (tmp_path / "candidate.py").write_text(source)
    app = parse_app(f"candidate.py:{callable_name}", cwd=tmp_path)
    with pytest.raises(AppBrokenError, match=words) as caught:
        check_app_imports(app)
    assert "candidate:app" in str(caught.value)


def test_slow_import_times_out(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(10)\napp = None\n")
    with pytest.raises(AppBrokenError, match="within 0.5 s"):
        check_app_imports(parse_app("slow.py", cwd=tmp_path), timeout_s=0.5)


# --- which interface an app speaks ----------------------------------------------------------

ASGI_FUNCTION = "async def app(scope, receive, send):\n    pass\n"
ASGI_INSTANCE = (
    "class App:\n    async def __call__(self, scope, receive, send):\n        pass\napp = App()\n"
)
WSGI_INSTANCE = (
    "class App:\n    def __call__(self, environ, start_response):\n        return []\napp = App()\n"
)
# Django serves both: the object its wsgi.py and asgi.py name decides.
DJANGO = (
    "from django.conf import settings\n"
    "settings.configure(ROOT_URLCONF=__name__, ALLOWED_HOSTS=['*'])\n"
    "urlpatterns = []\n"
    "from django.core.handlers.{kind} import {handler}\n"
    "app = {handler}()\n"
)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def app(environ, start_response):\n    return []\n", Interface.WSGI),
        (WSGI_INSTANCE, Interface.WSGI),
        (ASGI_FUNCTION, Interface.ASGI),
        (ASGI_INSTANCE, Interface.ASGI),
        ("async def app(*args):\n    pass\n", Interface.ASGI),
        (DJANGO.format(kind="wsgi", handler="WSGIHandler"), Interface.WSGI),
        (DJANGO.format(kind="asgi", handler="ASGIHandler"), Interface.ASGI),
        ("from starlette.applications import Starlette\napp = Starlette()\n", Interface.ASGI),
    ],
    ids=[
        "wsgi-def",
        "wsgi-instance",
        "asgi-def",
        "asgi-instance",
        "asgi-varargs",
        "django-wsgi",
        "django-asgi",
        "starlette",
    ],
)
def test_the_interface_is_found_by_inspecting_the_object(
    tmp_path: Path, source: str, expected: Interface
) -> None:
    (tmp_path / "candidate.py").write_text(source)
    found = check_app_imports(parse_app("candidate.py", cwd=tmp_path))
    assert found.interface is expected
    assert found.spec == "candidate:app"


@pytest.mark.parametrize(
    ("source", "words"),
    [
        (
            "class app:\n    def __init__(self, scope):\n        self.scope = scope\n"
            "    async def __call__(self, receive, send):\n        pass\n",
            "ASGI 2 double callable",
        ),
        (
            "def app(scope):\n    async def inner(receive, send):\n        pass\n"
            "    return inner\n",
            "ASGI 2 double callable",
        ),
        ("async def app(scope, receive):\n    pass\n", r"takes \(scope, receive, send\)"),
    ],
    ids=["asgi2-class", "asgi2-function", "coroutine-two-args"],
)
def test_an_app_no_server_here_speaks_is_refused_in_one_line(
    tmp_path: Path, source: str, words: str
) -> None:
    (tmp_path / "candidate.py").write_text(source)
    with pytest.raises(ConfigError, match=words) as caught:
        check_app_imports(parse_app("candidate.py", cwd=tmp_path))
    assert "\n" not in str(caught.value)
