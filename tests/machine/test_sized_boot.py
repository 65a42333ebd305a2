"""A file sized at boot, booted in a real cgroup (v1 here, as the tuner makes them): it starts the
counts its rule gives for the CPU quota it finds, and fewer under a memory limit too low for
them, without being OOM-killed under load."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import psutil
import pytest

from tests.conftest import HOST, ROOT, SERVER_CPU, require_adapter
from tuner.apps import Interface, parse_app
from tuner.files import atomic_write
from tuner.loadgen import LoadSpec, Workload, run_load
from tuner.machine.limits import Limits
from tuner.machine.sizing import SizePoint, SizingRule, fit_rule
from tuner.procs.process import ServerProcess, free_port
from tuner.servers import get_adapter
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


# --- the other servers that write sized files ---------------------------------------------
# Each with the app it serves and how its tree shows its worker processes: a pre-forking
# master's children are its workers; uvicorn's and hypercorn's are spawned (spawn_main on
# their command line; multiprocessing's resource tracker beside them is not one); mod_wsgi's
# daemon processes rename themselves (wsgi:HOST:PORT:UID) beside Apache's MPM children. A
# one-process server scales its threads: it starts them all at boot (waitress, cheroot).


def children(pids: list[int]) -> int:
    return len(pids) - 1


def marked(text: str, *, first: bool = False) -> Callable[[list[int]], int]:
    """The processes of the tree (the root excepted) whose command line holds `text` (or
    starts with it): a worker that died between the listing and the look is not counted."""

    def count(pids: list[int]) -> int:
        found = 0
        for pid in pids[1:]:
            try:
                line = " ".join(psutil.Process(pid).cmdline())
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
            found += line.startswith(text) if first else text in line
        return found

    return count


@dataclass(frozen=True)
class Sized:
    name: str
    interface: Interface
    workers: Callable[[list[int]], int] | None  # None: one process, its threads scale

    def __str__(self) -> str:
        return f"{self.name}-{self.interface.value}"


SIZED_SERVERS = [
    Sized("hypercorn", Interface.ASGI, marked("spawn_main")),
    Sized("uvicorn", Interface.ASGI, marked("spawn_main")),
    Sized("gunicorn", Interface.ASGI, children),
    Sized("granian", Interface.WSGI, children),
    Sized("granian", Interface.ASGI, children),
    Sized("mod_wsgi", Interface.WSGI, marked("(wsgi:", first=True)),
    Sized("bjoern", Interface.WSGI, children),
    Sized("waitress", Interface.WSGI, None),
    Sized("cheroot", Interface.WSGI, None),
]
FORKING = [server for server in SIZED_SERVERS if server.workers is not None]


def sized_rule(server: Sized, env: str) -> SizingRule:
    """rule() for a forking server; for a one-process one, 4 threads at 0.5 CPU and 8 at 1."""
    if server.workers is not None:
        return rule(env)
    return fit_rule([SizePoint(0.5, 1, 4), SizePoint(1.0, 1, 8)], [(1, 60.0)], env)


def boot_sized(
    server: Sized, sizing: SizingRule, limits: Limits, tmp_path: Path
) -> tuple[int, str, int]:
    """Boot `server`'s sized files under `limits`: (its worker processes once all have
    booted, or its threads for a one-process server; its `sizing:` line; OOM kills after a
    short load)."""
    adapter = require_adapter(server.name).serving(server.interface)
    spec_text = "apps.asgi_hello:app" if server.interface is Interface.ASGI else "apps.hello:app"
    app = replace(parse_app(spec_text, cwd=ROOT), interface=server.interface)
    port = free_port(HOST)
    bind = Bind.tcp(HOST, port)
    files = adapter.render_sized(app, bind, {}, sizing, header="test")
    for artifact in files:
        atomic_write(tmp_path / artifact.filename, artifact.text.encode(), artifact.mode)
    spec = adapter.sized_launch(tmp_path / files[0].filename, app, bind, {})
    log = tmp_path / "server.log"
    with ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=log, host=HOST, port=port, limits=limits
    ) as running:
        line = wait_for_line(log, "sizing: found")
        chose = re.search(r"chose (\d+) process\w* x (\d+) thread", line)
        assert chose is not None, line
        if server.workers is None:
            expected, count = int(chose.group(2)), thread_count
        else:
            expected, count = int(chose.group(1)), server.workers
        seen = wait_for_count(running, count, expected)
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
        after = count(running.pids())  # none more started, none died, under the load
    assert running.final_usage is not None
    if server.workers is not None:
        assert after == seen, f"{seen} workers at boot, {after} after the load"
    return seen, line, running.final_usage.oom_kills


def thread_count(pids: list[int]) -> int:
    """The threads of a one-process server that run requests: all its threads but the main
    one (waitress and cheroot start their pool at boot)."""
    return psutil.Process(pids[0]).num_threads() - 1 if pids else 0


def wait_for_count(
    server: ServerProcess, count: Callable[[list[int]], int], expected: int, timeout_s: float = 30.0
) -> int:
    """`count` of the server's tree once it reaches `expected`, or at the deadline: a count
    that never reaches it fails the test."""
    deadline = time.monotonic() + timeout_s
    while count(server.pids()) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return count(server.pids())


@pytest.mark.parametrize("server", SIZED_SERVERS, ids=str)
@pytest.mark.parametrize("cpus", [0.5, 1.0])
def test_each_server_s_sized_files_start_the_counts_the_rule_gives(
    server: Sized, tmp_path: Path, cpus: float
) -> None:
    env = str(get_adapter(server.name).sizing_env)
    sizing = sized_rule(server, env)
    processes, threads = sizing.counts(cpus)
    seen, line, oom = boot_sized(server, sizing, Limits(cpus), tmp_path)
    assert f"found {cpus:g} CPUs (cgroup v1 " in line and "cpu.cfs_quota_us" in line
    if server.workers is None:
        # The pool holds the rule's threads; a server may run a helper thread or two beside it.
        assert f"chose 1 process x {threads} threads" in line
        assert threads <= seen <= threads + 2, line
    else:
        assert f"chose {processes} process" in line and seen == processes, line
    assert oom == 0


@pytest.mark.parametrize("server", FORKING, ids=str)
def test_each_server_starts_fewer_under_a_memory_limit_and_is_not_killed(
    server: Sized, tmp_path: Path
) -> None:
    sizing = sized_rule(server, str(get_adapter(server.name).sizing_env))
    memory = 160 * MB  # 80% of it, less the 40M master, holds two 40M processes, not four
    expected, _ = sizing.counts(1.0, memory)
    assert expected < sizing.counts(1.0)[0]
    seen, line, oom = boot_sized(server, sizing, Limits(1.0, memory), tmp_path)
    assert seen == expected, line
    assert "160M memory (cgroup v1 " in line and f"memory fits {expected}" in line
    assert oom == 0
