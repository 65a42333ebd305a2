"""Run a load: spawn one pinned worker per load CPU, start them together, merge their results.

Every run is bounded: workers that do not report ready, or do not finish by warm-up +
duration + timeout + a grace period, are terminated and then killed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from tuner.errors import TunerError
from tuner.loadgen import breakdown
from tuner.loadgen.checks import PERCENTILES, assess, fairness_index
from tuner.loadgen.http import idle_request, tagged_sequence
from tuner.loadgen.messages import Done, Failed, FromWorker, Go, Ready, Stop, WindowReport
from tuner.loadgen.spec import LoadSpec
from tuner.loadgen.worker import ERROR_KINDS, TIMEOUT, WorkerConfig, worker_main
from tuner.metrics.histogram import Histogram
from tuner.metrics.measurement import Errors, Latency, Measurement, median_of_windows

# Spawning a worker re-imports Python and the tuner: allow for a slow, busy machine.
READY_TIMEOUT_S = 30.0
# Time between "go" and the common start, so every worker is waiting when it comes.
START_DELAY_S = 0.1
# Beyond warm-up + duration + timeout (the drain), how long before workers are killed.
FINISH_GRACE_S = 5.0


@dataclass(frozen=True)
class WindowStats:
    index: int
    elapsed_s: float  # since the measurement window began, at this window's end
    requests: int
    rps: float
    errors: int
    p99_ms: float


class _Window:
    """One second of the measurement window, merged over the workers that reported it."""

    def __init__(self) -> None:
        self.reports = 0
        self.length_s = 0.0
        self.elapsed_s = 0.0
        self.requests = 0
        self.errors = 0
        self.hist = Histogram()

    def add(self, report: WindowReport) -> None:
        self.reports += 1
        self.length_s = max(self.length_s, report.length_s)
        self.elapsed_s = max(self.elapsed_s, report.elapsed_s)
        self.requests += report.requests
        self.errors += sum(report.errors)
        self.hist.merge(Histogram.from_sparse(report.histogram))

    def stats(self, index: int) -> WindowStats:
        rps = self.requests / self.length_s if self.length_s > 0 else 0.0
        p99 = self.hist.percentile(99) / 1000
        return WindowStats(index, self.elapsed_s, self.requests, rps, self.errors, p99)


def run_load(spec: LoadSpec, on_window: Callable[[WindowStats], bool] | None = None) -> Measurement:
    """Send `spec`'s load and measure it (no memory or startup: the caller adds those when it
    started the server). `on_window` sees each merged one-second window of the measurement
    phase; returning False stops the run early (the result then covers the part measured)."""
    spec.validate()
    host = spec.connect_host()
    requests, entries = tagged_sequence(spec.workload, spec.host, spec.port, spec.keepalive)
    workers = len(spec.load_cpus)
    ctx = multiprocessing.get_context("spawn")  # the parent may have threads: never fork
    pipes: list[Connection] = []
    procs = []
    try:
        for index, (cpu, (conns, slow, idle)) in enumerate(
            zip(spec.load_cpus, spec.per_worker(), strict=True)
        ):
            cfg = WorkerConfig(
                index=index,
                cpu=cpu,
                host=host,
                port=spec.port,
                connections=conns,
                requests=requests,
                keepalive=spec.keepalive,
                rate_rps=spec.rate_rps,
                workers=workers,
                warmup_s=spec.warmup_s,
                duration_s=spec.duration_s,
                timeout_s=spec.timeout_s,
                entries=entries,
                entry_count=len(spec.workload.requests),
                slow_connections=slow,
                slow_bytes_per_s=spec.clients.slow_bytes_per_s,
                think_s=spec.clients.think_ms / 1000,
                idle_connections=idle,
                idle_request=idle_request(spec.workload, spec.host, spec.port) if idle else b"",
            )
            parent_end, child_end = ctx.Pipe()
            proc = ctx.Process(
                target=worker_main, args=(cfg, child_end), name=f"tuner-load-{cpu}", daemon=True
            )
            proc.start()
            child_end.close()
            pipes.append(parent_end)
            procs.append(proc)
        _await_ready(pipes)
        start_ns = time.monotonic_ns() + int(START_DELAY_S * 1e9)
        for pipe in pipes:
            pipe.send(Go(start_ns))
        deadline = (
            time.monotonic()
            + START_DELAY_S
            + spec.warmup_s
            + spec.duration_s
            + spec.timeout_s
            + FINISH_GRACE_S
        )
        snaps, finals = _collect(pipes, deadline, on_window)
    finally:
        _reap(procs, pipes)
    return _merge(spec, snaps, finals)


def _await_ready(pipes: list[Connection]) -> None:
    waiting = set(pipes)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TunerError(f"load generator: workers not ready after {READY_TIMEOUT_S:.0f} s")
        for pipe in wait(list(waiting), timeout=left):
            if isinstance(_receive(pipe), Ready):  # type: ignore[arg-type]
                waiting.discard(pipe)  # type: ignore[arg-type]


def _receive(pipe: Connection) -> FromWorker:
    try:
        message = pipe.recv()
    except EOFError:
        raise TunerError("load generator: a worker process died unexpectedly") from None
    if isinstance(message, Failed):
        raise TunerError(f"load generator: a worker failed:\n{message.traceback}")
    return message


def _collect(
    pipes: list[Connection],
    deadline: float,
    on_window: Callable[[WindowStats], bool] | None,
) -> tuple[list[WindowReport], list[Done]]:
    """Receive window reports and final reports; call `on_window` as windows complete."""
    snaps: list[WindowReport] = []
    finals: list[Done] = []
    windows: dict[int, _Window] = {}
    next_window = 0
    stopped = False
    running = set(pipes)
    while running:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TunerError("load generator: workers did not finish in time (killed)")
        for pipe in wait(list(running), timeout=left):
            message = _receive(pipe)  # type: ignore[arg-type]
            if isinstance(message, WindowReport):
                snaps.append(message)
                windows.setdefault(message.index, _Window()).add(message)
            elif isinstance(message, Done):
                finals.append(message)
                running.discard(pipe)  # type: ignore[arg-type]
        # Hand complete windows to the caller in order.
        while not stopped and next_window in windows and windows[next_window].reports == len(pipes):
            window = windows[next_window]
            next_window += 1
            if on_window is not None and on_window(window.stats(next_window - 1)) is False:
                stopped = True
                for pipe in pipes:
                    with contextlib.suppress(OSError):  # that worker already finished
                        pipe.send(Stop())
    return snaps, finals


def _reap(procs: list, pipes: list[Connection]) -> None:
    for proc in procs:
        proc.join(timeout=2.0)
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=2.0)
        if proc.is_alive():
            proc.kill()
            proc.join()
    for pipe in pipes:
        pipe.close()


def _merge(spec: LoadSpec, snaps: list[WindowReport], finals: list[Done]) -> Measurement:
    hist = Histogram()
    errors = [0] * len(ERROR_KINDS)
    requests = bytes_ = late = completed_us = slow_requests = 0
    windows: dict[int, _Window] = {}
    for snap in snaps:
        requests += snap.requests
        bytes_ += snap.response_bytes
        late += snap.late
        completed_us += snap.completed_us
        slow_requests += snap.slow_requests
        errors = [a + b for a, b in zip(errors, snap.errors, strict=True)]
        hist.merge(Histogram.from_sparse(snap.histogram))
        windows.setdefault(snap.index, _Window()).add(snap)
    duration = sum(f.measure_s for f in finals) / len(finals)
    rps = requests / duration if duration > 0 else 0.0
    # Requests answered with 4xx/5xx are in `requests`; the others never got an answer.
    unanswered = errors[0] + errors[1] + errors[TIMEOUT]
    # Every client's failures count: `requests` is the fast clients', slow_requests the others'.
    attempts = requests + slow_requests + unanswered
    error_rate = sum(errors) / attempts if attempts else 0.0
    completed = requests  # completed responses have latency sums in completed_us
    mean_completed_ms = completed_us / completed / 1000 if completed else 0.0
    p50, p90, p99, p999 = (us / 1000 for us in hist.percentiles(list(PERCENTILES)))
    latency = Latency(p50, p90, p99, p999, hist.max_us / 1000, hist.mean_us() / 1000)
    starved = sum(f.starved for f in finals)
    fairness = None if spec.open_loop else fairness_index([n for f in finals for n in f.completed])
    busiest = max(finals, key=lambda f: f.cpu_pct)
    loadgen_cpu = busiest.cpu_pct
    ratio, reasons, client_bound, notes = assess(
        rps=rps,
        mean_completed_ms=mean_completed_ms,
        connections=spec.fast_connections,
        open_loop=spec.open_loop,
        starved=starved,
        fairness=fairness,
        error_rate=error_rate,
        loadgen_cpu=loadgen_cpu,
        late_requests=late,
        requests=requests,
        slow_connections=spec.slow_connections,
        slow_starved=sum(f.slow_starved for f in finals),
    )
    idle = breakdown.idle_connections(spec, finals)
    notes += breakdown.idle_note(idle)
    window_rps = tuple(windows[i].stats(i).rps for i in sorted(windows))
    return Measurement(
        median_rps=median_of_windows(window_rps, rps),
        overall_rps=rps,
        window_rps=window_rps,
        duration_s=duration,
        requests=requests,
        total_responses=sum(f.total_responses for f in finals),
        response_bytes=bytes_,
        latency=latency,
        errors=Errors(*errors),
        error_rate=error_rate,
        connections=spec.connections,
        starved_connections=starved,
        fairness_index=fairness,
        littles_law_ratio=ratio,
        unfair_reasons=tuple(reasons),
        late_requests=late,
        target_rps=spec.rate_rps,
        loadgen_cpu_pct=loadgen_cpu,
        loadgen_kernel_cpu_pct=busiest.cpu_kernel_pct,
        client_bound=client_bound,
        notes=tuple(notes),
        templates=breakdown.templates(spec.workload, finals, duration),
        slow_clients=breakdown.slow_clients(spec, snaps, finals, duration),
        idle_connections=idle,
    )
