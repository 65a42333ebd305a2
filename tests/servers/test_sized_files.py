"""Files sized at boot, as text (no server): the rule in the header, the counts computed by the
copied limit reader, the override, the uWSGI launcher beside its ini, and a server without
sizing refused in one line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tuner.apps import AppRef
from tuner.errors import ConfigError
from tuner.machine import bootlimits
from tuner.machine.sizing import SizePoint, SizingRule, fit_rule
from tuner.servers import get_adapter
from tuner.servers.base import Bind

APP = AppRef("hello", "app", "/srv/app")
BIND = Bind.tcp("127.0.0.1", 8000)


def rule(env: str) -> SizingRule:
    points = [SizePoint(0.5, 2, 4, rps=400.0), SizePoint(1.0, 3, 8, rps=800.0)]
    return fit_rule(points, [(2, 70.0), (3, 90.0)], env)


def run_file(text: str, monkeypatch: pytest.MonkeyPatch, **environ: str) -> dict[str, object]:
    """Execute a written Python file's top level as its server would (gunicorn execs its
    config file), with `environ` set."""
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    scope: dict[str, object] = {"__file__": "gunicorn.conf.py"}
    exec(compile(text, "gunicorn.conf.py", "exec"), scope)  # noqa: S102 - our own file
    return scope


def test_gunicorn_conf_computes_its_counts_and_states_its_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    adapter = get_adapter("gunicorn")
    sizing = rule("WEB_CONCURRENCY")
    (conf,) = adapter.render_sized(
        APP, BIND, {"worker_class": "gthread", "threads": 8}, sizing, header="study s"
    )
    assert (
        conf.filename == "gunicorn.conf.py"
        and conf.run_hint == "gunicorn --config gunicorn.conf.py"
    )
    header = [line for line in conf.text.splitlines() if line.startswith("#")]
    assert "# processes = 2 x CPUs + 1, threads per process = 8 x CPUs" in "\n".join(header)
    assert any("extrapolated" in line for line in header)
    assert bootlimits.boot_source() in conf.text
    scope = run_file(conf.text, monkeypatch)
    box = bootlimits.read_box()
    assert (scope["workers"], scope["threads"]) == sizing.counts(box["cpus"], box["memory"])
    assert scope["worker_class"] == "gthread" and scope["bind"] == ["127.0.0.1:8000"]
    assert run_file(conf.text, monkeypatch, WEB_CONCURRENCY="7")["workers"] == 7
    # The hook logs the line in gunicorn's own log.
    logged: list[str] = []
    fake = type("Server", (), {"log": type("Log", (), {"info": staticmethod(logged.append)})})
    scope["on_starting"](fake)  # type: ignore[operator]
    assert logged and logged[0].startswith("sizing: found ")


def test_gunicorn_sync_workers_keep_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    sizing = fit_rule([SizePoint(0.5, 2, 1), SizePoint(1.0, 4, 1)], [(2, 60.0)], "WEB_CONCURRENCY")
    (conf,) = get_adapter("gunicorn").render_sized(APP, BIND, {}, sizing)
    tree = ast.parse(conf.text)
    assigned = [
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    ]
    assert assigned.count("workers") == 1 and assigned.count("threads") == 1
    assert run_file(conf.text, monkeypatch)["threads"] == 1


def test_uwsgi_gets_a_launcher_beside_its_ini(tmp_path: Path) -> None:
    adapter = get_adapter("uwsgi")
    launcher, ini = adapter.render_sized(
        APP, BIND, {"threads": 4}, rule("UWSGI_PROCESSES"), filename="app.ini"
    )
    assert ini.filename == "app.ini" and ini.text.splitlines()[0].startswith("#")
    assert "[uwsgi]" in ini.text and "processes = 1" in ini.text
    assert launcher.filename == "uwsgi_sized.py" and launcher.run_hint == "python uwsgi_sized.py"
    assert launcher.mode == 0o755
    ast.parse(launcher.text)
    assert (
        "'app.ini'" in launcher.text and '"--processes", str(SIZED["processes"])' in launcher.text
    )
    assert '"--threads", str(SIZED["threads"])' in launcher.text
    assert "'env': 'UWSGI_PROCESSES'" in launcher.text
    gevent, _ = adapter.render_sized(
        APP, BIND, {"gevent": 100}, rule("UWSGI_PROCESSES"), filename="uwsgi.ini"
    )
    assert "--threads" not in gevent.text  # threads replace gevent's async cores


def test_a_server_without_sizing_is_refused_in_one_line() -> None:
    adapter = get_adapter("werkzeug")  # a development server: nothing sized
    assert adapter.sizing_env is None
    with pytest.raises(ConfigError, match="werkzeug writes no file sized at boot yet"):
        adapter.render_sized(APP, BIND, {}, rule("X"))


def test_the_boot_source_is_the_module_s_code() -> None:
    source = bootlimits.boot_source()
    module = Path(bootlimits.__file__).read_text()
    assert source.strip() in module and "def boot_source" not in source
    assert "tuner" not in source.replace("the tuner", "")


def test_a_python_launcher_sets_its_count_constants_before_the_server_starts() -> None:
    adapter = get_adapter("tornado")
    sizing = rule(str(adapter.sizing_env))
    (script,) = adapter.render_sized(APP, BIND, {}, sizing, filename="serve.py")
    assert script.filename == "serve.py" and script.run_hint == "python3 serve.py"
    text = script.text
    ast.parse(text)
    tuned = text.index("PROCESSES = 1")  # the tuned constant, as at one measured size
    sized = text.index('PROCESSES = SIZED["processes"]')
    logged = text.index('print(SIZED["line"], file=sys.stderr, flush=True)')
    server = text.index("\n".join(adapter.server_code(adapter.resolve({}))))
    assert tuned < sized < logged < server
    assert 'THREADS = SIZED["threads"]' in text[sized:server]
