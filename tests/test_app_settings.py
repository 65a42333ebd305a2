"""An app's own settings (tuner/appsettings.py) and the adapter that adds them to a server's
(tuner/servers/appenv.py): declared as data, checked with one clear line, searched with the
server's settings, given to the trial's server process and written into its file. Pure logic:
nothing here starts a server (tests/commands/test_db_app.py does, with PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.apps import parse_app
from tuner.appsettings import AppSettings, load_app_settings, settings_path
from tuner.commands.setup import with_app_params
from tuner.errors import ConfigError
from tuner.search.space import default_space_path, load_space, suggest
from tuner.servers import get_adapter
from tuner.servers.appenv import WithAppSettings, adapter_for_app, with_app_settings
from tuner.servers.base import Bind

REPO = Path(__file__).resolve().parents[1]
DB_SETTINGS = REPO / "apps" / "db.tuner.toml"


class FixedTrial:
    """Draws the low end of every range and the first choice (an Optuna-free TrialLike)."""

    def suggest_int(self, name: str, low: int, high: int, *, log: bool = False, step: int = 1):
        return high if name == "DB_POOL_SIZE" else low

    def suggest_float(self, name: str, low: float, high: float, *, log: bool = False):
        return low

    def suggest_categorical(self, name: str, choices):
        return list(choices)[0]


def db_adapter(server: str = "gunicorn") -> WithAppSettings:
    adapter = adapter_for_app(server, parse_app("apps/db.py", cwd=REPO), None)
    assert isinstance(adapter, WithAppSettings)
    return adapter


def test_the_db_app_declares_its_pool() -> None:
    declared = load_app_settings(DB_SETTINGS)
    assert declared.names() == ("DB_POOL_SIZE", "DB_MAX_OVERFLOW", "DB_POOL_TIMEOUT")
    assert set(declared.search or {}) == {"DB_POOL_SIZE", "DB_MAX_OVERFLOW"}
    assert declared.per_process == ("DB_POOL_SIZE", "DB_MAX_OVERFLOW")
    defaults = {s.name: s.default for s in declared.settings}
    assert defaults == {"DB_POOL_SIZE": 5, "DB_MAX_OVERFLOW": 10, "DB_POOL_TIMEOUT": 30.0}
    assert declared.environment(defaults) == {
        "DB_POOL_SIZE": "5",
        "DB_MAX_OVERFLOW": "10",
        "DB_POOL_TIMEOUT": "30",
    }


def test_the_file_is_found_beside_the_app_in_either_form() -> None:
    for text in ("apps/db.py", "apps.db:app"):
        assert settings_path(parse_app(text, cwd=REPO), None) == DB_SETTINGS
    assert settings_path(parse_app("apps/hello.py", cwd=REPO), None) is None
    given = Path("elsewhere.toml")
    assert settings_path(parse_app("apps/hello.py", cwd=REPO), given) == given
    # An app without settings gets the server's adapter itself.
    assert not isinstance(adapter_for_app("gunicorn", parse_app("apps/hello.py", cwd=REPO), None),
                          WithAppSettings)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[settings.pool]\ntype = "int"\ndefault = 1\ndoc = "x"', "settings.pool: the name is"),
        ('[settings.POOL]\ntype = "long"\ndefault = 1\ndoc = "x"', "type = 'long'; valid types"),
        ('[settings.POOL]\ntype = "int"\ndoc = "x"', "default: what the app does"),
        ('[settings.POOL]\ntype = "int"\ndefault = 0\nminimum = 1\ndoc = "x"', "default: POOL=0"),
        ('[settings.POOL]\ntype = "int"\ndefault = 1\ndoc = "x"\nlow = 2', "unknown key 'low'"),
        ('[settings.POOL]\ntype = "int"\ndefault = 1\ndoc = "x"\nsearch = 3', "search = {"),
        (
            '[settings.POOL]\ntype = "int"\ndefault = 1\ndoc = "x"\n'
            "[connections]\nper_process = ['SIZE']",
            "'SIZE' is not a declared setting",
        ),
        ("[server]\nname = 1", "unknown key 'server'"),
        ("", "no [settings.NAME] tables"),
    ],
)
def test_a_bad_file_is_one_line_naming_it(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "app.tuner.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_app_settings(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and expected in message and "\n" not in message


def test_one_config_holds_both_and_each_part_goes_where_it_belongs(tmp_path: Path) -> None:
    adapter = db_adapter()
    resolved = adapter.resolve(
        {"workers": 3, "worker_class": "gthread", "threads": 8, "DB_POOL_SIZE": "12"}
    )
    assert resolved["DB_POOL_SIZE"] == 12 and resolved["DB_MAX_OVERFLOW"] == 10
    assert adapter.processes(resolved) == 3 and adapter.threads(resolved) == 8
    with pytest.raises(ConfigError, match="DB_POOL_SIZE='0'"):
        adapter.resolve({"DB_POOL_SIZE": "0"})
    with pytest.raises(ConfigError, match="unknown gunicorn setting 'DB_POOLSIZE'"):
        adapter.resolve({"DB_POOLSIZE": 3})

    app = parse_app("apps/db.py", cwd=REPO)
    spec = adapter.launch(app, Bind.tcp("127.0.0.1", 8000), resolved, tmp_path)
    assert spec.env["DB_POOL_SIZE"] == "12" and spec.env["DB_MAX_OVERFLOW"] == "10"
    assert not any("DB_" in arg for arg in spec.argv)  # the environment carries them
    refused = next(s for s in spec.load_signs if s.text == "too many clients already")
    assert refused.meaning.startswith(
        "the database refused connections: 3 processes x 22 connections "
        "(DB_POOL_SIZE 12 + DB_MAX_OVERFLOW 10) = 66 may be open at once"
    )

    text = adapter.render_artifact(app, Bind.tcp("127.0.0.1", 8000), resolved).text
    assert "raw_env = ['DB_POOL_SIZE=12', 'DB_MAX_OVERFLOW=10', 'DB_POOL_TIMEOUT=30']" in text
    # Booting the file must prove it sets them: its launch adds none.
    booted = adapter.artifact_launch(
        tmp_path / "gunicorn.conf.py", app, Bind.tcp("127.0.0.1", 8000), resolved
    )
    assert "DB_POOL_SIZE" not in booted.env


def test_baselines_run_the_app_at_its_defaults() -> None:
    adapter = db_adapter()
    for baseline in adapter.baselines(2):
        assert baseline.values["DB_POOL_SIZE"] == 5
        assert baseline.values == adapter.resolve(baseline.values)


def test_the_search_space_gains_the_apps_params() -> None:
    adapter = db_adapter()
    space = with_app_params(
        adapter, load_space(default_space_path("gunicorn"), adapter.table, "gunicorn")
    )
    assert space.names()[-2:] == ("DB_POOL_SIZE", "DB_MAX_OVERFLOW")
    drawn = suggest(space, FixedTrial(), cpus=2)
    assert drawn["DB_POOL_SIZE"] == 32 and drawn["DB_MAX_OVERFLOW"] == 0
    assert adapter.resolve(drawn)["DB_POOL_TIMEOUT"] == 30.0  # declared, not searched


def test_a_search_outside_the_settings_bounds_names_it(tmp_path: Path) -> None:
    path = tmp_path / "app.tuner.toml"
    path.write_text(
        '[settings.POOL]\ntype = "int"\ndefault = 2\nminimum = 1\ndoc = "pool"\n'
        "search = { low = 0, high = 4 }\n"
    )
    adapter = with_app_settings(get_adapter("gunicorn"), load_app_settings(path))
    server_space = load_space(default_space_path("gunicorn"), adapter.table, "gunicorn")
    with pytest.raises(ConfigError, match=r"app.tuner.toml: settings.POOL.search: low = 0"):
        with_app_params(adapter, server_space)


def test_no_settings_no_wrapper() -> None:
    adapter = get_adapter("uwsgi")
    assert with_app_settings(adapter, AppSettings(source="")) is adapter


def test_behind_a_front_the_app_and_the_bound_server_settings_go_together(
    tmp_path: Path,
) -> None:
    # gunicorn behind uwsgi_pass records protocol uwsgi (what it runs): launching that record
    # with the app's settings resolves the server's part at the same bind.
    from tuner.front import behind

    adapter = behind(db_adapter(), "nginx")
    record = adapter.resolve({"front_protocol": "uwsgi", "workers": 2, "DB_POOL_SIZE": 7})
    assert (record["protocol"], record["keepalive"], record["DB_POOL_SIZE"]) == ("uwsgi", 0, 7)
    assert adapter.resolve(record) == record
    app = parse_app("apps/db.py", cwd=REPO)
    spec = adapter.launch(app, Bind.tcp("127.0.0.1", 8001), record, tmp_path)
    assert spec.env["DB_POOL_SIZE"] == "7"
    assert spec.argv[spec.argv.index("--protocol") + 1] == "uwsgi"
