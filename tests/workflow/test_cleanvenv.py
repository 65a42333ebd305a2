"""A written file names what it needs, and is booted in a clean venv with only that first.

The venvs are real (`python -m venv` + pip), cached per requirement set for the test session
(tests/conftest.py points TUNER_VENV_CACHE at one folder), so each set costs one install.
"""

from __future__ import annotations

import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.conftest import SERVER_CPU
from tests.support.cli import REPO, run_tuner
from tuner.apps import AppRef, parse_app
from tuner.errors import TunerError
from tuner.servers.base import ServerAdapter
from tuner.servers.gunicorn import GunicornAdapter
from tuner.workflow.apprequirements import app_folder, declared_requirements
from tuner.workflow.cleanvenv import clean_venv, requirements_key
from tuner.workflow.proven_file import BootCheck, Requirements, ServerConfig, write_artifact
from tuner.workflow.provenance import install_command

# Runs the tuner or a server in a subprocess: not in the fast set.
pytestmark = pytest.mark.usefixtures("real_servers")

GUNICORN = version("gunicorn")


@pytest.fixture
def hello() -> AppRef:
    return parse_app("apps/hello.py", cwd=REPO)


def _write(adapter: ServerAdapter, app: AppRef, values: dict, out: Path) -> Path:
    return write_artifact(
        ServerConfig(adapter, app, adapter.resolve(values)),
        ["written by test_cleanvenv"],
        out,
        boot=BootCheck(server_cpus=(SERVER_CPU,)),
        requirements=Requirements(check_clean_venv=True),
    )


def test_a_gevent_config_names_gunicorn_gevent_and_boots_with_only_that(
    gunicorn: ServerAdapter, hello: AppRef, tmp_path: Path
) -> None:
    values = {"worker_class": "gevent", "http_parser": "python"}
    out = _write(gunicorn, hello, values, tmp_path / "gunicorn.conf.py")
    text = out.read_text()
    assert f"# needs: pip install 'gunicorn[gevent]=={GUNICORN}'\n" in text
    assert "booted in a clean virtual environment" in text
    # The environment it booted in holds the extra's packages and nothing of ours.
    venv = clean_venv(gunicorn.requirements(gunicorn.resolve(values)))
    assert "include-system-site-packages = false" in (venv.path / "pyvenv.cfg").read_text()
    python = str(venv.bin_dir / "python")
    env = venv.environ()
    ours = subprocess.run([python, "-c", "import flask"], env=env, capture_output=True)
    assert ours.returncode != 0  # installed beside the tuner, absent here
    extra = subprocess.run([python, "-c", "import packaging, gevent"], env=env)
    assert extra.returncode == 0  # brought by gunicorn's gevent extra


def test_a_file_whose_requirement_line_is_wrong_is_refused(
    gunicorn: ServerAdapter, hello: AppRef, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Broken on purpose, as a new user would install it: gunicorn and gevent, no extra (the
    # gevent worker imports `packaging`, which only gunicorn's gevent extra declares).
    monkeypatch.setattr(GunicornAdapter, "extras", lambda self, values: ())
    monkeypatch.setattr(GunicornAdapter, "extra_distributions", lambda self, values: ("gevent",))
    out = tmp_path / "gunicorn.conf.py"
    with pytest.raises(TunerError) as caught:
        _write(gunicorn, hello, {"worker_class": "gevent", "http_parser": "python"}, out)
    message = str(caught.value)
    assert "\n" not in message
    assert "needs more than its requirement line says" in message
    assert f"pip install gunicorn=={GUNICORN} gevent==" in message
    assert "No module named 'packaging'" in message
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary left over


def test_the_fast_parser_is_named_with_the_version_measured(gunicorn: ServerAdapter) -> None:
    lines = gunicorn.requirements(gunicorn.resolve({"http_parser": "fast"}))
    assert lines == (f"gunicorn=={GUNICORN}", f"gunicorn_h1c=={version('gunicorn_h1c')}")
    python_only = gunicorn.requirements(gunicorn.resolve({"http_parser": "python"}))
    assert python_only == (f"gunicorn=={GUNICORN}",)
    # `auto` (the default) measured the C parser here, since the tuner installs it.
    assert gunicorn.requirements(gunicorn.resolve({})) == lines


def test_a_fast_parser_config_boots_in_a_clean_venv(
    gunicorn: ServerAdapter, hello: AppRef, tmp_path: Path
) -> None:
    out = _write(gunicorn, hello, {"http_parser": "fast"}, tmp_path / "gunicorn.conf.py")
    assert "gunicorn_h1c==" in out.read_text()


def test_uwsgi_gevent_config_names_gevent_and_boots_with_only_that(
    uwsgi: ServerAdapter, hello: AppRef, tmp_path: Path
) -> None:
    values = {"gevent": 100, "master": True}
    assert uwsgi.requirements(uwsgi.resolve(values)) == (
        f"pyuwsgi=={version('pyuwsgi')}",
        f"gevent=={version('gevent')}",
    )
    out = _write(uwsgi, hello, values, tmp_path / "uwsgi.ini")
    text = out.read_text()
    assert f"gevent=={version('gevent')}" in text
    assert "gevent loop" in text  # what a uWSGI build must include


def test_the_apps_own_requirements_are_named_and_installed(
    gunicorn: ServerAdapter, tmp_path: Path
) -> None:
    json_api = parse_app("apps/json_api.py", cwd=REPO)
    found = declared_requirements(app_folder(json_api), None)  # apps/requirements.txt
    assert found is not None
    wanted = found.lines
    assert wanted == (
        "flask",
        "starlette",
        "sqlalchemy>=2",
        "psycopg[binary]>=3.1",
        "psycopg-pool>=3.1",
    )
    out = write_artifact(
        ServerConfig(gunicorn, json_api, gunicorn.resolve({"http_parser": "python"})),
        [],
        tmp_path / "gunicorn.conf.py",
        boot=BootCheck(server_cpus=(SERVER_CPU,)),
        requirements=Requirements(app_lines=wanted, check_clean_venv=True),
    )
    needs = f"# needs: pip install gunicorn=={GUNICORN} flask starlette 'sqlalchemy>=2' "
    needs += "'psycopg[binary]>=3.1' 'psycopg-pool>=3.1'"
    assert needs + "\n" in out.read_text(), out.read_text()[:1500]


def test_an_app_needing_more_than_its_requirements_is_refused(
    gunicorn: ServerAdapter, tmp_path: Path
) -> None:
    json_api = parse_app("apps/json_api.py", cwd=REPO)
    with pytest.raises(TunerError, match="No module named 'flask'"):
        write_artifact(
            ServerConfig(gunicorn, json_api, gunicorn.resolve({"http_parser": "python"})),
            [],
            tmp_path / "gunicorn.conf.py",
            boot=BootCheck(server_cpus=(SERVER_CPU,)),
            requirements=Requirements(check_clean_venv=True),
        )


def test_the_cache_key_ignores_order_and_duplicates() -> None:
    assert requirements_key(["b", "a"]) == requirements_key(["a", "b", "a"])
    assert requirements_key(["a"]) != requirements_key(["a", "b"])
    assert install_command(["x[y]==1", "z"]) == "pip install 'x[y]==1' z"


def test_bad_app_requirements_file_is_one_line(tmp_path: Path) -> None:
    done = run_tuner(
        "tune",
        "apps/hello.py",
        "--server",
        "gunicorn",
        "--app-requirements",
        str(tmp_path / "missing.txt"),
        "--storage",
        f"sqlite:///{tmp_path}/s.db",
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "missing.txt" in done.stderr and "No such file" in done.stderr


def test_a_cached_venv_missing_a_program_is_built_again(gunicorn: ServerAdapter) -> None:
    # As found on a fresh clone's quickstart: a cached environment with its marker but its
    # `bin` folder emptied by hand; it must be rebuilt, not handed on to fail at boot.
    requirements = gunicorn.requirements(gunicorn.resolve({"http_parser": "python"}))
    venv = clean_venv(requirements)
    program = venv.bin_dir / "gunicorn"
    assert program.exists()
    program.unlink()
    (venv.bin_dir / "python").unlink()
    again = clean_venv(requirements)
    assert again.path == venv.path
    assert program.exists() and (venv.bin_dir / "python").exists()
    done = subprocess.run([program, "--version"], env=again.environ(), capture_output=True)
    assert done.returncode == 0, done.stderr
