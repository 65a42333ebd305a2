"""A file sized at boot, booted in a real cgroup (v1 here, as the tuner makes them): it starts the
counts its rule gives for the CPU quota it finds, and fewer under a memory limit too low for
them, without being OOM-killed under load."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests.conftest import HOST, ROOT, SERVER_CPU
from tuner.apps import parse_app
from tuner.files import atomic_write
from tuner.loadgen import LoadSpec, Workload, run_load
from tuner.machine.limits import Limits
from tuner.machine.sizing import SizePoint, SizingRule, fit_rule
from tuner.procs.process import ServerProcess, free_port
from tuner.servers.base import Bind, ServerAdapter
from tuner.settings import Value

pytestmark = pytest.mark.usefixtures("real_servers")

MB = 2**20
LOAD_CPUS = tuple(sorted(os.sched_getaffinity(0) - {SERVER_CPU}))


def rule(env: str) -> SizingRule:
    """2 processes at 0.5 CPU, 4 at 1: 4 x CPUs; a 40M master and 40M per process."""
    return fit_rule([SizePoint(0.5, 2, 1), SizePoint(1.0, 4, 1)], [(2, 120.0), (4, 200.0)], env)


def boot(
    adapter: ServerAdapter, sizing: SizingRule, limits: Limits, tmp_path: Path
) -> tuple[int, str, int]:
    """Boot the sized file under `limits`; (worker processes once all have booted, the server's
    `sizing:` line, OOM kills after a short load)."""
    app = parse_app("apps.hello:app", cwd=ROOT)
    port = free_port(HOST)
    bind = Bind.tcp(HOST, port)
    # uWSGI without its master runs the first worker itself: with it, every worker is a child.
    values: dict[str, Value] = {"master": True} if "master" in adapter.table.by_name else {}
    files = adapter.render_sized(app, bind, values, sizing, header="test")
    for artifact in files:
        atomic_write(tmp_path / artifact.filename, artifact.text.encode(), artifact.mode)
    spec = adapter.sized_launch(tmp_path / files[0].filename, app, bind, values)
    log = tmp_path / "server.log"
    with ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=log, host=HOST, port=port, limits=limits
    ) as server:
        line = wait_for_line(log, "sizing: found")
        chose = int(re.search(r"chose (\d+) process", line).group(1))  # type: ignore[union-attr]
        workers = wait_for_workers(server, chose)
        run_load(
            LoadSpec(
                host=HOST,
                port=port,
                workload=Workload.single("/"),
                connections=8,
                warmup_s=0.2,
                duration_s=1.0,
                load_cpus=LOAD_CPUS,
                timeout_s=2.0,
            )
        )
        after = len(server.pids()) - 1  # none more started, none died, under the load
    assert server.final_usage is not None
    assert after == workers, f"{workers} workers at boot, {after} after the load"
    return workers, line, server.final_usage.oom_kills


def wait_for_line(log: Path, text: str, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if text in line:
                return line[line.index(text) :]
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} line in {log}: {log.read_text(errors='replace')[-500:]}")


def wait_for_workers(server: ServerProcess, expected: int, timeout_s: float = 30.0) -> int:
    """Worker processes (the master's descendants) once `expected` have started, or however
    many there are at the deadline: a count that never reaches it fails the test."""
    deadline = time.monotonic() + timeout_s
    while len(server.pids()) - 1 < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(server.pids()) - 1


@pytest.mark.parametrize("cpus", [0.5, 1.0])
def test_the_file_starts_the_count_the_rule_gives_for_the_quota(
    adapter: ServerAdapter, tmp_path: Path, cpus: float
) -> None:
    sizing = rule(str(adapter.sizing_env))
    expected, _ = sizing.counts(cpus)
    workers, line, oom = boot(adapter, sizing, Limits(cpus), tmp_path)
    assert workers == expected, line
    assert f"found {cpus:g} CPUs (cgroup v1 " in line and "cpu.cfs_quota_us" in line
    assert f"chose {expected} process" in line and oom == 0


def test_the_file_starts_fewer_under_a_memory_limit_and_is_not_killed(
    adapter: ServerAdapter, tmp_path: Path
) -> None:
    sizing = rule(str(adapter.sizing_env))
    memory = 160 * MB  # 80% of it, less the 40M master, holds two 40M processes, not four
    expected, _ = sizing.counts(1.0, memory)
    assert expected < sizing.counts(1.0)[0]
    workers, line, oom = boot(adapter, sizing, Limits(1.0, memory), tmp_path)
    assert workers == expected, line
    assert "160M memory (cgroup v1 " in line and f"memory fits {expected}" in line
    assert oom == 0
