"""ServerProcess with real processes: start failures, readiness, stop, parent death, memory."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import HOST, ROOT, SERVER_CPU, require_adapter, running, wait_for_pids
from tuner.apps import parse_app
from tuner.errors import (
    AppBrokenError,
    ConfigError,
    ReadinessTimeout,
    ServerStartError,
    ToolMissingError,
)
from tuner.metrics.memory import MemorySampler
from tuner.procs.process import ServerProcess, free_port
from tuner.servers.base import LaunchSpec

# A stand-in server: answers GET with `STATUS` (or never answers when STATUS is "silent"), and
# forks CHILDREN children that ignore the polite stop signals.
FAKE_SERVER = textwrap.dedent(
    """
    import http.server, os, signal, socket, sys, time
    port, status, children = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    time.sleep(float(sys.argv[4]))  # a slow start: nothing listens until then
    for _ in range(children):
        if os.fork() == 0:
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)
            while True:
                time.sleep(1)
    if status == "silent":
        listener = socket.create_server(("127.0.0.1", port))
        accepted = []
        while True:
            accepted.append(listener.accept())
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(int(status))
            self.send_header("Content-Length", "0")
            self.end_headers()
    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
    """
)


def fake_spec(
    port: int, status: str = "200", children: int = 0, grace_s: float = 0.5, delay_s: float = 0
) -> LaunchSpec:
    return LaunchSpec(
        argv=(sys.executable, "-c", FAKE_SERVER, str(port), status, str(children), str(delay_s)),
        env={},
        cwd=str(ROOT),
        stop_signal=signal.SIGTERM,
        stop_grace_s=grace_s,
    )


def start(spec: LaunchSpec, port: int, tmp_path: Path, **kwargs: object) -> ServerProcess:
    return ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=tmp_path / "server.log", host=HOST, port=port, **kwargs
    )


def gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


def watchdog_children() -> list[psutil.Process]:
    return [
        child
        for child in psutil.Process().children()
        if "killpg" in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE
    ]


# --- stop ------------------------------------------------------------------------------------


def test_stop_leaves_no_process_of_a_real_server(adapter, tmp_path: Path) -> None:
    values = {"workers": 3} if adapter.name == "gunicorn" else {"processes": 3, "master": True}
    with running(adapter, values=values, log_path=tmp_path / "s.log") as server:
        pids = wait_for_pids(server, 4)
        assert server.alive()
    assert len(pids) == 4
    assert gone(pids)
    assert not server.alive()
    server.stop()  # idempotent
    assert not watchdog_children()


def test_stop_kills_children_that_ignore_the_stop_signal(
    tmp_path: Path, real_servers: None
) -> None:
    port = free_port()
    server = start(fake_spec(port, children=2, grace_s=0.3), port, tmp_path)
    pids = wait_for_pids(server, 3)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 3
    assert len(pids) == 3 and gone(pids)


def test_the_stops_repeats_send_the_quick_signal(tmp_path: Path, real_servers: None) -> None:
    # The children ignore the stop signal (SIGTERM) but not SIGUSR1: the first repeat, 0.5 s
    # in, ends them, long before the grace runs out and SIGKILL would.
    port = free_port()
    spec = dataclasses.replace(
        fake_spec(port, children=2, grace_s=5.0), quick_stop_signal=signal.SIGUSR1
    )
    server = start(spec, port, tmp_path)
    pids = wait_for_pids(server, 3)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 2.5
    assert len(pids) == 3 and gone(pids)


# --- start failures --------------------------------------------------------------------------


def test_a_server_that_exits_at_start_reports_its_code_and_log(
    tmp_path: Path, real_servers: None
) -> None:
    spec = LaunchSpec(
        argv=(sys.executable, "-c", "import sys; print('boom: no config'); sys.exit(7)"),
        env={},
        cwd=str(ROOT),
        stop_signal=signal.SIGTERM,
        stop_grace_s=1,
    )
    with pytest.raises(ServerStartError) as caught:
        start(spec, free_port(), tmp_path)
    assert caught.value.returncode == 7
    assert "exited with code 7" in str(caught.value)
    assert "boom: no config" in caught.value.log_tail
    assert not watchdog_children()


def test_readiness_timeout_when_nothing_answers(tmp_path: Path, real_servers: None) -> None:
    port = free_port()
    started = time.monotonic()
    with pytest.raises(ReadinessTimeout, match="did not answer 2xx"):
        start(fake_spec(port, status="silent", children=1), port, tmp_path, ready_timeout_s=1.0)
    # Its 1 s, not the default 30 s; the stop after it (grace 0.5 s) may be slow on a busy
    # machine.
    assert time.monotonic() - started < 10
    assert not watchdog_children()


def test_readiness_needs_a_2xx_answer(tmp_path: Path, real_servers: None) -> None:
    port = free_port()
    with pytest.raises(ReadinessTimeout, match="HTTP 500"):
        start(fake_spec(port, status="500"), port, tmp_path, ready_timeout_s=0.5)


def test_unavailable_cpu_is_a_config_error(tmp_path: Path, real_servers: None) -> None:
    port = free_port()
    missing = max(os.sched_getaffinity(0)) + 1
    with pytest.raises(ConfigError, match=f"CPUs \\[{missing}\\] are not available"):
        ServerProcess.start(
            fake_spec(port), cpus=(missing,), log_path=tmp_path / "s.log", host=HOST, port=port
        )
    assert not watchdog_children()


def test_missing_binary_is_a_tool_missing_error(tmp_path: Path, real_servers: None) -> None:
    spec = LaunchSpec(("/nonexistent/gunicorn",), {}, str(ROOT), signal.SIGTERM, 1)
    with pytest.raises(ToolMissingError, match="/nonexistent/gunicorn"):
        start(spec, free_port(), tmp_path)


def test_startup_time_is_recorded(tmp_path: Path, real_servers: None) -> None:
    port = free_port()
    delay_s = 0.6  # the server listens only after this: startup must include the wait
    with start(fake_spec(port, delay_s=delay_s), port, tmp_path) as server:
        assert delay_s <= server.startup_s < delay_s + 10, server.startup_s


# --- an app that cannot load -----------------------------------------------------------------


@pytest.fixture
def broken_app(tmp_path: Path) -> Path:
    path = tmp_path / "broken_app.py"
    path.write_text("import no_such_module_anywhere\napp = None\n")
    return path


def test_app_that_fails_to_import_fails_fast_with_the_traceback(
    adapter, broken_app: Path, tmp_path: Path
) -> None:
    # uWSGI exits 22 (need-app) for any app that does not load: AppBrokenError. gunicorn
    # exits 3 ("worker failed to boot"), which other failures share; its log's traceback
    # through import_app tells this one apart. `check_app_imports` catches both before a
    # study starts (tests/test_apps.py).
    with pytest.raises(AppBrokenError) as caught:  # noqa: SIM117
        with running(adapter, f"{broken_app}:app", log_path=tmp_path / "s.log"):
            pass
    assert "No module named 'no_such_module_anywhere'" in str(caught.value)


def test_missing_callable_is_app_broken(adapter, tmp_path: Path) -> None:
    with pytest.raises(AppBrokenError, match="could not load the app") as caught:  # noqa: SIM117
        with running(adapter, "apps.hello:no_such_app", log_path=tmp_path / "s.log"):
            pass
    assert caught.value.__class__ is AppBrokenError
    # Each server's own words: gunicorn names the callable, uWSGI only says it found none.
    expected = {"gunicorn": "no_such_app", "uwsgi": "(callable not found or import error)"}
    assert expected[adapter.name] in str(caught.value), str(caught.value)


# --- the tuner dies --------------------------------------------------------------------------

TUNER_STAND_IN = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, sys.argv[1])
    from tests.conftest import HOST, ROOT, running, wait_for_pids
    from tuner.servers import get_adapter
    from pathlib import Path
    adapter = get_adapter(sys.argv[2])
    values = {"workers": 2} if adapter.name == "gunicorn" else {"processes": 2, "master": True}
    with running(adapter, values=values, log_path=Path(sys.argv[3])) as server:
        pids = wait_for_pids(server, 3) + [server._watchdog.pid]
        print(json.dumps(pids), flush=True)
        time.sleep(60)
    """
)


@pytest.mark.parametrize("server_name", ["gunicorn", "uwsgi"])
def test_server_dies_when_the_tuner_is_sigkilled(
    server_name: str, tmp_path: Path, since: float
) -> None:
    require_adapter(server_name)
    tuner = subprocess.Popen(
        [sys.executable, "-c", TUNER_STAND_IN, str(ROOT), server_name, str(tmp_path / "s.log")],
        stdout=subprocess.PIPE,
        text=True,
    )
    pids: list[int] = []
    try:
        pids = json.loads(tuner.stdout.readline())  # type: ignore[union-attr]
        assert len(pids) == 4 and not gone(pids)
        tuner.kill()
        tuner.wait()
        deadline = time.monotonic() + 30  # a safety bound, not the premise
        while not gone(pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(pids), [p for p in pids if psutil.pid_exists(p)]
    finally:
        tuner.kill()
        tuner.wait()
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()


# --- memory ----------------------------------------------------------------------------------


def test_memory_sampler_sums_the_tree(gunicorn, tmp_path: Path) -> None:
    values = {"workers": 3, "preload_app": True}
    with running(gunicorn, values=values, log_path=tmp_path / "g.log") as server:
        wait_for_pids(server, 4)
        with MemorySampler(server.pids, interval_s=0.05) as memory:
            # Until its thread has sampled twice besides the sample on entry: how long that
            # takes depends on the machine (each sample reads every process's smaps).
            deadline = time.monotonic() + 30
            while memory.summary()["samples"] < 3:
                assert time.monotonic() < deadline, "the sampler's thread took no samples"
                time.sleep(0.05)
        one_process = psutil.Process(server.pid).memory_full_info()
    summary = memory.summary()
    assert summary["samples"] >= 3
    assert summary["processes_peak"] == 4  # the master and its three workers
    assert 0 < summary["uss_peak"] <= summary["pss_peak"] <= summary["rss_peak"]
    assert 0 < summary["pss_mean"] <= summary["pss_peak"]
    # Four processes: the sum is well above any single one.
    assert summary["rss_peak"] > 2 * one_process.rss / 1024 / 1024
    # The breakdown: the master is a part of the tree, and with preload the workers share
    # the app's pages with it, which RSS would count four times.
    assert summary["server_processes"] == 4
    assert 0 < summary["master_pss_mean"] < summary["pss_mean"]
    assert summary["sharing_saves_mean"] > 0


def test_memory_sampler_survives_a_vanished_tree() -> None:
    with MemorySampler(lambda: [2**22 + 12345], interval_s=0.01) as memory:
        time.sleep(0.05)
    assert memory.summary() == {
        "pss_mean": 0.0,
        "pss_peak": 0.0,
        "uss_peak": 0.0,
        "rss_peak": 0.0,
        "samples": 0,
        "processes_peak": 0,
    }


def test_memory_sampler_breaks_one_process_down_as_its_own_master() -> None:
    """The test's own process, sampled as a tree of one: the master is all of it, and no
    page is shared with another process of the tree (a fork would be needed for that)."""
    with MemorySampler(lambda: [os.getpid()], interval_s=60) as memory:
        pass
    summary = memory.summary()
    assert summary["samples"] == 1 and summary["server_processes"] == 1
    assert summary["master_pss_mean"] == summary["pss_mean"] > 0
    assert summary["sharing_saves_mean"] >= 0


def test_free_port_is_bindable() -> None:
    import socket

    port = free_port()
    with socket.create_server((HOST, port)):
        pass
    assert parse_app("apps.hello", cwd=ROOT).callable == "app"
