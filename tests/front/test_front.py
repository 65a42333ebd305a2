"""`--front nginx`: a real nginx in front of the server per trial, and the block a study writes.

The tests marked `server` (through `since` or `nginx_front`) run the real nginx; in CI a
missing nginx fails them (scripts/system-packages installs it). The rest is pure logic.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import optuna
import psutil
import pytest

from tests.servers.test_contract import SeededTrial
from tests.support.cli import REPO, run_tuner
from tests.support.serverwatch import servers_started_since, wait_none_left
from tuner.apps import parse_app
from tuner.cli import main
from tuner.errors import ConfigError, ToolMissingError
from tuner.front import behind
from tuner.front.block import block_text
from tuner.front.config import FrontConfig, split
from tuner.front.fronted import FrontedAdapter
from tuner.front.nginx import site_block
from tuner.procs.bindprobe import fastcgi_request, fastcgi_status, uwsgi_request
from tuner.search.front_space import with_front_space
from tuner.search.space import default_space_path, load_space, suggest
from tuner.servers import get_adapter
from tuner.servers.base import Bind, Protocol, Transport

SHORT = ["--duration", "1", "--warmup", "0.3", "--connections", "8"]
# The short tunes check wiring (a checked block, a drawn branch), not figures: one 0.6 s window
# (a window counts from 0.5 s) after 0.2 s of warm-up, as the studies in commands/test_tune.py.
STUDY_SHORT = ["--duration", "0.6", "--warmup", "0.2", "--connections", "8"]


def nginx_processes(since: float) -> list[psutil.Process]:
    found = []
    for proc in servers_started_since(since):
        try:
            if "nginx" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_uwsgi_behind_uwsgi_pass_records_protocol_uwsgi_and_listens_with_socket() -> None:
    from tuner.servers.uwsgi import UwsgiAdapter

    adapter = UwsgiAdapter()
    bind = Bind.unix("/tmp/t.sock", protocol=Protocol.UWSGI)
    resolved = adapter.resolve({"protocol": "http11-socket", "threads": 4}, bind=bind)
    assert resolved["protocol"] == "uwsgi"
    argv = adapter.launch(parse_app("apps/hello.py", cwd=REPO), bind, resolved, REPO).argv
    assert argv[argv.index("--socket") + 1] == "/tmp/t.sock"
    assert not {"--http-socket", "--http11-socket", "--http"} & set(argv)
    # Over HTTP (no front), protocol=uwsgi is one clear error: nobody there speaks it.
    with pytest.raises(ConfigError, match="protocol=uwsgi on a server reached by http"):
        adapter.resolve({"protocol": "uwsgi"}, bind=Bind.tcp("127.0.0.1", 8000))


# --- through the real nginx ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "front"),
    [
        ("gunicorn", ["front_transport=tcp"]),
        ("gunicorn", ["front_transport=unix", "proxy_buffering=off"]),
        # gthread keeps connections alive over HTTP; over uwsgi the adapter turns that off
        # (nginx closes each uwsgi connection, which gthread would log as an error).
        ("gunicorn", ["front_transport=unix", "front_protocol=uwsgi", "worker_class=gthread"]),
        ("gunicorn", ["front_transport=tcp", "front_protocol=uwsgi"]),
        ("uwsgi", ["front_transport=unix", "front_protocol=uwsgi"]),
        ("uwsgi", ["front_transport=tcp", "front_protocol=uwsgi"]),
        ("flup", ["front_transport=unix", "fastcgi_keep_conn=off", "mode=prefork"]),
    ],
)
def test_bench_through_nginx(server, front, nginx_front, tmp_path):
    sets = [arg for setting in front for arg in ("--set", setting)]
    done = run_tuner(
        "bench", "apps/hello.py", "--server", server, "--front", "nginx", *sets, *SHORT,
        "--log-dir", str(tmp_path), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["front"]["name"] == "nginx" and result["front"]["version"]
    assert result["requests"] > 0 and sum(result["errors"].values()) == 0, result["errors"]
    # nginx's memory is counted with the server's, and kept apart too.
    assert 0 < result["memory_mb"]["front_pss_mean"] < result["memory_mb"]["pss_mean"]
    for setting in front:
        key, value = setting.split("=")
        assert str(result["settings"][key]).lower() in (value, "false" if value == "off" else "")
    # The measured nginx.conf is kept beside the server's log; pid file and temp folders not.
    prefix = tmp_path / f"{server}.nginx"
    conf = (prefix / "nginx.conf").read_text()
    assert ("uwsgi_pass" in conf) == ("front_protocol=uwsgi" in front)
    if "front_protocol=uwsgi" in front:  # what ran is recorded, not the moot HTTP setting
        assert result["settings"]["protocol"] == "uwsgi", result["settings"]
    assert ("fastcgi_pass" in conf) == (server == "flup")
    assert ("unix:" in conf) == ("front_transport=unix" in front)
    assert not (prefix / "nginx.pid").exists() and not (prefix / "proxy").exists()
    assert "Error handling request" not in (tmp_path / f"{server}.log").read_text()
    assert wait_none_left(nginx_front) == []


def test_short_tune_writes_a_checked_nginx_block(nginx_front, tmp_path):
    out = tmp_path / "uwsgi.ini"
    done = run_tuner(
        "tune", "apps/hello.py", "--server", "uwsgi", "--front", "nginx", "--trials", "3",
        *STUDY_SHORT, "--top-k", "1", "--confirm-rounds", "1", "--no-clean-venv-check",
        "--no-branch-starts", "--storage", f"sqlite:///{tmp_path}/s.db", "--out", str(out),
        timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    block = tmp_path / "nginx-uwsgi.conf"
    assert block.name in done.stderr and block.is_file()  # "wrote PATH" (rich may wrap it)
    text = block.read_text()
    assert "upstream tuner_app" in text and "location / {" in text
    assert text.startswith("# Tuned by tuner") and "as measured" in text
    server_file = out.read_text()
    assert "measured behind nginx" in server_file
    # The block names the socket the server's file binds.
    if "unix:/run/uwsgi/uwsgi.sock" in text:
        assert "/run/uwsgi/uwsgi.sock" in server_file
    assert not list(tmp_path.glob(".tuner-front-check-*"))
    assert wait_none_left(nginx_front) == []


def test_short_tune_draws_gunicorn_uwsgi_and_emits_it_checked(nginx_front, tmp_path):
    """gunicorn's protocol = uwsgi as a branch of the space behind nginx: seed 1 draws it
    for the first sampled trial (trial 2, after the two baselines: checked below); that
    trial runs without errors, and its files are written and boot-validated as measured."""
    storage = f"sqlite:///{tmp_path}/s.db"
    done = run_tuner(
        "tune", "apps/hello.py", "--server", "gunicorn", "--front", "nginx", "--trials", "3",
        "--seed", "1", *STUDY_SHORT, "--top-k", "1", "--confirm-rounds", "1",
        "--no-clean-venv-check", "--no-branch-starts", "--storage", storage,
        "--study-name", "g", "--out", str(tmp_path / "tuned" / "gunicorn.conf.py"),
        timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    study = optuna.load_study(study_name="g", storage=storage)
    drawn = [t for t in study.trials if t.params.get("front_protocol") == "uwsgi"]
    assert [t.number for t in drawn] == [2], [t.params for t in study.trials]
    assert drawn[0].state.name == "COMPLETE", drawn[0].user_attrs
    assert drawn[0].user_attrs["metrics"]["error_rate"] == 0
    # Moot over uwsgi, so not drawn (gunicorn runs it with keepalive = 0).
    assert "keepalive" not in drawn[0].params and "http_parser" not in drawn[0].params
    out = tmp_path / "trial2" / "gunicorn.conf.py"
    done = run_tuner(
        "emit", "--study", "g", "--trial", "2", "--out", str(out), "--storage", storage,
        "--no-clean-venv-check", timeout=200,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "protocol = 'uwsgi'" in text and "keepalive = 0" in text
    block = (out.parent / "nginx-gunicorn.conf").read_text()
    assert "uwsgi_pass tuner_app;" in block and "proxy_pass" not in block
    assert "keepalive" not in block  # no upstream keep-alive for uwsgi
    assert wait_none_left(nginx_front) == []


def test_gunicorn_uwsgi_without_a_front_is_one_line(capsys):
    argv = ["bench", "apps/hello.py", "--server", "gunicorn", "--set", "protocol=uwsgi", *SHORT]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "load generator speaks HTTP" in err[0], err
    assert "--front nginx --set front_protocol=uwsgi" in err[0]


def test_sigkill_of_the_tuner_leaves_no_nginx(nginx_front):
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuner", "bench", "apps/hello.py", "--server", "gunicorn",
         "--front", "nginx", "--set", "front_transport=unix", "--duration", "30", "--json"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(nginx_processes(nginx_front)) < 2:
        time.sleep(0.1)  # polling for nginx's master and worker to exist
    assert len(nginx_processes(nginx_front)) >= 2
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert wait_none_left(nginx_front) == []


# --- bad input and pure logic -----------------------------------------------------------------


@pytest.mark.parametrize("command", ["bench", "tune"])
def test_unknown_front_is_one_line(command, capsys, tmp_path):
    argv = [command, "apps/hello.py", "--server", "gunicorn", "--front", "apache", *SHORT]
    if command == "tune":
        argv += ["--storage", f"sqlite:///{tmp_path}/s.db", "--out", str(tmp_path / "o.py")]
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "--front 'apache'" in err[0] and "nginx" in err[0]


def test_a_front_setting_without_front_is_refused():
    with pytest.raises(ConfigError, match="unknown gunicorn setting 'front_transport'"):
        get_adapter("gunicorn").resolve({"front_transport": "unix"})


def test_front_space_follows_what_the_server_can_be_bound_as():
    def space_of(server: str):
        adapter = get_adapter(server)
        space = load_space(default_space_path(server), adapter.table, server)
        return with_front_space(FrontedAdapter(adapter, "nginx"), space)[1]

    gunicorn, uwsgi, cheroot = space_of("gunicorn"), space_of("uwsgi"), space_of("cheroot")
    assert {"front_transport", "proxy_buffering"} <= set(gunicorn.names())
    assert "front_protocol" in gunicorn.names()  # gunicorn's protocol = uwsgi
    # Moot over uwsgi (gunicorn's uwsgi parser; no upstream keep-alive): drawn over http only.
    for name in ("http_parser", "keepalive"):
        param = next(p for p in gunicorn.params if p.name == name)
        assert param.when.get("front_protocol") == ("http",), param
    assert {"front_transport", "front_protocol", "proxy_buffering"} <= set(uwsgi.names())
    # Over uWSGI's binary protocol, which HTTP the workers would speak is not drawn.
    assert uwsgi.names()[0] == "front_transport"
    protocol = next(p for p in uwsgi.params if p.name == "protocol")
    assert protocol.when == {"front_protocol": ("http",)}
    # cheroot: HTTP over TCP only, so only buffering is left to search.
    assert cheroot.names()[0] == "proxy_buffering" and "front_transport" not in cheroot.names()


def test_fronted_adapter_splits_values_and_refuses_unsupported_binds():
    adapter = FrontedAdapter(get_adapter("gunicorn"), "nginx")
    values = adapter.resolve({"workers": 3, "front_transport": "unix"})
    server, front = split(values)
    assert "front_transport" not in server and server["workers"] == 3
    assert front == FrontConfig(transport=Transport.UNIX, protocol=Protocol.HTTP, buffering=True)
    assert all(b.values["front_transport"] == "tcp" for b in adapter.baselines(2))
    with pytest.raises(ConfigError, match="reuse_port=true on a unix socket"):
        adapter.resolve({"front_transport": "unix", "reuse_port": True})
    adapter.resolve({"front_transport": "tcp", "reuse_port": True})
    with pytest.raises(ConfigError, match="cannot listen for uwsgi over unix"):
        get_adapter("waitress").check_bind(Bind.unix("/tmp/x.sock", Protocol.UWSGI))


def test_gunicorn_over_uwsgi_runs_protocol_uwsgi_without_keepalive(tmp_path):
    adapter = FrontedAdapter(get_adapter("gunicorn"), "nginx")
    app = parse_app("apps/hello.py", cwd=REPO)

    def argv_of(**values: object) -> list[str]:
        resolved = adapter.resolve({"worker_class": "gthread", "keepalive": 5, **values})
        argv = list(adapter.launch(app, Bind.tcp("127.0.0.1", 8001), resolved, tmp_path).argv)
        return [argv[argv.index(flag) + 1] for flag in ("--protocol", "--keep-alive")]

    assert argv_of(front_protocol="uwsgi") == ["uwsgi", "0"]  # nginx closes each connection
    assert argv_of(front_protocol="http") == ["http", "5"]


def test_nginx_block_keeps_upstream_alive_for_http_only():
    http = "\n".join(site_block(Bind.tcp("127.0.0.1", 8000), FrontConfig(), "80"))
    assert "keepalive 32;" in http and "proxy_http_version 1.1;" in http
    assert 'proxy_set_header Connection "";' in http and "proxy_buffering on;" in http
    uwsgi = "\n".join(
        site_block(
            Bind.unix("/run/u.sock", Protocol.UWSGI),
            FrontConfig(Transport.UNIX, Protocol.UWSGI, False),
            "80",
        )
    )
    assert "server unix:/run/u.sock" in uwsgi and "uwsgi_buffering off;" in uwsgi
    assert "keepalive" not in uwsgi  # nginx keeps no uwsgi connections alive


def test_front_keepalive_is_the_upstream_pool_where_nginx_keeps_connections(tmp_path):
    adapter = FrontedAdapter(get_adapter("gunicorn"), "nginx")
    values = adapter.resolve({"front_keepalive": 4})
    assert FrontConfig.from_values(values).keepalive == 4
    assert adapter.resolve({})["front_keepalive"] == 32  # what the tuner wrote before
    with pytest.raises(ConfigError, match="front_keepalive=0"):
        adapter.resolve({"front_keepalive": 0})
    tcp = Bind.tcp("127.0.0.1", 8000)
    http = FrontConfig(keepalive=4)
    assert "    keepalive 4;" in site_block(tcp, http, "80")
    assert "upstream keepalive 4 idle per nginx worker" in http.describe()
    # The block a study writes names it, in the upstream and in its header.
    block = block_text(adapter, tcp, FrontConfig.from_values(values), "80", [])
    assert "    keepalive 4;" in block and "upstream keepalive 4" in block
    # Where nginx closes each connection, there is no pool to size.
    uwsgi = FrontConfig(protocol=Protocol.UWSGI, keepalive=4)
    for closed in (uwsgi, FrontConfig(protocol=Protocol.FASTCGI, keep_conn=False, keepalive=4)):
        assert "keepalive" not in "\n".join(site_block(tcp, closed, "80"))
        assert "keepalive" not in closed.describe()
    assert "keepalive 4;" in "\n".join(
        site_block(tcp, FrontConfig(protocol=Protocol.FASTCGI, keepalive=4), "80")
    )


@pytest.mark.parametrize("server", ["gunicorn", "uwsgi", "flup", "cheroot"])
def test_front_keepalive_is_drawn_only_where_nginx_keeps_connections(server):
    adapter = FrontedAdapter(get_adapter(server), "nginx")
    space = load_space(default_space_path(server), get_adapter(server).table, server)
    space = with_front_space(adapter, space)[1]
    drawn_sizes = set()
    for seed in range(200):
        drawn = suggest(space, SeededTrial(seed), cpus=2)
        try:
            config = FrontConfig.from_values(adapter.resolve(drawn))
        except ConfigError:  # gunicorn's reuse_port on a unix socket: not this test's subject
            continue
        if "front_keepalive" in drawn:
            assert config.keeps_connections, drawn
            drawn_sizes.add(drawn["front_keepalive"])
        else:  # not drawn: nginx closes each connection, so the size is moot
            assert not config.keeps_connections, drawn
    assert drawn_sizes == {4, 32, 256}


def test_uwsgi_packet_layout():
    packet = uwsgi_request("/a?b=1")
    assert packet[0] == 0 and packet[3] == 0
    assert int.from_bytes(packet[1:3], "little") == len(packet) - 4
    assert b"\x0e\x00REQUEST_METHOD\x03\x00GET" in packet and b"QUERY_STRING\x03\x00b=1" in packet


def test_nginx_block_for_fastcgi_keeps_connections_unless_told_not_to():
    bind = Bind.unix("/run/flup/flup.sock", Protocol.FASTCGI)
    fastcgi = (Transport.UNIX, Protocol.FASTCGI)
    kept = "\n".join(site_block(bind, FrontConfig(*fastcgi, True, True), "80"))
    assert "fastcgi_pass tuner_app;" in kept and "keepalive 32;" in kept
    assert "fastcgi_keep_conn on;" in kept and "fastcgi_buffering on;" in kept
    # A WSGI app at the site's root: no script name, the whole path in PATH_INFO.
    assert 'fastcgi_param SCRIPT_NAME       "";' in kept
    assert "fastcgi_param PATH_INFO         $document_uri;" in kept
    assert "include" not in kept  # stands alone: no /etc/nginx/fastcgi_params needed
    closed = "\n".join(site_block(bind, FrontConfig(*fastcgi, False, False), "80"))
    assert "fastcgi_keep_conn off;" in closed and "keepalive" not in closed
    assert "fastcgi_buffering off;" in closed


def test_fastcgi_request_layout_and_status():
    packet = fastcgi_request("/a?b=1")
    # BEGIN_REQUEST: version 1, type 1, request 1, 8 bytes of body, responder role.
    assert packet[:8] == bytes([1, 1, 0, 1, 0, 8, 0, 0]) and packet[8:10] == b"\x00\x01"
    assert b"\x0c\x03QUERY_STRINGb=1" in packet and b"\x0b\x00SCRIPT_NAME" in packet
    assert packet.endswith(bytes([1, 4, 0, 1, 0, 0, 0, 0, 1, 5, 0, 1, 0, 0, 0, 0]))
    assert fastcgi_status(b"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nx") == 404
    assert fastcgi_status(b"Content-Type: text/plain\r\n\r\nhello") == 200  # CGI: no Status
    with pytest.raises(ValueError):
        fastcgi_status(b"")


def test_front_space_for_a_fastcgi_server():
    adapter = FrontedAdapter(get_adapter("flup"), "nginx")
    space = load_space(default_space_path("flup"), get_adapter("flup").table, "flup")
    names = with_front_space(adapter, space)[1].names()
    # fastcgi is flup's only protocol: not searched; its kept connections are.
    assert "front_protocol" not in names
    assert {"front_transport", "proxy_buffering", "fastcgi_keep_conn"} <= set(names)
    defaults = adapter.resolve({})
    assert (defaults["front_protocol"], defaults["fastcgi_keep_conn"]) == ("fastcgi", True)
    assert all(b.values["front_protocol"] == "fastcgi" for b in adapter.baselines(2))
    # A server that speaks no FastCGI has no such setting, in its table or its space.
    uwsgi = FrontedAdapter(get_adapter("uwsgi"), "nginx")
    assert "fastcgi_keep_conn" not in uwsgi.table.by_name
    uwsgi_space = load_space(default_space_path("uwsgi"), get_adapter("uwsgi").table, "uwsgi")
    assert "fastcgi_keep_conn" not in with_front_space(uwsgi, uwsgi_space)[1].names()


@pytest.mark.parametrize("command", ["bench", "tune"])
def test_a_server_without_http_needs_a_front(command, capsys, tmp_path):
    argv = [command, "apps/hello.py", "--server", "flup", *SHORT]
    if command == "tune":
        argv += ["--storage", f"sqlite:///{tmp_path}/s.db", "--out", str(tmp_path / "o.py")]
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "flup speaks fastcgi, not HTTP" in err[0] and "--front nginx" in err[0]


def test_compare_all_leaves_a_fastcgi_server_out_without_a_front():
    from tuner.commands.compare import parse_servers

    assert "flup" not in parse_servers("all")
    try:
        get_adapter("flup").check_installed()
    except ToolMissingError:
        return  # not installed here: `all` leaves it out either way
    assert "flup" in parse_servers("all", "nginx")


def test_behind_none_is_the_adapter_itself():
    adapter = get_adapter("gunicorn")
    assert behind(adapter, None) is adapter


def test_gunicorn_over_uwsgi_resolves_to_what_it_runs():
    adapter = FrontedAdapter(get_adapter("gunicorn"), "nginx")
    values = adapter.resolve({"front_protocol": "uwsgi", "worker_class": "gthread", "keepalive": 5})
    assert (values["protocol"], values["keepalive"]) == ("uwsgi", 0)
    assert adapter.resolve(values) == values  # a record resolves to itself
    over_http = adapter.resolve({**values, "front_protocol": "http", "protocol": "http"})
    assert over_http["protocol"] == "http"
    with pytest.raises(ConfigError, match="protocol=uwsgi on a server reached by http"):
        adapter.resolve({**values, "front_protocol": "http"})


def test_a_gunicorn_uwsgi_trial_records_what_the_server_ran(nginx_front, tmp_path):
    """The study's record of a trial behind uwsgi_pass, `show` and the written file say
    protocol = uwsgi and keepalive = 0, as the server was started (not the table's
    http and 2, which the search leaves moot over uwsgi)."""
    from tuner.cli import build_parser
    from tuner.commands.setup import build_setup
    from tuner.commands.tune_options import TuneOptions
    from tuner.search.study import QuietListener, open_study, run_search

    storage = f"sqlite:///{tmp_path}/s.db"
    args = build_parser().parse_args(
        ["tune", "apps/hello.py", "--server", "gunicorn", "--front", "nginx"]
        + ["--storage", storage, "--study-name", "g", "--no-branch-starts"]
        + ["--duration", "0.6", "--warmup", "0.2", "--connections", "8"]
    )
    setup = build_setup(TuneOptions.from_args(args))
    study = open_study(setup)  # queues the two baselines
    drawn = {"front_protocol": "uwsgi", "front_transport": "unix", "worker_class": "gthread"}
    drawn["threads"] = 2
    defaults = setup.adapter.table.defaults()
    study.queue({p.name: drawn.get(p.setting, defaults[p.setting]) for p in setup.space.params})
    listener = QuietListener()
    run_search(setup, study, n_trials=3, timeout_s=None, listener=listener)
    record = {r.number: r for r in listener.ended}[2]
    assert record.state == "COMPLETE", record.fail_reason
    settings = record.settings
    assert (settings["front_protocol"], settings["worker_class"]) == ("uwsgi", "gthread")
    # What the trial's server was started with, from the recorded settings.
    app = parse_app("apps/hello.py", cwd=REPO)
    argv = list(setup.adapter.launch(app, Bind.tcp("127.0.0.1", 8001), settings, tmp_path).argv)
    ran = {flag: argv[argv.index(flag) + 1] for flag in ("--protocol", "--keep-alive")}
    assert ran == {"--protocol": "uwsgi", "--keep-alive": "0"}
    assert (settings["protocol"], settings["keepalive"]) == ("uwsgi", 0)
    stored = optuna.load_study(study_name="g", storage=storage).trials[2].user_attrs["settings"]
    assert (stored["protocol"], stored["keepalive"]) == ("uwsgi", 0)
    shown = run_tuner("show", "--study", "g", "--storage", storage, env={"COLUMNS": "300"})
    assert shown.returncode == 0, shown.stderr
    assert "keepalive=0 protocol=uwsgi" in shown.stdout, shown.stdout
    assert wait_none_left(nginx_front) == []


def test_the_server_stops_before_its_unix_socket_is_removed(nginx_front, tmp_path):
    """gunicorn unlinks its own socket at stop: removed first, it logs a traceback. The
    socket is removed once the server is gone, so none is left either."""
    import os

    done = run_tuner(
        "bench", "apps/hello.py", "--server", "gunicorn", "--front", "nginx",
        "--set", "front_transport=unix", *SHORT, "--log-dir", str(tmp_path), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "gunicorn.log").read_text()
    assert "Traceback" not in log, log
    assert "Listening at: unix:" in log and "Shutting down: Master" in log, log
    socket_path = log.split("Listening at: unix:")[1].split()[0]
    assert not os.path.exists(socket_path)
    assert wait_none_left(nginx_front) == []
