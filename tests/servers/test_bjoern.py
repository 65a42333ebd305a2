"""bjoern-specific behaviour: the launcher the adapter writes forks the bjoern processes, so it
must share the port as its listen mode says, and no process may outlive another's death."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import HOST, SERVER_CPU, require_adapter, wait_for_pids
from tests.support.cli import REPO
from tuner.apps import parse_app
from tuner.errors import ConfigError
from tuner.procs.process import ServerProcess, free_port
from tuner.servers import get_adapter
from tuner.servers.base import Bind, ServerAdapter

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")


@pytest.fixture
def bjoern() -> ServerAdapter:
    return require_adapter("bjoern")


def start(adapter: ServerAdapter, tmp_path: Path, **values: object) -> ServerProcess:
    port = free_port()
    spec = adapter.launch(
        parse_app("apps/hello.py", cwd=REPO), Bind.tcp(HOST, port), values, tmp_path
    )
    return ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=tmp_path / "b.log", host=HOST, port=port
    )


def listening_sockets(port: int) -> int:
    """Listening TCP sockets on `port` (an inherited socket counts once, its own each)."""
    count = 0
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            count += state == "0A" and int(local.split(":")[1], 16) == port
    return count


def wait_gone(pids: list[int], timeout_s: float = 30.0) -> list[int]:
    """The pids still running (not zombies) after up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [pid for pid in pids if _running(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize(("mode", "sockets"), [("shared", 1), ("reuseport", 3)])
def test_the_processes_share_the_port_as_the_listen_mode_says(
    bjoern: ServerAdapter, tmp_path: Path, mode: str, sockets: int
) -> None:
    with start(bjoern, tmp_path, processes=3, listen_mode=mode) as server:
        assert len(wait_for_pids(server, 4)) == 4  # the launcher + 3 bjoern processes
        deadline = time.monotonic() + 30  # a safety bound, not the premise
        while listening_sockets(server.port) < sockets and time.monotonic() < deadline:
            time.sleep(0.05)
        assert listening_sockets(server.port) == sockets


def test_one_process_is_bjoern_alone(bjoern: ServerAdapter, tmp_path: Path) -> None:
    with start(bjoern, tmp_path) as server:
        assert server.pids() == [server.pid]


def test_the_bjoern_processes_die_with_the_launcher(bjoern: ServerAdapter, tmp_path: Path) -> None:
    with start(bjoern, tmp_path, processes=2) as server:
        children = wait_for_pids(server, 3)[1:]
        os.kill(server.pid, signal.SIGKILL)
        assert not wait_gone(children)


def test_a_bjoern_process_that_dies_stops_the_launcher(
    bjoern: ServerAdapter, tmp_path: Path
) -> None:
    with start(bjoern, tmp_path, processes=3) as server:
        children = wait_for_pids(server, 4)[1:]
        os.kill(children[0], signal.SIGKILL)
        deadline = time.monotonic() + 30  # a safety bound, not the premise
        while server.returncode is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.returncode == 1
        assert "stopping all" in server.log_tail()
        assert not wait_gone(children[1:])


def test_an_ipv6_address_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="IPv4 only"):
        get_adapter("bjoern").launch(
            parse_app("apps/hello.py", cwd=REPO), Bind.tcp("::1", 8000), {}, REPO
        )


def test_a_relative_workdir_still_finds_the_launcher(
    bjoern: ServerAdapter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `tuner tune` passes studies/NAME/trials/N, relative to where it runs; bjoern runs in
    # the app's folder. The trial's folder is its log's, which exists by then.
    monkeypatch.chdir(tmp_path)
    port = free_port()
    app = parse_app("apps/hello.py", cwd=REPO)
    spec = bjoern.launch(app, Bind.tcp(HOST, port), {}, Path("trials/0"))
    with ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=Path("trials/0/b.log"), host=HOST, port=port
    ):
        pass
