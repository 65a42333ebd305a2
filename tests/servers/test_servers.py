"""Server adapters against the real gunicorn and uWSGI: every app, mode and rendered config."""

from __future__ import annotations

import configparser
import os
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from apps import iowait
from tests.conftest import HOST, ROOT, require_adapter, running, unavailable, wait_for_pids
from tuner.apps import AppRef, parse_app
from tuner.errors import ConfigError, ServerStartError
from tuner.procs.process import ServerProcess, free_port
from tuner.servers import SERVERS, get_adapter
from tuner.servers.base import Bind, ServerAdapter
from tuner.settings import SettingKind

APPS = [
    ("apps.hello:app", "/"),
    ("apps.fib:app", "/9000"),
    ("apps.json_api:app", "/"),
    ("apps.cpu:app", "/"),
    ("apps.iowait:app", "/"),
    ("apps.counter:app", "/"),
]


def get(server: ServerProcess, path: str = "/") -> httpx.Response:
    return httpx.get(f"http://{server.host}:{server.port}{path}", timeout=5)


def gets_at_once(server: ServerProcess, count: int) -> float:
    """Seconds from sending `count` GETs at once, each on a connection opened beforehand, until
    every answer is read. Raw sockets: the client does next to no work in between (an HTTP
    client per request costs ms of CPU each, which on a slow machine outweighed the sleeps), so
    this is the server's own time for them."""
    conns = [socket.create_connection((server.host, server.port), timeout=10) for _ in range(count)]
    try:
        started = time.monotonic()
        for conn in conns:
            conn.sendall(b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        answers = []
        for conn in conns:
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
            answers.append(answer)
        took = time.monotonic() - started
    finally:
        for conn in conns:
            conn.close()
    assert all(a.split(b"\r\n", 1)[0].split()[1:2] == [b"200"] for a in answers), answers
    return took


# --- every app, both servers -----------------------------------------------------------------


@pytest.mark.parametrize(("app", "path"), APPS, ids=[a.split(":")[0] for a, _ in APPS])
def test_every_app_answers(
    adapter: ServerAdapter, app: str, path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COUNTER_FILE", str(tmp_path / "counter.log"))
    with running(adapter, app, ready_path=path, log_path=tmp_path / "server.log") as server:
        response = get(server, path)
    assert response.is_success, response.text
    assert response.content


@pytest.mark.parametrize("app", ["apps/hello.py:app", "apps/fib.py", str(ROOT / "apps/cpu.py")])
def test_app_given_by_path_answers(adapter: ServerAdapter, app: str, tmp_path: Path) -> None:
    with running(adapter, app, log_path=tmp_path / "server.log") as server:
        assert get(server).is_success


# --- modes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        {"worker_class": "sync", "workers": 2},
        {"worker_class": "gthread", "threads": 4},
        {"worker_class": "gevent", "worker_connections": 50},
    ],
    ids=["sync", "gthread", "gevent"],
)
def test_gunicorn_worker_classes_answer(
    gunicorn: ServerAdapter, values: dict, tmp_path: Path
) -> None:
    with running(gunicorn, "apps.iowait:app", values, log_path=tmp_path / "g.log") as server:
        assert get(server).is_success
        log = server.log_tail(50)
    assert f"Using worker: {values['worker_class']}" in log


@pytest.mark.parametrize("protocol", ["http", "http-socket", "http11-socket"])
def test_uwsgi_protocols_answer(uwsgi: ServerAdapter, protocol: str, tmp_path: Path) -> None:
    values = {"protocol": protocol, "http-keepalive": 1 if protocol == "http" else 0}
    # http-socket closes each connection after its answer (http-keepalive 0): a client that
    # kept it would send the next request into a socket the server may be closing (reset by
    # peer when its FIN comes late, as on a busy machine), so each request gets its own.
    kept = 0 if protocol == "http-socket" else None
    with (
        running(uwsgi, "apps.hello:app", values, log_path=tmp_path / "u.log") as server,
        httpx.Client(
            base_url=f"http://{HOST}:{server.port}",
            timeout=5,
            limits=httpx.Limits(max_keepalive_connections=kept),
        ) as client,
    ):
        assert all(client.get("/").is_success for _ in range(3))


@pytest.mark.parametrize(
    ("adapter_name", "values"),
    [
        ("gunicorn", {"worker_class": "gevent"}),
        ("uwsgi", {"gevent": 20, "protocol": "http-socket"}),
        ("uwsgi", {"gevent": 20, "protocol": "http"}),
    ],
    ids=["gunicorn-gevent", "uwsgi-gevent-http-socket", "uwsgi-gevent-http"],
)
def test_gevent_overlaps_sleeping_requests(
    adapter_name: str, values: dict, tmp_path: Path, real_servers: None
) -> None:
    """One worker, requests that each sleep 50 ms: monkey patching makes them overlap.

    Without overlap, 16 requests take at least 16 sleeps (0.8 s) however fast the machine;
    with it, one sleep plus the server's CPU time for 16 small requests (a few ms each, so the
    bound holds on a machine many times slower). The requests go out on connections opened
    beforehand, so the time is the server's alone: judged against serial requests made with an
    HTTP client, the client's own CPU time decided the outcome on a CPU-starved machine."""
    adapter = require_adapter(adapter_name)
    count = 16  # below uWSGI's 20 async cores: all of them can wait at once
    with running(adapter, "apps.iowait:app", values, log_path=tmp_path / "s.log") as server:
        gets_at_once(server, 2)  # the worker has loaded the app and answered
        overlapped = gets_at_once(server, count)
    assert overlapped >= iowait.WAIT_S  # the requests really slept
    assert overlapped < count * iowait.WAIT_S, (
        f"{count} x {iowait.WAIT_S * 1000:.0f} ms took {overlapped:.2f} s at once: "
        "the sleeps did not overlap"
    )


def test_uwsgi_threads_and_master_run(uwsgi: ServerAdapter, tmp_path: Path) -> None:
    values = {"processes": 2, "threads": 2, "master": True, "thunder-lock": True}
    with running(uwsgi, "apps.hello:app", values, log_path=tmp_path / "u.log") as server:
        assert get(server).is_success
        assert len(wait_for_pids(server, 3)) == 3  # master + 2 workers
        log = server.log_tail(100)
    assert "threads support enabled" in log


def test_two_gunicorns_at_once_open_no_control_socket(
    gunicorn: ServerAdapter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # gunicorn 25.1+ would create $HOME/.gunicorn/gunicorn.ctl; both servers would want it.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    with (
        running(gunicorn, log_path=tmp_path / "one.log") as one,
        running(gunicorn, log_path=tmp_path / "two.log") as two,
    ):
        assert get(one).is_success and get(two).is_success
    assert not (tmp_path / ".gunicorn").exists()


# --- CPU pinning -----------------------------------------------------------------------------


def _cpu_sets() -> list[tuple[int, ...]]:
    available = sorted(os.sched_getaffinity(0))
    sets = [(available[0],)]
    if len(available) > 1:
        sets += [(available[-1],), tuple(available)]
    return sets


@pytest.mark.parametrize("cpus", _cpu_sets(), ids=str)
def test_master_and_workers_run_on_the_requested_cpus(
    adapter: ServerAdapter, cpus: tuple[int, ...], tmp_path: Path
) -> None:
    # uWSGI without its master runs the first worker as the parent: ask for the master.
    values = {"workers": 2} if adapter.name == "gunicorn" else {"processes": 2, "master": True}
    with running(adapter, values=values, cpus=cpus, log_path=tmp_path / "s.log") as server:
        pids = wait_for_pids(server, 3)
        affinities = {pid: os.sched_getaffinity(pid) for pid in pids}
    assert len(pids) >= 3  # master + 2 workers
    assert all(mask == set(cpus) for mask in affinities.values()), affinities


# --- bad values ------------------------------------------------------------------------------


def test_uwsgi_rejects_a_listen_queue_above_somaxconn_fast(
    uwsgi: ServerAdapter, tmp_path: Path
) -> None:
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    if somaxconn >= 65535:
        unavailable("somaxconn is at its maximum; every listen value is accepted")
    started = time.monotonic()
    with (
        pytest.raises(ServerStartError) as caught,
        running(uwsgi, values={"listen": somaxconn + 1}, log_path=tmp_path / "u.log"),
    ):
        pass
    assert time.monotonic() - started < 5
    assert caught.value.returncode == 1
    assert "somaxconn" in str(caught.value)  # uWSGI's own words


def test_gunicorn_rejected_value_fails_fast_with_its_message(
    gunicorn: ServerAdapter, tmp_path: Path
) -> None:
    # Our table would refuse threads=-1; bypass it to see gunicorn's own validation.
    port = free_port()
    spec = gunicorn.launch(parse_app("apps.hello:app", cwd=ROOT), Bind.tcp(HOST, port), {}, ROOT)
    spec = replace(spec, argv=spec.argv[:-1] + ("--threads=-1", spec.argv[-1]))
    started = time.monotonic()
    with pytest.raises(ServerStartError) as caught:
        ServerProcess.start(spec, cpus=(), log_path=tmp_path / "g.log", host=HOST, port=port)
    assert time.monotonic() - started < 5
    assert caught.value.returncode == 1
    assert "Value must be positive: -1" in caught.value.log_tail


# --- the tables ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SERVERS)
def test_every_default_coerces_to_itself(name: str) -> None:
    for setting in get_adapter(name).table.settings:
        assert setting.coerce(setting.default) == setting.default, setting.name
        assert setting.coerce(str(setting.default)) == setting.default, setting.name
        assert setting.doc and "\n" not in setting.doc


@pytest.mark.parametrize("name", SERVERS)
def test_defaults_resolve_and_render(name: str) -> None:
    adapter = get_adapter(name)
    values = adapter.resolve({})
    assert values == adapter.table.defaults()
    assert adapter.processes(values) == 1
    assert adapter.baselines(4)[0].values == values
    if not adapter.process_model.forks_workers:
        return  # no 2*cpus+1 rule: the server's own advice, if any, is its own test's
    default, rule = adapter.baselines(4)
    assert adapter.processes(rule.values) == 9
    key = adapter.process_model.processes
    changed = {k for k, v in rule.values.items() if v != adapter.table.defaults()[k]}
    assert key in changed
    # Besides the count, at most the choice of a mode that forks (flup's default, threaded,
    # forks nothing; its prefork mode does).
    assert all(adapter.table.get(k).kind is SettingKind.CHOICE for k in changed - {key}), changed


@pytest.mark.parametrize("name", SERVERS)
def test_unknown_setting_names_the_valid_ones(name: str) -> None:
    adapter = get_adapter(name)
    with pytest.raises(ConfigError) as caught:
        adapter.resolve({"wrokers": 2})
    assert "'wrokers'" in str(caught.value)
    assert all(s.name in str(caught.value) for s in adapter.table.settings)


def test_unknown_server_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="gunicorn, uwsgi"):
        get_adapter("waitres")


@pytest.mark.parametrize(
    ("name", "values", "words"),
    [
        ("gunicorn", {"worker_class": "gevent", "threads": 4}, "threads=1 with gevent"),
        ("gunicorn", {"worker_class": "sync", "threads": 4}, "worker_class=gthread"),
        ("uwsgi", {"gevent": 10, "protocol": "http11-socket"}, "protocol=http-socket"),
        ("uwsgi", {"gevent": 10, "threads": 4}, "threads=1 with gevent"),
        ("uwsgi", {"max-requests": 100}, "master=true"),
        ("uwsgi", {"max-worker-lifetime": 60}, "master=true"),
        ("uwsgi", {"http-processes": 2}, "protocol=http or http-processes=1"),
        ("gunicorn", {"protocol": "uwsgi"}, "use --front nginx --set front_protocol=uwsgi"),
    ],
)
def test_combinations_the_server_cannot_run_are_refused(
    name: str, values: dict, words: str
) -> None:
    with pytest.raises(ConfigError, match=words):
        get_adapter(name).resolve(values)


@pytest.mark.parametrize("name", SERVERS)
def test_setting_values_cannot_smuggle_text(name: str) -> None:
    adapter = get_adapter(name)
    choices = [s for s in adapter.table.settings if s.kind is SettingKind.CHOICE][:1]
    number = next(s for s in adapter.table.settings if s.kind is SettingKind.INT)
    attempts = [(c, f"{c.default}\nworkers = 99") for c in choices] + [(number, "3\n4")]
    for setting, raw in attempts:
        with pytest.raises(ConfigError):
            adapter.resolve({setting.name: raw})


# --- rendered config files -------------------------------------------------------------------

GUNICORN_TUNED = {
    "workers": 3,
    "worker_class": "gthread",
    "threads": 4,
    "keepalive": 5,
    "max_requests": 1000,
    "max_requests_jitter": 50,
    "backlog": 512,
    "accesslog": True,
    "timeout": 20,
    "preload_app": True,
}


def test_gunicorn_config_checks_boots_and_round_trips(
    gunicorn: ServerAdapter, tmp_path: Path
) -> None:
    app = parse_app("apps.hello:app", cwd=ROOT)
    port = free_port()
    path = tmp_path / gunicorn.artifact_filename
    path.write_text(
        gunicorn.render_artifact(
            app, Bind.tcp(HOST, port), GUNICORN_TUNED, header="tuned\nby a test"
        ).text
    )
    spec = gunicorn.artifact_launch(path, app, Bind.tcp(HOST, port), GUNICORN_TUNED)
    argv = list(spec.argv)

    check = subprocess.run([*argv, "--check-config"], capture_output=True, text=True, cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    printed = subprocess.run(
        [*argv, "--print-config"], capture_output=True, text=True, cwd=tmp_path
    )
    resolved = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition("=") for line in printed.stdout.splitlines())
    )
    for name, value in GUNICORN_TUNED.items():
        expected = "-" if name == "accesslog" else str(value)
        assert resolved[name] == expected, name
    assert resolved["control_socket_disable"] == "True"
    assert resolved["bind"] == f"['{HOST}:{port}']"

    with ServerProcess.start(spec, cpus=(), log_path=tmp_path / "g.log", host=HOST, port=port) as s:
        assert get(s).is_success
        assert len(wait_for_pids(s, 4)) == 4  # master + 3 workers


def test_uwsgi_ini_boots_and_round_trips(uwsgi: ServerAdapter, tmp_path: Path) -> None:
    tuned = {
        "processes": 2,
        "threads": 2,
        "protocol": "http",
        "http-keepalive": 5,
        "disable-logging": True,
        "max-requests": 500,
        "max-worker-lifetime": 600,
        "listen": 64,
        "thunder-lock": True,
        "master": True,
    }
    app = parse_app("apps/hello.py:app", cwd=ROOT)
    port = free_port()
    path = tmp_path / uwsgi.artifact_filename
    path.write_text(
        uwsgi.render_artifact(app, Bind.tcp(HOST, port), tuned, header="tuned\nby a test").text
    )

    ini = configparser.ConfigParser(strict=True, interpolation=None)
    ini.read(path)
    section = ini["uwsgi"]
    for name, value in tuned.items():
        if name != "protocol":
            expected = "true" if value is True else str(value)
            assert section[name] == expected, name
    assert section["http"] == f"{HOST}:{port}"
    assert section["module"] == "apps.hello:app"
    assert {"strict", "need-app", "die-on-term"} <= set(section)

    spec = uwsgi.artifact_launch(path, app, Bind.tcp(HOST, port), tuned)
    with ServerProcess.start(spec, cpus=(), log_path=tmp_path / "u.log", host=HOST, port=port) as s:
        assert get(s).is_success
        assert len(wait_for_pids(s, 4)) == 4  # master + 2 workers + the http router
        log = s.log_tail(200)
    assert "thunder lock: enabled" in log


def test_gunicorn_config_escapes_text(gunicorn: ServerAdapter, tmp_path: Path) -> None:
    folder = tmp_path / 'it\'s "odd"\nworkers = 99'
    folder.mkdir()
    app = AppRef("hello", "app", str(folder))
    text = gunicorn.render_artifact(
        app, Bind.tcp(HOST, 8000), {}, header="line one\nworkers = 42"
    ).text
    namespace: dict = {}
    exec(compile(text, "gunicorn.conf.py", "exec"), namespace)  # noqa: S102 - our own output
    assert namespace["chdir"] == str(folder)
    assert namespace["workers"] == 1


def test_uwsgi_ini_refuses_unsafe_text(uwsgi: ServerAdapter, tmp_path: Path) -> None:
    for pythonpath in ("/srv/app\nprocesses = 99", "/srv/%(home)", "/srv/$(HOME)", "/srv/a b"):
        with pytest.raises(ConfigError, match="chdir"):
            uwsgi.render_artifact(AppRef("hello", "app", pythonpath), Bind.tcp(HOST, 8000), {})
    text = uwsgi.render_artifact(
        AppRef("hello", "app", "/srv/app"), Bind.tcp(HOST, 8000), {}, header="a\nprocesses = 99"
    ).text
    assert "\nprocesses = 99" not in text
    assert all(line.startswith("#") for line in text.split("[uwsgi]")[0].splitlines())


@pytest.mark.parametrize("name", SERVERS)
def test_version_is_a_version_number(name: str, real_servers: None) -> None:
    version = require_adapter(name).version()
    assert version[0].isdigit() and "." in version


def test_a_missing_server_fails_under_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tuner.servers.gunicorn import GunicornAdapter

    monkeypatch.setattr(GunicornAdapter, "binary", "no-such-gunicorn")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no-such-gunicorn not found on PATH"):
        require_adapter("gunicorn")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        require_adapter("gunicorn")
