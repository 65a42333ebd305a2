"""One measurement: start the server with a config, wait until it answers, load it, stop it.

The runner knows no Optuna and prints nothing: callers pass `on_window` to watch progress
(and to stop early), and `on_phase` to show what is happening.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tuner import __version__
from tuner.apps import AppRef
from tuner.errors import OutOfMemory, PortInUseError, ServerCrashed
from tuner.front import front_of, nginx
from tuner.front.trial import running_front
from tuner.loadgen import LoadSpec, WindowStats, run_load
from tuner.logsigns import LogWindow, cut_signs_seen, load_sign_lines
from tuner.machine.cpus import cpu_model, pinned
from tuner.machine.limits import Limits, Usage
from tuner.metrics.cores import CoresClock
from tuner.metrics.cpu import TreeCpuClock
from tuner.metrics.lanes import ServerCause, StreamFigures
from tuner.metrics.loops import LoopSampler, cmdline
from tuner.metrics.measurement import Measurement, Memory
from tuner.metrics.memory import MemorySampler
from tuner.procs.process import LOOPBACK, ServerProcess, free_port, key_line
from tuner.servers.base import Bind, ServerAdapter
from tuner.settings import Value

PORT_ATTEMPTS = 3


@dataclass(frozen=True)
class BenchPlan:
    """Everything one measurement needs; `load.port` is filled in once the server has one."""

    adapter: ServerAdapter
    app: AppRef
    settings: Mapping[str, Value]
    load: LoadSpec
    server_cpus: tuple[int, ...]
    log_path: Path
    ready_path: str = "/"
    ready_timeout_s: float = 60.0
    # Container limits for the server's tree (a cgroup per trial); empty = none.
    limits: Limits = Limits()


@dataclass(frozen=True)
class BenchResult:
    """One measurement (the load generator's figures plus the server's memory and startup),
    the settings measured, and where and with what (`run_context`)."""

    measurement: Measurement
    settings: dict[str, Value]
    context: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """`tuner bench --json`: the measurement's keys, `settings` and the context's keys."""
        return {**self.measurement.to_json(), "settings": self.settings, **self.context}


def run_bench(
    plan: BenchPlan,
    *,
    on_window: Callable[[WindowStats], bool] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> BenchResult:
    """Measure one config. Raises a TrialError subclass when the config itself fails."""
    phase = on_phase or (lambda _name: None)
    plan.adapter.check_installed()
    plan.log_path.parent.mkdir(parents=True, exist_ok=True)
    phase("starting")
    with start_server(plan) as server, _start_front(plan, server) as front:
        phase("measuring")
        # The tuner's own thread (and the memory sampler it starts) stays off the server's
        # CPUs while measuring; memory is sampled over warm-up and measurement.
        target = front.port if front is not None else server.port
        # nginx shares the server's CPUs and box, so its CPU time and its memory count with
        # the server's (its memory also apart, as the measurement's front_pss_mean).
        cpus = plan.limits.effective_cpus(len(plan.server_cpus))
        with (
            pinned(plan.load.load_cpus),
            MemorySampler(server.pids, front_pids_fn=front.pids if front else None) as memory,
            TreeCpuClock(lambda: server.pids() + (front.pids() if front else []), cpus) as cpu,
            CoresClock(plan.server_cpus, plan.load.load_cpus) as cores,
            _watch_loops(plan, server) as loops,
        ):
            # The server's log over the measurement window: why it cut streams, if it did.
            window = LogWindow(plan.log_path)
            load = run_load(replace(plan.load, host=LOOPBACK, port=target), on_window, window.begin)
            window.end()
        _check_front(plan, front)
        usage = server.cgroup.usage() if server.cgroup else None
        if usage is not None and usage.oom_kills:
            raise OutOfMemory(
                f"{plan.adapter.name} was OOM-killed during the measurement "
                f"({usage.oom_kills} process(es) killed under {plan.limits.describe()}; peak "
                f"{usage.memory_peak_bytes / 2**20:.0f} MB)"
            )
        if not server.alive():
            tail = server.log_tail()
            reason = key_line(tail, server.spec.signs)
            raise ServerCrashed(
                f"{plan.adapter.name} died during the measurement: {reason} "
                f"(log: {plan.log_path})\nlast log lines:\n{tail}"
            )
        phase("stopping")
        startup_s = server.startup_s
        load_signs = server.spec.load_signs
    return BenchResult(
        measurement=replace(
            load,
            memory=Memory.from_json(memory.summary()),
            startup_s=startup_s,
            server_log=load_sign_lines(plan.log_path, load_signs),
            streams=_said_why(load.streams, plan, window),
            server_cpu=cpu.result(),
            cores=cores.result(cpu.cpu_seconds, cpu.waited),
            **_blocked(load, loops),
        ),
        settings=dict(plan.settings),
        context={**run_context(plan), **limits_context(plan.limits, usage)},
    )


def _said_why(
    streams: StreamFigures | None, plan: BenchPlan, window: LogWindow
) -> StreamFigures | None:
    """The streams, with what the server's log said over the window where some were cut."""
    if streams is None or not streams.cut:
        return streams
    signs = plan.adapter.cut_signs(plan.settings)
    seen = cut_signs_seen(plan.log_path, signs, window.start, window.stop)
    said = tuple(ServerCause(sign.cause, count, sign.explanation) for sign, count in seen)
    return replace(streams, server_causes=said)


def _watch_loops(
    plan: BenchPlan, server: ServerProcess
) -> contextlib.AbstractContextManager[LoopSampler | None]:
    """Samples what the server's event loops sleep in, where the server runs the app on one
    (its adapter says which processes); nothing otherwise."""
    where = plan.adapter.event_loops(plan.settings)
    if where is None:
        return contextlib.nullcontext()
    return LoopSampler(lambda: where.pick(server.pids(), cmdline))


def _blocked(load: Measurement, loops: LoopSampler | None) -> dict[str, Any]:
    """The blocked loop and its note, when the app blocked one (a note, not a reason to
    reject the config: it is the app's defect, and every config of the server shares it)."""
    blocked = loops.result() if loops is not None else None
    if blocked is None:
        return {}
    return {"blocked_loop": blocked, "notes": (*load.notes, "blocked_loop: " + blocked.describe())}


def limits_context(limits: Limits, usage: Usage | None) -> dict[str, Any]:
    """The container limits a figure was measured under, and what the kernel counted."""
    if not limits:
        return {}
    measured: dict[str, Any] = {"limits": limits.to_dict()}
    if usage is not None:
        measured["cgroup"] = {
            "throttled_fraction": round(usage.throttled_fraction, 4),
            "throttled_s": round(usage.throttled_s, 3),
            "memory_peak_mb": round(usage.memory_peak_bytes / 2**20, 2),
        }
    return measured


def start_server(plan: BenchPlan) -> ServerProcess:
    """Start the server on a free port, on another one if a process took it meanwhile (the
    port is free when chosen, but anyone may bind it before the server does)."""
    for attempt in range(PORT_ATTEMPTS):
        port = free_port(LOOPBACK)
        spec = plan.adapter.launch(
            plan.app, Bind.tcp(LOOPBACK, port), plan.settings, plan.log_path.parent.resolve()
        )
        try:
            return ServerProcess.start(
                spec,
                cpus=plan.server_cpus,
                log_path=plan.log_path,
                host=LOOPBACK,
                port=port,
                ready_path=plan.ready_path,
                ready_timeout_s=plan.ready_timeout_s,
                limits=plan.limits,
            )
        except PortInUseError:
            if attempt == PORT_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _start_front(
    plan: BenchPlan, server: ServerProcess
) -> contextlib.AbstractContextManager[ServerProcess | None]:
    """The front (nginx) in front of `server`, when the plan's server is measured behind one
    (`tuner.front`); it shares the server's CPUs. Nothing otherwise."""
    if front_of(plan.adapter) is None:
        return contextlib.nullcontext()
    return running_front(
        server,
        plan.settings,
        cpus=plan.server_cpus,
        log_path=plan.log_path,
        ready_path=plan.ready_path,
        ready_timeout_s=plan.ready_timeout_s,
    )


def _check_front(plan: BenchPlan, front: ServerProcess | None) -> None:
    if front is not None and not front.alive():
        tail = front.log_tail()
        raise ServerCrashed(
            f"nginx in front of {plan.adapter.name} died during the measurement: "
            f"{key_line(tail, front.spec.signs)} (log: {front.log_path})\nlast log lines:\n{tail}"
        )


def front_context(plan: BenchPlan) -> dict[str, Any]:
    """The front a figure was measured behind: results with and without one never compare."""
    fronted = front_of(plan.adapter)
    if fronted is None:
        return {}
    return {"front": {"name": fronted.front_name, "version": nginx.version()}}


def run_context(plan: BenchPlan) -> dict[str, Any]:
    """Where and with what a figure was measured, so a reader can judge if it applies."""
    return {
        **front_context(plan),
        "server": plan.adapter.name,
        "app": f"{plan.app.module}:{plan.app.callable}",
        "server_cpus": list(plan.server_cpus),
        "load_cpus": list(plan.load.load_cpus),
        "versions": {
            "tuner": __version__,
            plan.adapter.name: server_version(plan.adapter),
            "python": platform.python_version(),
        },
        "machine": machine_info(),
        # The client model (slow and idle clients), when set: figures measured under another
        # are not alike. Absent for fast clients only, as in records made before it existed.
        **({"clients": clients} if (clients := plan.load.clients.to_dict()) else {}),
    }


# Server versions this process has asked for, by adapter, binary and the binary's mtime.
_versions: dict[tuple[str, str, int], str] = {}


def server_version(adapter: ServerAdapter) -> str:
    """The server's version, asked once per process and binary: a `--version` subprocess
    costs 30-70 ms, on every trial. A binary replaced meanwhile is asked again."""
    executable = adapter.executable()
    try:
        mtime = os.stat(executable).st_mtime_ns
    except OSError:
        mtime = 0
    key = (adapter.name, executable, mtime)
    if key not in _versions:
        _versions[key] = adapter.version()
    return _versions[key]


def machine_info() -> dict[str, Any]:
    return {"cpu_model": cpu_model(), "cpus": os.cpu_count(), "platform": sys.platform}
