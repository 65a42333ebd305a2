"""gunicorn and granian serve WSGI and ASGI apps: each interface has its own table, space,
defaults and launch, and the WSGI side is what it was before ASGI joined (pure: nothing starts
here; tests/servers/test_asgi_variants.py and the contract suite boot both for real)."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.cli import REPO
from tuner.apps import AppRef, Interface, parse_app
from tuner.appsettings import AppSettings
from tuner.errors import ConfigError
from tuner.search.space import default_space_path, load_space
from tuner.servers import adapter_serving, get_adapter
from tuner.servers import granian as granian_module
from tuner.servers import gunicorn as gunicorn_module
from tuner.servers.appenv import WithAppSettings
from tuner.servers.base import Bind, Protocol
from tuner.servers.gunicorn_asgi import TUNED_WORKER, WORKER_FILE

DUAL = ("gunicorn", "granian")
WSGI_TABLES = {"gunicorn": gunicorn_module.SETTINGS, "granian": granian_module.SETTINGS}
BIND = Bind.tcp("127.0.0.1", 8000)
# Settings that exist only for ASGI apps: none may leak into a WSGI table.
ASGI_ONLY = {"gunicorn": {"loop", "http", "limit_concurrency"}, "granian": {"loop", "task_impl"}}


def wsgi_app() -> AppRef:
    return parse_app("apps/hello.py", cwd=REPO)


def asgi_app() -> AppRef:
    return replace(parse_app("apps/async_wait.py", cwd=REPO), interface=Interface.ASGI)


@pytest.mark.parametrize("name", DUAL)
def test_both_interfaces_are_served(name: str) -> None:
    assert get_adapter(name).interfaces == {Interface.WSGI, Interface.ASGI}


@pytest.mark.parametrize("name", DUAL)
def test_the_wsgi_side_keeps_its_table_space_defaults_and_file(name: str) -> None:
    whole = get_adapter(name)
    wsgi = adapter_serving(name, Interface.WSGI)
    assert wsgi.table is WSGI_TABLES[name]
    assert not ASGI_ONLY[name] & set(wsgi.table.by_name)
    assert wsgi.space_file is None  # the server's own search_spaces/NAME.toml
    assert default_space_path(name).name == f"{name}.toml"
    space = load_space(default_space_path(name), wsgi.table, name)
    assert space.names() == load_space(default_space_path(name), whole.table, name).names()
    assert wsgi.resolve({}) == whole.resolve({}) == WSGI_TABLES[name].defaults()
    assert [b.values for b in wsgi.baselines(2)] == [b.values for b in whole.baselines(2)]
    assert wsgi.process_model == whole.process_model
    assert wsgi.binds == whole.binds
    values = wsgi.resolve({})
    text = wsgi.render_artifact(wsgi_app(), BIND, values).text
    assert text == whole.render_artifact(wsgi_app(), BIND, values).text
    assert "uvicorn" not in text and "asgi" not in text.lower()
    assert wsgi.requirements(values) == whole.requirements(values)
    assert not [r for r in wsgi.requirements(values) if "uvicorn" in r]


def test_a_wsgi_app_on_gunicorn_never_sees_the_uvicorn_worker(tmp_path: Path) -> None:
    wsgi = adapter_serving("gunicorn", Interface.WSGI)
    assert "uvicorn" not in " ".join(wsgi.table.by_name["worker_class"].choices)
    assert wsgi.resolve({})["worker_class"] == "sync"
    spec = wsgi.launch(wsgi_app(), BIND, wsgi.resolve({}), tmp_path)
    assert "--config" not in spec.argv and not spec.files
    assert not any("uvicorn" in arg for arg in spec.argv)


def test_gunicorn_for_asgi_has_its_own_table_space_and_baselines() -> None:
    asgi = adapter_serving("gunicorn", Interface.ASGI)
    assert asgi.name == "gunicorn" and asgi.interfaces == {Interface.ASGI}
    assert asgi.space_file == REPO / "search_spaces" / "gunicorn-asgi.toml"
    assert {"loop", "http"} <= set(load_space(asgi.space_file, asgi.table, "gunicorn").names())
    # What the uvicorn worker ignores is not offered.
    assert not {"threads", "worker_connections", "http_parser", "protocol"} & set(
        asgi.table.by_name
    )
    assert Protocol.UWSGI not in {protocol for _, protocol in asgi.binds}
    default, rule = asgi.baselines(2)
    assert default.values == asgi.table.defaults()
    assert (default.values["loop"], default.values["http"]) == ("auto", "auto")
    assert rule.values == {**default.values, "workers": 5}
    # Shared settings keep gunicorn's own defaults.
    wsgi_defaults = gunicorn_module.SETTINGS.defaults()
    for key in ("workers", "keepalive", "max_requests", "backlog", "timeout", "preload_app"):
        assert default.values[key] == wsgi_defaults[key], key


def _config(text: str) -> dict[str, object]:
    """A written gunicorn.conf.py run as gunicorn runs it: its module globals."""
    ast.parse(text)
    namespace: dict[str, object] = {}
    exec(compile(text, "gunicorn.conf.py", "exec"), namespace)  # noqa: S102 - our own output
    return namespace


def test_the_stock_worker_classes_are_named_and_others_defined_in_the_file() -> None:
    from uvicorn_worker import UvicornWorker

    asgi = adapter_serving("gunicorn", Interface.ASGI)
    stock = {
        ("auto", "auto"): "uvicorn_worker.UvicornWorker",
        ("asyncio", "h11"): "uvicorn_worker.UvicornH11Worker",
    }
    for (loop, http), dotted in stock.items():
        text = asgi.render_artifact(asgi_app(), BIND, {"loop": loop, "http": http}).text
        assert _config(text)["worker_class"] == dotted
    values = {"loop": "uvloop", "http": "h11", "limit_concurrency": 40, "workers": 3}
    config = _config(asgi.render_artifact(asgi_app(), BIND, values).text)
    worker = config["worker_class"]
    assert isinstance(worker, type) and issubclass(worker, UvicornWorker)
    assert worker.__name__ == TUNED_WORKER
    assert worker.CONFIG_KWARGS == {"loop": "uvloop", "http": "h11", "limit_concurrency": 40}
    assert (config["wsgi_app"], config["workers"]) == (asgi_app().spec, 3)


def test_a_gunicorn_asgi_trial_sets_its_worker_class_as_the_file_does(tmp_path: Path) -> None:
    asgi = adapter_serving("gunicorn", Interface.ASGI)
    values = asgi.resolve({"loop": "asyncio", "http": "httptools"})
    spec = asgi.launch(asgi_app(), BIND, values, tmp_path)
    worker_file = str(tmp_path.resolve() / WORKER_FILE)
    assert spec.argv[spec.argv.index("--config") + 1] == worker_file
    config = _config(spec.files[worker_file])
    assert config["worker_class"].CONFIG_KWARGS == {"loop": "asyncio", "http": "httptools"}
    assert "--worker-class" not in spec.argv and spec.argv[-1] == asgi_app().spec


def test_gunicorn_asgi_requirements_name_what_the_config_runs() -> None:
    from importlib.metadata import version

    asgi = adapter_serving("gunicorn", Interface.ASGI)
    plain = asgi.requirements(asgi.resolve({"loop": "asyncio", "http": "h11"}))
    assert plain == tuple(
        f"{dist}=={version(dist)}" for dist in ("gunicorn", "uvicorn-worker", "uvicorn")
    )
    fast = asgi.requirements(asgi.resolve({"loop": "uvloop", "http": "httptools"}))
    assert fast == (*plain, f"uvloop=={version('uvloop')}", f"httptools=={version('httptools')}")


def test_granian_for_asgi_has_its_own_table_space_and_interface(tmp_path: Path) -> None:
    asgi = adapter_serving("granian", Interface.ASGI)
    assert asgi.space_file == REPO / "search_spaces" / "granian-asgi.toml"
    names = load_space(asgi.space_file, asgi.table, "granian").names()
    assert {"workers", "runtime_threads", "backpressure", "loop"} <= set(names)
    assert "blocking_threads" not in asgi.table.by_name  # granian allows 1 for ASGI
    assert asgi.threads(asgi.resolve({"workers": 2})) == 1
    spec = asgi.launch(asgi_app(), BIND, asgi.resolve({"loop": "asyncio"}), tmp_path)
    argv = list(spec.argv)
    assert argv[argv.index("--interface") + 1] == "asgi"
    assert argv[argv.index("--loop") + 1] == "asyncio"
    text = asgi.render_artifact(asgi_app(), BIND, asgi.resolve({"loop": "asyncio"})).text
    assert "GRANIAN_INTERFACE=asgi\n" in text and "GRANIAN_LOOP=asyncio\n" in text
    wsgi = adapter_serving("granian", Interface.WSGI)
    argv = list(wsgi.launch(wsgi_app(), BIND, wsgi.resolve({}), tmp_path).argv)
    assert argv[argv.index("--interface") + 1] == "wsgi"
    assert "GRANIAN_INTERFACE=wsgi\n" in wsgi.render_artifact(wsgi_app(), BIND, {}).text


def test_granian_asgi_requirements_bring_the_loop_it_ran() -> None:
    from importlib.metadata import version

    asgi = adapter_serving("granian", Interface.ASGI)
    granian = f"granian=={version('granian')}"
    assert asgi.requirements(asgi.resolve({"loop": "asyncio"})) == (granian,)
    assert asgi.requirements(asgi.resolve({"loop": "uvloop"})) == (
        f"granian[uvloop]=={version('granian')}",
        f"uvloop=={version('uvloop')}",
    )


@pytest.mark.parametrize(
    ("name", "values", "said"),
    [
        ("granian", {"loop": "rloop"}, "loop=rloop: rloop is not installed here"),
        ("gunicorn", {"http": "httptools"}, "http=httptools: httptools is not installed"),
    ],
)
def test_a_loop_or_parser_not_installed_is_refused_in_one_line(
    name: str, values: dict[str, str], said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asgi = adapter_serving(name, Interface.ASGI)
    module = __import__(type(asgi).__module__, fromlist=["installed"])
    missing = {"rloop", "httptools"}
    monkeypatch.setattr(module, "installed", lambda m: m not in missing)
    with pytest.raises(ConfigError) as caught:
        asgi.resolve(values)
    assert said in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("name", DUAL)
def test_each_variant_is_set_up_once_and_wraps(name: str) -> None:
    for interface in Interface:
        served = adapter_serving(name, interface)
        assert served.serving(interface) is served
        other = next(iter(set(Interface) - {interface}))
        with pytest.raises(ConfigError, match=f"{name} cannot serve"):
            served.serving(other)
        # The app's own settings wrap the adapter once it is set up (adapter_for_app).
        wrapped = WithAppSettings(served, AppSettings("test"))
        assert wrapped.interfaces == {interface} and wrapped.serving(interface) is wrapped


def test_reports_read_a_study_with_the_table_of_its_apps_interface() -> None:
    from tuner.report.data import worker_axes

    settings = {"workers": 3, "loop": "uvloop", "http": "h11"}
    assert worker_axes("gunicorn", settings, Interface.ASGI) == (3, "uvicorn")
    # A WSGI study (or one stored before interfaces were) reads gunicorn's WSGI table.
    assert worker_axes("gunicorn", {"workers": 2, "worker_class": "gthread"}) == (2, "gthread")
    assert worker_axes("granian", {"workers": 2}, Interface.ASGI) == (2, "mt runtime")
