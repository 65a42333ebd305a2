"""daphne: what is its own (the contract suite covers the generic behaviour, including the
written launcher booted in a clean venv): one process, the access log on by default and off
only at verbosity 0, and the backlog reaching the listening socket through the endpoint
string."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from tests.conftest import HOST, ROOT, SERVER_CPU, require_adapter, unavailable
from tuner.apps import Interface, parse_app
from tuner.procs.process import ServerProcess, free_port
from tuner.servers.base import Bind, ServerAdapter

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")


@pytest.fixture
def daphne() -> ServerAdapter:
    return require_adapter("daphne")


def start(adapter: ServerAdapter, values: dict[str, object], tmp_path: Path) -> ServerProcess:
    app = replace(parse_app("apps/asgi_hello.py", cwd=ROOT), interface=Interface.ASGI)
    port = free_port(HOST)
    spec = adapter.launch(app, Bind.tcp(HOST, port), values, tmp_path)
    return ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=tmp_path / "d.log", host=HOST, port=port
    )


def test_one_process_and_its_defaults(daphne: ServerAdapter, tmp_path: Path) -> None:
    assert daphne.baselines(2)[0].values == {"backlog": 50, "access_log": True}
    assert len(daphne.baselines(2)) == 1  # no workers: no 2*cpus+1 rule
    with start(daphne, {}, tmp_path) as server:
        assert server.pids() == [server.pid]


@pytest.mark.parametrize("access_log", [True, False])
def test_access_log_follows_the_setting(
    daphne: ServerAdapter, access_log: bool, tmp_path: Path
) -> None:
    with start(daphne, {"access_log": access_log}, tmp_path) as server:
        assert httpx.get(f"http://{HOST}:{server.port}/logged-or-not").is_success
    assert ('"GET /logged-or-not"' in (tmp_path / "d.log").read_text()) is access_log


@pytest.mark.parametrize("backlog", [50, 77])
def test_the_backlog_reaches_the_listening_socket(
    daphne: ServerAdapter, backlog: int, tmp_path: Path
) -> None:
    if shutil.which("ss") is None:
        unavailable("ss (iproute2) is not installed; it shows a listening socket's backlog")
    with start(daphne, {"backlog": backlog}, tmp_path) as server:
        # For a listening socket, ss's Send-Q column is the backlog it was given.
        done = subprocess.run(
            ["ss", "-Hltn", f"sport = :{server.port}"], capture_output=True, text=True, check=True
        )
    (line,) = done.stdout.strip().splitlines()
    assert int(line.split()[2]) == backlog
