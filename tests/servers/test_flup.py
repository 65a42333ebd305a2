"""flup: what only its launcher does (the contract suite covers the rest, through nginx).

flup's prefork server gives each child a process group of its own and, on Python 3, its
master never sees SIGTERM while idle; the launcher puts children back in the server's group,
stops at once, and makes children die with the master. The server is started here without
nginx: readiness is a FastCGI request, as nginx would send it.
"""

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
from tuner.errors import ConfigError, ToolMissingError
from tuner.procs.process import ServerProcess, free_port
from tuner.servers import get_adapter
from tuner.servers.base import Bind, Protocol, ServerAdapter

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")

HELLO = parse_app("apps/hello.py", cwd=REPO)


@pytest.fixture
def flup(real_servers: None) -> ServerAdapter:
    return require_adapter("flup")


def start(adapter: ServerAdapter, tmp_path: Path, **values: object) -> ServerProcess:
    port = free_port()
    spec = adapter.launch(HELLO, Bind.tcp(HOST, port, Protocol.FASTCGI), values, tmp_path)
    return ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=tmp_path / "flup.log", host=HOST, port=port
    )


@pytest.mark.parametrize("mode", ["threaded", "prefork"])
def test_sigterm_stops_it_at_once(flup: ServerAdapter, tmp_path: Path, mode: str) -> None:
    """flup's own handler would leave an idle prefork master blocked in select() (Python 3
    restarts it after the handler), until the grace period's SIGKILL."""
    server = start(flup, tmp_path, mode=mode, max_spare=3)
    pids = wait_for_pids(server, 4 if mode == "prefork" else 1)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < server.spec.stop_grace_s / 2
    assert not [pid for pid in pids if psutil.pid_exists(pid) and _alive(pid)]


def test_prefork_children_stay_in_the_servers_group(flup: ServerAdapter, tmp_path: Path) -> None:
    with start(flup, tmp_path, mode="prefork", max_spare=3, max_children=10) as server:
        pids = wait_for_pids(server, 4)
        # On Python 3 flup forks exactly max_spare children, whatever max_children says.
        assert len(pids) == 4
        assert {os.getpgid(pid) for pid in pids} == {os.getpgid(server.pid)}


def test_prefork_children_die_with_the_master(flup: ServerAdapter, tmp_path: Path) -> None:
    with start(flup, tmp_path, mode="prefork", max_spare=2) as server:
        children = [psutil.Process(pid) for pid in wait_for_pids(server, 3) if pid != server.pid]
        assert len(children) == 2
        os.kill(server.pid, signal.SIGKILL)  # no handler runs: the kernel's death signal must
        _, alive = psutil.wait_procs(children, timeout=30)  # a safety bound, not the premise
        assert not alive


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# --- pure logic -----------------------------------------------------------------------------


def test_it_binds_fastcgi_only() -> None:
    adapter = get_adapter("flup")
    assert adapter.needs_front()
    with pytest.raises(ConfigError, match="cannot listen for http over tcp"):
        adapter.check_bind(Bind.tcp(HOST, 8000))


def test_the_launcher_binds_the_unix_socket_it_is_given() -> None:
    adapter = get_adapter("flup")
    socket = Bind.unix("/run/flup/flup.sock", Protocol.FASTCGI)
    text = adapter.render_artifact(HELLO, socket, {}).text
    assert "SOCKET = '/run/flup/flup.sock'" in text and "bindAddress=SOCKET or (HOST, PORT)" in text
    over_tcp = Bind.tcp(HOST, 8000, Protocol.FASTCGI)
    tcp = adapter.render_artifact(HELLO, over_tcp, {"mode": "prefork"}).text
    assert "SOCKET = None" in tcp and "PORT = 8000" in tcp and "MODE = 'prefork'" in tcp
    compile(tcp, adapter.artifact_filename, "exec")


def test_min_spare_above_max_spare_is_refused() -> None:
    with pytest.raises(ConfigError, match="min_spare=6 above max_spare=5"):
        get_adapter("flup").resolve({"min_spare": 6})


def test_the_fork_rule_is_prefork_with_that_many_children() -> None:
    adapter = get_adapter("flup")
    default, rule = adapter.baselines(2)
    assert adapter.processes(default.values) == 1 and default.values["mode"] == "threaded"
    assert rule.values["mode"] == "prefork" and adapter.processes(rule.values) == 5


def test_a_missing_flup_is_one_line_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """find_spec of a submodule raises when its package is absent, instead of saying None."""
    from tuner.servers.flup import FlupAdapter

    monkeypatch.setattr(FlupAdapter, "module", "no_such_flup.server.fcgi")
    with pytest.raises(ToolMissingError, match="pip install flup"):
        get_adapter("flup").check_installed()
