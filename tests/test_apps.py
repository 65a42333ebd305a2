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
        # apps/ is a package: its files are imported by their dotted name, from above it.
        ("apps/hello.py:app", AppRef("apps.hello", "app", str(ROOT))),
        ("apps/hello.py", AppRef("apps.hello", "app", str(ROOT))),
        (f"{ROOT}/apps/cpu.py:app", AppRef("apps.cpu", "app", str(ROOT))),
        (
            "tests/support/apps/env_app.py",
            AppRef("env_app", "app", str(ROOT / "tests/support/apps")),
        ),
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


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_file_inside_packages_is_imported_by_its_dotted_name(tmp_path: Path) -> None:
    # Django's layout: project/manage.py, project/mysite/{__init__,settings,wsgi}.py; the
    # project folder itself is no package.
    project = tmp_path / "project"
    write(project / "manage.py")
    write(project / "mysite" / "__init__.py")
    write(project / "mysite" / "wsgi.py", "application = None\n")
    expected = AppRef("mysite.wsgi", "application", str(project))
    assert parse_app("mysite/wsgi.py:application", cwd=project) == expected
    assert parse_app("mysite.wsgi:application", cwd=project) == expected
    assert parse_app("project/mysite/wsgi.py:application", cwd=tmp_path) == expected
    assert parse_app(f"{project}/mysite/wsgi.py:application", cwd=Path("/")) == expected
    # Packages in packages: the first folder above the last __init__.py.
    write(project / "mysite" / "api" / "__init__.py")
    write(project / "mysite" / "api" / "asgi.py")
    assert parse_app("mysite/api/asgi.py", cwd=project) == AppRef(
        "mysite.api.asgi", "app", str(project)
    )
    # A package's own __init__.py is the package.
    assert parse_app("mysite/__init__.py:application", cwd=project) == AppRef(
        "mysite", "application", str(project)
    )
    # A folder without __init__.py (a namespace package, or just a folder) ends the climb.
    write(project / "scripts" / "serve.py")
    assert parse_app("scripts/serve.py", cwd=project) == AppRef(
        "serve", "app", str(project / "scripts")
    )


def test_a_folder_whose_name_no_import_can_use_ends_the_climb(tmp_path: Path) -> None:
    write(tmp_path / "my-site" / "__init__.py")
    write(tmp_path / "my-site" / "inner" / "__init__.py")
    write(tmp_path / "my-site" / "inner" / "wsgi.py")
    assert parse_app("my-site/inner/wsgi.py", cwd=tmp_path) == AppRef(
        "inner.wsgi", "app", str(tmp_path / "my-site")
    )


def test_a_package_named_like_a_stdlib_module_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "email" / "__init__.py")
    write(tmp_path / "email" / "web.py")
    with pytest.raises(ConfigError, match="its package 'email' shadows the standard library"):
        parse_app("email/web.py", cwd=tmp_path)
    # Inside a package, a module may share a stdlib name: it is `site.io`, not `io`.
    write(tmp_path / "site_pkg" / "__init__.py")
    write(tmp_path / "site_pkg" / "io.py")
    assert parse_app("site_pkg/io.py", cwd=tmp_path).module == "site_pkg.io"


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


@pytest.mark.parametrize("text", ["apps/te_starlette.py", "apps/te_flask.py"])
def test_the_techempower_apps_without_their_database_stop_the_study_in_one_line(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    # The import check runs once before a study: an app with no database to read stops there.
    monkeypatch.delenv("TUNER_DB_DSN", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    app = parse_app(text, cwd=ROOT)
    with pytest.raises(AppBrokenError, match="set TUNER_DB_DSN") as caught:
        check_app_imports(app)
    assert "scripts/postgres start --techempower" in str(caught.value)
    monkeypatch.setenv("TUNER_DB_DSN", "postgresql://nobody@127.0.0.1:9/none")  # nothing there
    with pytest.raises(
        AppBrokenError, match="cannot reach PostgreSQL at 127.0.0.1:9/none"
    ) as caught:
        check_app_imports(app)
    assert "\n" not in str(caught.value)


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


# --- a Django project, pointed at from its own folder ----------------------------------------

DJANGO_PROJECT = ROOT / "apps" / "djangoproject"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mysite.wsgi:application", Interface.WSGI),
        ("mysite/wsgi.py:application", Interface.WSGI),
        ("mysite.asgi:application", Interface.ASGI),
        ("mysite/asgi.py:application", Interface.ASGI),
    ],
)
def test_the_django_projects_entry_points_import_from_its_folder(
    monkeypatch: pytest.MonkeyPatch, text: str, expected: Interface
) -> None:
    # Its settings read the database's URL; importing the app connects to nothing.
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:9/none")
    monkeypatch.delenv("DJANGO_SETTINGS_MODULE", raising=False)
    app = check_app_imports(parse_app(text, cwd=DJANGO_PROJECT))
    assert app.module == text.partition(":")[0].removesuffix(".py").replace("/", ".")
    assert app.pythonpath == str(DJANGO_PROJECT)
    assert app.interface is expected


def test_a_django_settings_module_that_cannot_be_imported_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("DJANGO_SETTINGS_MODULE", raising=False)
    # The app names it (os.environ.setdefault, as startproject writes it), and it is not there.
    write(tmp_path / "shop" / "__init__.py")
    write(
        tmp_path / "shop" / "wsgi.py",
        "import os\nfrom django.core.wsgi import get_wsgi_application\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'shop.settings')\n"
        "application = get_wsgi_application()\n",
    )
    app = parse_app("shop/wsgi.py:application", cwd=tmp_path)
    with pytest.raises(ConfigError) as caught:
        check_app_imports(app)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("app shop.wsgi:application: Django's settings module 'shop.settings'")
    assert "DJANGO_SETTINGS_MODULE='shop.settings', as the app sets it" in message
    assert "No module named 'shop.settings'" in message
    # A variable left in the shell wins over the app's setdefault: the line says it came from
    # the environment.
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "shop.production")
    with pytest.raises(ConfigError, match=r"'shop.production', from the environment\)"):
        check_app_imports(app)


def test_a_missing_import_inside_django_settings_is_not_called_missing_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "shop.settings")
    write(tmp_path / "shop" / "__init__.py")
    write(tmp_path / "shop" / "settings.py", "import no_such_settings_helper\n")
    write(
        tmp_path / "shop" / "wsgi.py",
        "from django.core.wsgi import get_wsgi_application\napplication = get_wsgi_application()\n",
    )
    with pytest.raises(AppBrokenError, match="No module named 'no_such_settings_helper'"):
        check_app_imports(parse_app("shop/wsgi.py:application", cwd=tmp_path))
