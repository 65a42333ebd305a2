"""nginx shares the box with the server: its memory counts with the server's.

Real gunicorn and real nginx; in CI a missing nginx fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import HOST, ROOT, SERVER_CPU, require_adapter, unavailable, wait_for_pids
from tuner.apps import parse_app
from tuner.errors import ToolMissingError
from tuner.front import behind
from tuner.front.trial import running_front
from tuner.measure.process import ServerProcess, free_port
from tuner.metrics.measurement import Memory
from tuner.metrics.memory import MemorySampler
from tuner.servers.base import ServerAdapter

CPUS = (SERVER_CPU,)


@pytest.fixture
def fronted(since: float) -> ServerAdapter:
    """gunicorn behind nginx (both installed: a failure in CI, a skip elsewhere)."""
    from tuner.front import nginx

    require_adapter("gunicorn")
    try:
        nginx.executable()
    except ToolMissingError as exc:
        unavailable(str(exc))
    return behind(require_adapter("gunicorn"), "nginx")


def start(adapter: ServerAdapter, values: dict, tmp_path: Path) -> ServerProcess:
    port = free_port(HOST)
    app = parse_app("apps.hello:app", cwd=ROOT)
    spec = adapter.launch_spec(app, HOST, port, adapter.resolve(values), tmp_path)
    return ServerProcess.start(
        spec, cpus=CPUS, log_path=tmp_path / "server.log", host=HOST, port=port
    )


@pytest.fixture
def fronted_pair(fronted: ServerAdapter, tmp_path: Path) -> Iterator[tuple]:
    values = fronted.resolve({"workers": 2, "front_transport": "unix"})
    with start(fronted, values, tmp_path) as server:
        wait_for_pids(server, 3)  # master + 2 workers
        with running_front(
            server,
            values,
            cpus=CPUS,
            log_path=tmp_path / "server.log",
            ready_path="/",
            ready_timeout_s=30,
        ) as front:
            yield server, front


def test_memory_behind_nginx_includes_nginx(fronted_pair: tuple) -> None:
    server, front = fronted_pair
    nginx_pids = front.pids()
    assert len(nginx_pids) >= 2  # master + one worker per server CPU
    alone, both = MemorySampler(server.pids), MemorySampler(server.pids, front_pids_fn=front.pids)
    alone.sample()
    both.sample()
    alone_mb, both_mb = alone.summary(), both.summary()
    assert "front_pss_mean" not in alone_mb
    assert both_mb["front_pss_mean"] > 0
    assert both_mb["pss_mean"] > alone_mb["pss_mean"]
    # Both trees sampled in one figure: nginx's pids are summed with the server's.
    assert both_mb["processes_peak"] == alone_mb["processes_peak"] + len(nginx_pids)
    # The server's part is what it was alone (PSS moves a little between two samples).
    server_part = both_mb["pss_mean"] - both_mb["front_pss_mean"]
    assert abs(server_part - alone_mb["pss_mean"]) < 0.1 * alone_mb["pss_mean"]


def test_memory_keeps_nginx_part_through_json() -> None:
    both = Memory(50.0, 60.0, 40.0, 70.0, 4, 5, front_pss_mean_mb=8.0)
    assert Memory.from_json(json.loads(json.dumps(both.to_json()))) == both
    assert both.server_pss_mean_mb == 42.0
    alone = Memory(50.0, 60.0, 40.0, 70.0, 4, 5)  # no front: no nginx part, as before
    assert "front_pss_mean" not in alone.to_json() and Memory.from_json(alone.to_json()) == alone
    assert alone.server_pss_mean_mb == 50.0
