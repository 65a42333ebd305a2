"""App references: parsing both forms, and the one-off import check before a study."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tuner.apps import AppRef, check_app_imports, parse_app
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
        ("app = 42\n", "app", "not a WSGI callable"),
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
