"""Tornado: what only its launcher does (the contract suite covers the generic behaviour,
including the written file booted in a clean venv): it forks the processes, shares the port
as its listen mode says, runs the app on an executor of the given threads or on the I/O loop,
and no process outlives the launcher."""

from __future__ import annotations

import inspect
import os
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import HOST, require_adapter, running, wait_for_pids
from tests.servers.test_bjoern import listening_sockets, wait_gone
from tuner.servers.base import BASELINE_FORK_RULE, ServerAdapter

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")

IOWAIT = "apps.iowait:app"  # each request waits 50 ms (time.sleep), like a slow database


@pytest.fixture
def tornado() -> ServerAdapter:
    return require_adapter("tornado")


def test_the_process_model_says_it_forks_and_what_counts_threads(tornado: ServerAdapter) -> None:
    model = tornado.process_model
    assert (model.forks_workers, model.processes, model.threads) == (True, "processes", "threads")
    labels = [b.label for b in tornado.baselines(2)]
    assert labels == ["default", BASELINE_FORK_RULE]
    assert tornado.baselines(2)[1].values["processes"] == 5
    # No executor is one thread per process; the grid covers it beside the pools.
    assert tornado.threads(tornado.resolve({})) == 1
    assert {point["threads"] for point in tornado.hand_grid(1)} >= {0, 1, 64}


def test_the_defaults_are_tornados_own(tornado: ServerAdapter) -> None:
    """One process, no executor, and the arguments' defaults of the installed Tornado."""
    from tornado.httpserver import HTTPServer
    from tornado.iostream import IOStream
    from tornado.netutil import bind_sockets
    from tornado.wsgi import WSGIContainer

    defaults = tornado.table.defaults()
    server = inspect.signature(HTTPServer.initialize).parameters
    assert defaults["no_keep_alive"] is server["no_keep_alive"].default is False
    assert defaults["decompress_request"] is server["decompress_request"].default is False
    assert defaults["backlog"] == inspect.signature(bind_sockets).parameters["backlog"].default
    assert inspect.signature(WSGIContainer).parameters["executor"].default is None
    assert defaults["threads"] == 0 and defaults["processes"] == 1
    # None in the signatures: the values Tornado uses then.
    stream = IOStream(socket.socket())
    try:
        assert defaults["max_buffer_size"] == stream.max_buffer_size
    finally:
        stream.close()
    assert defaults["idle_connection_timeout"] == 3600  # `idle_connection_timeout or 3600`


def test_one_process_is_tornado_alone(tornado: ServerAdapter, tmp_path: Path) -> None:
    with running(tornado, log_path=tmp_path / "t.log") as server:
        assert server.pids() == [server.pid]


@pytest.mark.parametrize(("mode", "sockets"), [("shared", 1), ("reuseport", 3)])
def test_the_processes_are_forked_and_share_the_port_as_the_listen_mode_says(
    tornado: ServerAdapter, tmp_path: Path, mode: str, sockets: int
) -> None:
    values = {"processes": 3, "listen_mode": mode}
    with running(tornado, values=values, log_path=tmp_path / "t.log") as server:
        pids = wait_for_pids(server, 4)
        assert len(pids) == 4  # the parent of fork_processes + 3 serving children
        assert all(psutil.Process(pid).ppid() == server.pid for pid in pids[1:])
        deadline = time.monotonic() + 30  # a safety bound, not the premise
        while listening_sockets(server.port) < sockets and time.monotonic() < deadline:
            time.sleep(0.05)
        assert listening_sockets(server.port) == sockets


def test_the_children_die_with_the_launcher(tornado: ServerAdapter, tmp_path: Path) -> None:
    with running(tornado, values={"processes": 2}, log_path=tmp_path / "t.log") as server:
        children = wait_for_pids(server, 3)[1:]
        assert len(children) == 2
        os.kill(server.pid, signal.SIGKILL)
        assert not wait_gone(children)


def _concurrent_gets(port: int, count: int) -> float:
    """`count` requests sent at once; seconds until the last answer."""
    started = time.monotonic()
    with ThreadPoolExecutor(count) as pool:
        answers = list(
            pool.map(lambda i: httpx.get(f"http://{HOST}:{port}/{i}", timeout=30), range(count))
        )
    assert all(answer.status_code == 200 for answer in answers)
    return time.monotonic() - started


def test_the_executor_runs_the_app_on_its_threads(tornado: ServerAdapter, tmp_path: Path) -> None:
    """16 waits at once on a pool of 4: the pool grows to its 4 threads and no more, beside the
    I/O loop's thread."""
    values = {"threads": 4}
    with running(tornado, IOWAIT, values, log_path=tmp_path / "t.log") as server:
        _concurrent_gets(server.port, 16)
        assert psutil.Process(server.pid).num_threads() == 1 + 4


def test_without_an_executor_the_app_runs_on_the_loop_one_at_a_time(
    tornado: ServerAdapter, tmp_path: Path
) -> None:
    """Tornado's default: one thread, and 8 waits of 50 ms at once take at least 8 x 50 ms."""
    with running(tornado, IOWAIT, log_path=tmp_path / "t.log") as server:
        took = _concurrent_gets(server.port, 8)
        assert psutil.Process(server.pid).num_threads() == 1
    assert took >= 8 * 0.05


@pytest.mark.parametrize("access_log", [True, False])
def test_access_log_follows_the_setting(
    tornado: ServerAdapter, access_log: bool, tmp_path: Path
) -> None:
    values = {"access_log": access_log}
    with running(tornado, values=values, log_path=tmp_path / "t.log") as server:
        assert httpx.get(f"http://{HOST}:{server.port}/logged-or-not").is_success
    assert ("GET /logged-or-not" in (tmp_path / "t.log").read_text()) is access_log


@pytest.mark.parametrize("no_keep_alive", [True, False])
def test_no_keep_alive_closes_each_connection(
    tornado: ServerAdapter, no_keep_alive: bool, tmp_path: Path
) -> None:
    values = {"no_keep_alive": no_keep_alive}
    with running(tornado, values=values, log_path=tmp_path / "t.log") as server:
        answer = httpx.get(f"http://{HOST}:{server.port}/")
    assert (answer.headers.get("connection") == "close") is no_keep_alive


def test_compare_all_includes_it(tornado: ServerAdapter) -> None:
    from tuner.commands.compare import parse_servers

    assert "tornado" in parse_servers("all")
