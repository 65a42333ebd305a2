"""nginx shares the box with the server: its memory counts, and it runs inside the CPU quota.

Real gunicorn, real nginx and (for the quota) a real cgroup; in CI a missing nginx fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import HOST, ROOT, SERVER_CPU, require_adapter, unavailable, wait_for_pids
from tests.support.cli import run_tuner
from tuner.apps import parse_app
from tuner.errors import ConfigError, ToolMissingError
from tuner.front import behind
from tuner.front.trial import running_front
from tuner.machine.limits import Limits
from tuner.metrics.measurement import Memory
from tuner.metrics.memory import MemorySampler
from tuner.procs.process import ServerProcess, free_port
from tuner.servers.base import Bind, ServerAdapter

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


def start(
    adapter: ServerAdapter, values: dict, tmp_path: Path, limits: Limits | None = None
) -> ServerProcess:
    port = free_port(HOST)
    app = parse_app("apps.hello:app", cwd=ROOT)
    spec = adapter.launch(app, Bind.tcp(HOST, port), adapter.resolve(values), tmp_path)
    return ServerProcess.start(
        spec, cpus=CPUS, log_path=tmp_path / "server.log", host=HOST, port=port, limits=limits
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
    assert alone.workers_pss_mean_mb is None  # no breakdown kept: none invented


def test_memory_keeps_the_server_trees_breakdown_through_json() -> None:
    split = Memory(50.0, 60.0, 40.0, 70.0, 4, 5, 8.0, 12.0, 30.0, 4)
    assert Memory.from_json(json.loads(json.dumps(split.to_json()))) == split
    assert split.workers_pss_mean_mb == 30.0  # 50 - 8 (nginx) - 12 (the master)
    one = Memory(20.0, 20.0, 18.0, 25.0, 4, 1, master_pss_mean_mb=20.0, server_processes=1)
    assert one.workers_pss_mean_mb == 0.0  # one process: no workers apart from it


def test_nginx_joins_the_servers_cgroup(fronted: ServerAdapter, tmp_path: Path) -> None:
    values = fronted.resolve({"workers": 2})
    try:
        server = start(fronted, values, tmp_path, limits=Limits(0.5))
    except ConfigError as exc:  # no writable cgroup here (not root)
        unavailable(str(exc))
    with server:
        assert server.cgroup is not None
        folders = [Path(f) for f in server.cgroup.folders]
        wait_for_pids(server, 3)
        with running_front(
            server, values, cpus=CPUS, log_path=tmp_path / "server.log", ready_path="/",
            ready_timeout_s=30,
        ) as front:  # fmt: skip
            nginx_pids = front.pids()
            assert front.cgroup is None  # joined, not owned: the server's tree removes it
            for folder in folders:  # every hierarchy (v1: cpu and memory; v2: one)
                procs = {int(pid) for pid in (folder / "cgroup.procs").read_text().split()}
                assert set(nginx_pids) <= procs, (folder, nginx_pids, procs)
                assert set(server.pids()) <= procs
        # nginx stopped, the server still runs in its cgroup
        procs = {int(p) for p in (folders[0] / "cgroup.procs").read_text().split()}
        assert not set(nginx_pids) & procs and server.pid in procs
    assert not any(folder.exists() for folder in folders)


def test_bench_behind_nginx_under_a_cpu_limit_reports_both(fronted: ServerAdapter) -> None:
    done = run_tuner(
        "bench", "apps/hello.py", "--server", "gunicorn", "--front", "nginx", "--cpu-limit",
        "0.5", "--duration", "1", "--warmup", "0.3", "--connections", "8", "--json",
    )  # fmt: skip
    if "writable cgroup" in done.stderr:
        unavailable(done.stderr.strip())
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    memory = result["memory_mb"]
    assert 0 < memory["front_pss_mean"] < memory["pss_mean"]
    assert result["limits"]["cpus"] == 0.5 and "throttled_fraction" in result["cgroup"]
