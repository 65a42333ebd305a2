"""Where an app's requirements come from, on project layouts built in a temporary folder.

Pure: no server starts. `home=tmp_path` makes every walk up stop inside the test's folder, as
it stops below a user's home. The apps that get imported (in a subprocess, as the tuner does)
import only Flask, installed with the tuner, and modules the tests write.
"""

from __future__ import annotations

import os
from importlib.metadata import version
from pathlib import Path

import pytest

from tuner.apps import AppRef, parse_app
from tuner.errors import ConfigError
from tuner.workflow.apprequirements import (
    INFERRED,
    Imports,
    Installed,
    app_folder,
    classify,
    declared_requirements,
    find_app_requirements,
    imported_modules,
    missing_module_hint,
    poetry_constraint,
    project_root,
    read_app_requirements,
    top_level,
)

FLASK_APP = "import flask\napp = flask.Flask(__name__)\n"


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def found(folder: Path, home: Path, given: Path | None = None) -> tuple[tuple[str, ...], str]:
    requirements = declared_requirements(folder, given, home=home)
    assert requirements is not None
    return requirements.lines, requirements.source


def test_a_requirements_txt_in_a_parent_folder_up_to_the_root(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    write(project / ".git" / "HEAD")
    write(project / "requirements.txt", "flask>=3\nrequests\n")
    web = project / "services" / "web"
    write(web / "app.py", FLASK_APP)
    assert project_root(web, tmp_path) == project
    assert found(web, tmp_path) == (("flask>=3", "requests"), "requirements.txt")
    # The nearest one wins: one beside the app, then one between it and the root.
    write(project / "services" / "requirements.txt", "flask\n")
    assert found(web, tmp_path) == (("flask",), "services/requirements.txt")
    write(web / "requirements.txt", "flask==3.1.0\n")
    assert found(web, tmp_path) == (("flask==3.1.0",), "services/web/requirements.txt")


def test_the_walk_stops_at_the_projects_root(tmp_path: Path) -> None:
    write(tmp_path / "requirements.txt", "somebody-elses\n")  # above the project: not its own
    project = tmp_path / "work" / "api"
    write(project / "setup.cfg", "[metadata]\nname = api\n")
    write(project / "app.py", FLASK_APP)
    assert project_root(project, tmp_path) == project
    assert declared_requirements(project, None, home=tmp_path) is None


def test_the_walk_never_reaches_the_users_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home / ".git" / "HEAD")  # dotfiles under git: the home folder is no project
    write(home / "requirements.txt", "dotfiles-tool\n")
    scripts = home / "scripts"
    write(scripts / "app.py", FLASK_APP)
    assert project_root(scripts, home) is None
    assert declared_requirements(scripts, None, home=home) is None
    # Without a root, only the app's own folder counts.
    write(scripts / "requirements.txt", "flask\n")
    assert found(scripts, home) == (("flask",), "requirements.txt")


def test_pep_621_dependencies_at_the_root(tmp_path: Path) -> None:
    project = tmp_path / "uvproject"
    write(
        project / "pyproject.toml",
        '[project]\nname = "shop"\ndependencies = [\n  "flask>=3",\n'
        "  \"tomli>=2; python_version < '3.11'\",\n]\n[tool.poetry.dependencies]\nignored = '*'\n",
    )
    app = project / "src" / "shop" / "web"
    assert found(app, tmp_path) == (
        ("flask>=3", "tomli>=2; python_version < '3.11'"),
        "pyproject.toml [project] dependencies",
    )
    # A requirements.txt on the way up comes first (as a project's own deploy list).
    write(project / "src" / "requirements.txt", "flask==3.1.0\n")
    assert found(app, tmp_path) == (("flask==3.1.0",), "src/requirements.txt")


def test_poetry_dependencies_without_python(tmp_path: Path) -> None:
    project = tmp_path / "poetryproject"
    write(
        project / "pyproject.toml",
        """
[tool.poetry]
name = "shop"
[tool.poetry.dependencies]
python = "^3.10"
flask = "^3.0"
requests = { version = "~2.31", extras = ["socks"] }
gunicorn = "*"
pinned = "1.2.3"
only-for-an-extra = { version = "^1", optional = true }
library = { git = "https://example.org/library.git", tag = "v2" }
[tool.poetry.group.dev.dependencies]
pytest = "^8"
""",
    )
    lines, source = found(project / "web", tmp_path)
    assert source == "pyproject.toml [tool.poetry.dependencies]"
    assert lines == (
        "flask>=3.0,<4",
        "requests[socks]>=2.31,<2.32",
        "gunicorn",
        "pinned==1.2.3",
        "library @ git+https://example.org/library.git@v2",
    )


@pytest.mark.parametrize(
    ("poetry", "pep440"),
    [
        ("^1.2.3", ">=1.2.3,<2"),
        ("^0.2.3", ">=0.2.3,<0.3"),
        ("^0.0.3", ">=0.0.3,<0.0.4"),
        ("^0", ">=0,<1"),
        ("~1.2.3", ">=1.2.3,<1.3"),
        ("~1", ">=1,<2"),
        ("~=1.2", "~=1.2"),
        (">= 1.2, < 1.5", ">=1.2,<1.5"),
        ("1.2.*", "==1.2.*"),
        ("*", ""),
        ("^1.0 || ^2.0", ""),  # no PEP 440 form: any version, and the clean venv proves it
    ],
)
def test_poetry_constraints_in_pep_440_terms(poetry: str, pep440: str) -> None:
    assert poetry_constraint(poetry) == pep440


def test_a_pyproject_without_dependencies_declares_nothing(tmp_path: Path) -> None:
    write(tmp_path / "p" / "pyproject.toml", "[tool.ruff]\nline-length = 100\n")
    assert declared_requirements(tmp_path / "p" / "app", None, home=tmp_path) is None
    write(tmp_path / "q" / "pyproject.toml", '[project]\nname = "q"\ndependencies = []\n')
    assert found(tmp_path / "q", tmp_path) == ((), "pyproject.toml [project] dependencies")
    write(tmp_path / "r" / "pyproject.toml", "[project\n")
    with pytest.raises(ConfigError, match=r"pyproject.toml: cannot read the app's requirements"):
        declared_requirements(tmp_path / "r", None, home=tmp_path)


def test_the_given_file_comes_first(tmp_path: Path) -> None:
    write(tmp_path / "p" / "requirements.txt", "flask\n")
    given = write(tmp_path / "deploy.txt", "flask==3.1.0\ngunicorn\n")
    lines, source = found(tmp_path / "p", tmp_path, given)
    assert (lines, source) == (("flask==3.1.0", "gunicorn"), f"--app-requirements {given}")


def test_requirements_files_take_one_package_per_line_and_includes(tmp_path: Path) -> None:
    good = write(tmp_path / "good.txt", "# comment\n\nflask>=3  # web\n-r base.txt\n")
    write(tmp_path / "base.txt", "requests[socks]==2.32.3\nflask>=3\n")
    assert read_app_requirements(good) == ("flask>=3", "requests[socks]==2.32.3")
    bad = write(tmp_path / "bad.txt", "flask\n-e .\n")
    with pytest.raises(ConfigError, match=r"bad.txt:2: '-e \.': only one package"):
        read_app_requirements(bad)
    loop = write(tmp_path / "loop.txt", "-r loop.txt\n")
    with pytest.raises(ConfigError, match="includes itself"):
        read_app_requirements(loop)


def test_an_app_with_no_declared_requirements_gets_them_inferred(tmp_path: Path) -> None:
    app = parse_app(str(write(tmp_path / "loose" / "app.py", FLASK_APP)))
    requirements = find_app_requirements(
        app, None, server_requirements=["gunicorn==27"], home=tmp_path
    )
    # Flask's own dependencies (werkzeug, jinja2...) come with it: the line names Flask alone.
    assert requirements.lines == (f"flask=={version('flask')}",)
    assert requirements.source == INFERRED and requirements.inferred
    assert "inferred from imports" in requirements.describe()


def test_the_standard_librarys_private_modules_are_not_the_apps_imports(tmp_path: Path) -> None:
    # sysconfig loads `_sysconfigdata_*`, which sys.stdlib_module_names does not list (a
    # database driver does this at import): it comes with Python, no requirement can bring it.
    app = parse_app(str(write(tmp_path / "loose" / "app.py", STDLIB_APP)))
    modules = imported_modules(app)
    assert not [name for name in modules if name.startswith("_sysconfigdata")], modules
    requirements = find_app_requirements(
        app, None, server_requirements=["gunicorn==27"], home=tmp_path
    )
    assert requirements.lines == ()


STDLIB_APP = """import sysconfig

sysconfig.get_config_vars()


def app(environ, start_response):
    start_response("200 OK", [])
    return [b"ok"]
"""


def fake_installed() -> Installed:
    """Three distributions as importlib.metadata would describe them: web brings its
    template engine, and a server the tuner measures brings its parser."""
    return Installed(
        providers={"web": ["Web"], "templates": ["templates"], "srv": ["srv"], "p": ["parser"]},
        versions={"web": "3.0", "templates": "3.1", "srv": "23.0", "parser": "1.0"},
        requires={
            "web": frozenset({"templates"}),
            "templates": frozenset(),
            "srv": frozenset({"parser"}),
            "parser": frozenset(),
        },
    )


def test_inference_keeps_the_distributions_nothing_else_brings(tmp_path: Path) -> None:
    installed = fake_installed()
    modules = {
        "web": ["/site/web/__init__.py"],
        "templates": ["/site/templates/__init__.py"],
        "p": ["/site/p.py"],
        "srv": ["/site/srv/__init__.py"],
        "tuner": ["/src/tuner/__init__.py"],  # the tuner itself is never the app's
        "helpers": [str(tmp_path / "proj" / "helpers.py")],  # the project's own source
        "generated": [],  # made at run time: nothing to judge
    }
    imports = classify(
        modules, installed, own=[tmp_path / "proj"], skip={"srv", "tuner"}, named=set()
    )
    assert imports.distributions == ("parser", "templates", "web")
    assert imports.unprovided == ()
    # Web brings templates; the server brings the parser: neither is named on its own.
    assert top_level(imports.distributions, installed, also_installed={"srv"}) == ("web",)


def test_the_projects_own_package_is_its_source_even_installed(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    installed = Installed(
        providers={"shop": ["shop"], "web": ["Web"]},
        versions={"shop": "1.0", "web": "3.0"},
        requires={},
    )
    modules = {
        "shop": [str(project / "src" / "shop" / "__init__.py")],  # pip install -e .
        "web": [str(project / ".venv" / "lib" / "python3.11" / "site-packages" / "web.py")],
    }
    imports = classify(modules, installed, own=[project], skip=set(), named=set())
    assert imports == Imports(("web",), ())


def test_a_module_nothing_provides_is_found(tmp_path: Path) -> None:
    modules = {"vendored": ["/opt/vendor/vendored.py"], "web": ["/site/web/__init__.py"]}
    installed = fake_installed()
    imports = classify(modules, installed, own=[tmp_path], skip=set(), named=set())
    assert imports.unprovided == (("vendored", "/opt/vendor/vendored.py"),)
    named = classify(modules, installed, own=[tmp_path], skip=set(), named={"vendored"})
    assert named.unprovided == ()


def test_a_cycle_keeps_both() -> None:
    installed = Installed(
        providers={},
        versions={"a": "1", "b": "1"},
        requires={"a": frozenset({"b"}), "b": frozenset({"a"})},
    )
    assert top_level(["a", "b"], installed) == ("a", "b")


def vendored_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppRef:
    """An app in its project that imports a module from a folder on PYTHONPATH, outside the
    project, that no distribution provides: the tuner's servers see it, no clean venv does."""
    write(tmp_path / "vendor" / "secretlib.py", "VALUE = 1\n")
    project = tmp_path / "proj"
    write(project / "pyproject.toml", '[project]\nname = "proj"\ndependencies = ["flask"]\n')
    app = write(project / "web" / "app.py", "import secretlib\n" + FLASK_APP)
    paths = [str(tmp_path / "vendor"), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    return parse_app(str(app))


def test_an_import_no_clean_venv_can_have_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = vendored_app(tmp_path, monkeypatch)
    with pytest.raises(ConfigError) as caught:
        find_app_requirements(app, None, home=tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    assert "'secretlib'" in message and str(tmp_path / "vendor" / "secretlib.py") in message
    assert "pyproject.toml [project] dependencies" in message
    # Without the clean-venv check nothing is proven, so nothing is refused.
    unchecked = find_app_requirements(app, None, check_imports=False, home=tmp_path)
    assert unchecked.lines == ("flask",)


def test_a_module_in_the_project_or_named_by_a_requirement_is_fine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = vendored_app(tmp_path, monkeypatch)
    given = write(tmp_path / "deploy.txt", "flask\nsecretlib\n")  # a package of that name
    assert find_app_requirements(app, given, home=tmp_path).lines == ("flask", "secretlib")
    # Moved into the project (beside the project's root, not its app folder): its own source.
    (tmp_path / "vendor" / "secretlib.py").rename(tmp_path / "proj" / "secretlib.py")
    paths = [str(tmp_path / "proj"), *os.environ["PYTHONPATH"].split(os.pathsep)[1:]]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    assert find_app_requirements(app, None, home=tmp_path).lines == ("flask",)


def test_the_app_folder_of_a_module_and_of_a_package(tmp_path: Path) -> None:
    write(tmp_path / "shop" / "__init__.py", FLASK_APP)
    write(tmp_path / "shop" / "web" / "wsgi.py", FLASK_APP)
    assert app_folder(AppRef("shop.web.wsgi", "app", str(tmp_path))) == tmp_path / "shop" / "web"
    assert app_folder(AppRef("shop", "app", str(tmp_path))) == tmp_path / "shop"


def test_a_missing_module_names_the_distribution_to_add() -> None:
    installed = fake_installed()
    reason = (
        "gunicorn exited with code 3 while starting: ModuleNotFoundError: No module named 'web'"
    )
    assert missing_module_hint(reason, installed) == (
        "'web' is provided by the installed distribution Web"
    )
    assert missing_module_hint("No module named 'nowhere'", installed) == ""
    assert missing_module_hint("Address already in use", installed) == ""
