"""`tuner bench` and `tuner load` from the command line: real servers, real load, short windows."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.support.cli import REPO
from tests.support.cli import run_tuner as tuner
from tests.support.serverwatch import servers_started_since, wait_none_left
from tuner.apps import parse_app
from tuner.procs.process import ServerProcess, free_port
from tuner.servers import get_adapter
from tuner.servers.base import Bind

SHORT = ["--duration", "1", "--warmup", "0.3", "--connections", "8"]
JSON_KEYS = {
    "rps",
    "latency_ms",
    "requests",
    "errors",
    "memory_mb",
    "startup_s",
    "client_bound",
    "loadgen_cpu",
    "starved_connections",
    "unfair",
    "settings",
    "server_cpu",
}


@pytest.mark.parametrize(
    ("server", "settings"),
    [
        ("gunicorn", ["workers=2", "worker_class=gthread", "threads=4"]),
        ("uwsgi", ["processes=2", "protocol=http-socket", "disable-logging=true"]),
    ],
)
def test_bench_json_has_stable_keys_and_real_figures(since, server, settings):
    sets = [arg for pair in settings for arg in ("--set", pair)]
    done = tuner(
        "bench", "apps/fib.py", "--server", server, "--path", "/9000", *sets, "--json", *SHORT
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) >= JSON_KEYS
    assert set(result["latency_ms"]) >= {"p50", "p90", "p99", "p999", "max"}
    assert set(result["errors"]) >= {"connect", "read", "timeout", "status_4xx", "status_5xx"}
    assert set(result["memory_mb"]) >= {"pss_mean", "pss_peak", "uss_peak", "rss_peak"}
    assert result["requests"] > 0 and result["rps"] > 0
    assert sum(result["errors"].values()) == 0
    assert 0 < result["memory_mb"]["pss_peak"] <= result["memory_mb"]["rss_peak"]
    assert result["startup_s"] > 0
    # A server under a closed loop on fib keeps its one server CPU busy (some of it waiting
    # on the loopback); more than one CPU busy would mean the tree escaped its pinning.
    assert 0.2 < result["server_cpu"]["busy_cpus"] <= result["server_cpu"]["of_cpus"] * 1.05
    percentiles = [result["latency_ms"][key] for key in ("p50", "p90", "p99", "p999", "max")]
    assert percentiles[0] > 0 and percentiles == sorted(percentiles)
    # rps is the responses of the 1 s window per second (not of the warm-up or drain)
    assert 0.8 <= result["requests"] / result["rps"] <= 1.25, (result["requests"], result["rps"])
    for pair in settings:  # every --set reached the server's settings, typed
        name, value = pair.split("=")
        assert str(result["settings"][name]).lower() == value, (name, result["settings"])
    assert result["settings"][settings[0].split("=")[0]] == 2


def test_bench_table_on_a_terminal_less_run(since):
    done = tuner("bench", "apps.hello:app", "--server", "gunicorn", *SHORT)
    assert done.returncode == 0, done.stderr
    assert "throughput" in done.stdout and "req/s" in done.stdout and "PSS" in done.stdout


def test_load_drives_a_running_server(since, tmp_path):
    adapter = get_adapter("uwsgi")
    port = free_port()
    spec = adapter.launch(
        parse_app("apps/hello.py", REPO),
        Bind.tcp("127.0.0.1", port),
        adapter.resolve({"protocol": "http11-socket", "threads": 16}),
        tmp_path,
    )
    with ServerProcess.start(
        spec, cpus=(0,), log_path=tmp_path / "u.log", host="127.0.0.1", port=port
    ):
        done = tuner("load", f"http://127.0.0.1:{port}/", "--json", *SHORT)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["requests"] > 0 and result["starved_connections"] == 0
    assert not result["unfair"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["bench", "apps/hello.py", "--server", "gunicorn", "--set", "wurkers=2"], "wurkers"),
        (["bench", "apps/hello.py", "--server", "gunicorn", "--set", "workers=lots"], "lots"),
        (["bench", "apps/hello.py", "--server", "uwsgi", "--set", "protocol=spdy"], "spdy"),
        (["bench", "apps/hello.py", "--server", "gunicorn", "--server-cpus", "64"], "64"),
        (
            [
                "bench",
                "apps/hello.py",
                "--server",
                "gunicorn",
                "--server-cpus",
                "0",
                "--load-cpus",
                "0",
            ],
            "share",
        ),
        (["bench", "apps/missing.py", "--server", "gunicorn"], "missing.py"),
        (["bench", "tests/support/apps/broken_app.py", "--server", "gunicorn"], "broken_app"),
        (["load", "http://10.1.2.3:80/"], "10.1.2.3"),
        (["load", "http://127.0.0.1:8000/", "--connections", "0"], "connections"),
        (["bench", "apps/hello.py"], "--server"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle, since):
    done = tuner(args[0], *SHORT, *args[1:])  # the case's own options come last and win
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr
    assert needle in lines[0] and "Traceback" not in done.stderr


def test_sigkill_of_the_tuner_mid_bench_leaves_no_server(since):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tuner",
            "bench",
            "apps/hello.py",
            "--server",
            "uwsgi",
            "--set",
            "processes=3",
            "--set",
            "master=true",
            "--duration",
            "30",
            "--json",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(servers_started_since(since)) < 4:
        time.sleep(0.1)  # polling for the server's master and 3 workers to exist
    assert len(servers_started_since(since)) >= 4
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert wait_none_left(since) == []


def bench_json(app: str, server: str, *options: str) -> dict:
    """`tuner bench APP --server SERVER --json OPTIONS...`, which must succeed; its result."""
    done = tuner("bench", app, "--server", server, "--json", *options)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_slow_but_fair_queue_is_not_starvation(since):
    # One sync worker, 16 clients, 50 ms each: every client waits ~0.8 s in turn. Some complete
    # nothing in a 1 s window, but none is passed over, so the result is fair.
    result = bench_json(
        "apps/iowait.py", "gunicorn", "--duration", "1", "--warmup", "0.5", "--connections", "16"
    )
    assert result["starved_connections"] == 0 and not result["unfair"], result["notes"]
    assert 10 <= result["rps"] <= 21  # ~20 req/s: one request at a time, 50 ms each


def test_passed_over_connections_are_starvation(since):
    # uWSGI http11-socket with one sync worker keeps serving one keep-alive connection. The
    # others' requests are 1.3 s old at the window's end, short of their 2 s timeout (starved,
    # not timed out); the drain waits for them until then, not 5 s.
    result = bench_json(
        "apps/hello.py", "uwsgi", "--set", "protocol=http11-socket",
        "--duration", "1", "--warmup", "0.3", "--connections", "8", "--request-timeout", "2",
    )  # fmt: skip
    assert result["unfair"] and result["starved_connections"] >= 6
