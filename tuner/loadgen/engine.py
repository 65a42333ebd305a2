"""Run a load: one pinned worker per load CPU, started together, their results merged.

Workers are spawned per run, or kept for the next run inside `keep_workers()` (a study).
Every run is bounded: workers that do not report ready, or do not finish by warm-up +
duration + timeout + a grace period, are terminated and then killed (and a kept pool with
them: the next run spawns fresh workers).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from tuner.errors import TunerError
from tuner.loadgen import breakdown, lane_judge
from tuner.loadgen.beside import LaneConfig, LaneReport, beside_main
from tuner.loadgen.checks import PERCENTILES, RunTotals, assess, fairness_index
from tuner.loadgen.http import host_header, idle_request, tagged_sequence
from tuner.loadgen.lane_judge import LaneFigures
from tuner.loadgen.messages import Done, Failed, FromWorker, Go, Ready, Stop, WindowReport
from tuner.loadgen.spec import LoadSpec
from tuner.loadgen.worker import ERROR_KINDS, TIMEOUT, WorkerConfig, worker_main
from tuner.metrics.histogram import Histogram
from tuner.metrics.measurement import Errors, Latency, Measurement, median_of_windows

# Spawning a worker re-imports Python and the tuner: allow for a slow, busy machine.
READY_TIMEOUT_S = 30.0
# Time between "go" and the common start, so every worker is waiting when it comes (each has
# said Ready and blocks on its pipe: waking it takes well under a millisecond).
START_DELAY_S = 0.05
# Beyond warm-up + duration + timeout (the drain), how long before workers are killed.
FINISH_GRACE_S = 5.0


# The shortest stretch that counts as a one-second window of its own in `window_rps`.
MIN_WINDOW_S = 0.5


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


class _Pool:
    """One worker process per load CPU, each pinned to its CPU by every run it is sent.

    Killed with the tuner however it ends: daemonic (multiprocessing terminates them at a
    normal exit), and a worker whose pipe reaches EOF (the tuner was SIGKILLed) exits."""

    def __init__(self, cpus: tuple[int, ...]) -> None:
        self.cpus = cpus
        self.busy = False
        ctx = multiprocessing.get_context("spawn")  # the parent may have threads: never fork
        self.pipes: list[Connection] = []
        self.procs: list[Any] = []
        try:
            for cpu in cpus:
                parent_end, child_end = ctx.Pipe()
                self.pipes.append(parent_end)
                proc = ctx.Process(
                    target=worker_main, args=(child_end,), name=f"tuner-load-{cpu}", daemon=True
                )
                proc.start()
                child_end.close()
                self.procs.append(proc)
        except BaseException:
            self.close(polite=False)
            raise

    def alive(self) -> bool:
        return all(proc.is_alive() for proc in self.procs)

    def close(self, polite: bool = True) -> None:
        """Stop the workers: ask them to leave (`polite`, between runs), else terminate, then
        kill whatever is left."""
        if polite:
            for pipe in self.pipes:
                with contextlib.suppress(OSError):
                    pipe.send(None)
        _reap(self.procs, self.pipes, 2.0 if polite else 0.0)


class _LaneProcess:
    """The process that runs a run's lanes (streams, a probe) beside its workers: spawned per
    run, since few runs have lanes, and stopped with the run however it ends."""

    def __init__(self, config: LaneConfig) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.pipe, child_end = ctx.Pipe()
        self.proc = ctx.Process(
            target=beside_main, args=(child_end,), name="tuner-lanes", daemon=True
        )
        try:
            self.proc.start()
        finally:
            child_end.close()
        self.pipe.send(config)

    def report(self, deadline: float) -> LaneReport:
        left = max(0.0, deadline - time.monotonic())
        if not self.pipe.poll(left):
            raise TunerError("load generator: the lanes beside the load did not finish in time")
        message = _message(self.pipe, "the lanes process")
        if not isinstance(message, LaneReport):
            raise TunerError(f"load generator: the lanes sent {type(message).__name__}")
        return message

    def close(self) -> None:
        _reap([self.proc], [self.pipe], 2.0)


def _lanes_of(spec: LoadSpec, host: str) -> _LaneProcess | None:
    if not spec.lanes:
        return None
    return _LaneProcess(
        LaneConfig(
            cpus=tuple(spec.load_cpus),
            host=host,
            port=spec.port,
            host_header=host_header(spec.host, spec.port),
            lanes=spec.lanes,
            warmup_s=spec.warmup_s,
            duration_s=spec.duration_s,
        )
    )


# The pool that `keep_workers` keeps between runs, and how many such blocks are open.
_kept: _Pool | None = None
_keep_depth = 0
_pool_lock = threading.Lock()


@contextlib.contextmanager
def keep_workers() -> Iterator[None]:
    """Within this block (a study, its confirmation), `run_load` keeps its worker processes
    for the next run instead of spawning fresh ones, which costs each run a Python start and
    the imports per load CPU; they stop when the outermost block ends. Nests; usable as a
    decorator."""
    global _keep_depth, _kept
    with _pool_lock:
        _keep_depth += 1
    try:
        yield
    finally:
        with _pool_lock:
            _keep_depth -= 1
            pool = _kept if _keep_depth == 0 and _kept is not None and not _kept.busy else None
            if pool is not None:
                _kept = None
        if pool is not None:
            pool.close()


def _acquire(cpus: tuple[int, ...]) -> tuple[_Pool, bool]:
    """A pool for one run on `cpus`, and whether it is the kept one."""
    global _kept
    with _pool_lock:
        if _keep_depth > 0:
            stale = _kept is not None and (_kept.cpus != cpus or not _kept.alive())
            if stale and _kept is not None and not _kept.busy:
                _kept.close(polite=False)
                _kept = None
            if _kept is None:
                _kept = _Pool(cpus)
            if not _kept.busy:  # busy: another thread's run; that one gets its own
                _kept.busy = True
                return _kept, True
    return _Pool(cpus), False


def _release(pool: _Pool, kept: bool, clean: bool) -> None:
    """After a run: keep the pool for the next one if it ended `clean`, else stop it."""
    global _kept
    with _pool_lock:
        pool.busy = False
        if kept and clean and _keep_depth > 0 and _kept is pool:
            return
        if _kept is pool:
            _kept = None
    # A run that did not end clean may have left workers mid-run, or messages in their pipes.
    pool.close(polite=clean)


def run_load(
    spec: LoadSpec,
    on_window: Callable[[WindowStats], bool] | None = None,
    on_measure: Callable[[], None] | None = None,
) -> Measurement:
    """Send `spec`'s load and measure it (no memory or startup: the caller adds those when it
    started the server). `on_window` sees each merged one-second window of the measurement
    phase; returning False stops the run early (the result then covers the part measured).
    `on_measure` is called (on a thread of its own) as the measurement window begins, after
    the warm-up: where the caller marks what it reads over the same window."""
    spec.validate()
    host = spec.connect_host()
    requests, entries = tagged_sequence(spec.workload, spec.host, spec.port, spec.keepalive)
    workers = len(spec.load_cpus)
    pool, kept = _acquire(tuple(spec.load_cpus))
    clean = False
    lanes: _LaneProcess | None = None
    marker: threading.Timer | None = None
    try:
        lanes = _lanes_of(spec, host)
        pipes = pool.pipes
        for index, (cpu, (conns, slow, idle), pipe) in enumerate(
            zip(spec.load_cpus, spec.per_worker(), pipes, strict=True)
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
            pipe.send(cfg)
        beside = [lanes.pipe] if lanes is not None else []
        _await_ready([*pipes, *beside])
        start_ns = time.monotonic_ns() + int(START_DELAY_S * 1e9)
        for pipe in [*pipes, *beside]:
            pipe.send(Go(start_ns))
        if on_measure is not None:
            marker = threading.Timer(START_DELAY_S + spec.warmup_s, on_measure)
            marker.daemon = True
            marker.start()
        deadline = (
            time.monotonic()
            + START_DELAY_S
            + spec.warmup_s
            + spec.duration_s
            + spec.timeout_s
            + FINISH_GRACE_S
        )
        snaps, finals, stopped = _collect(pipes, deadline, on_window, beside)
        report = lanes.report(deadline) if lanes is not None else None
        clean = True
    finally:
        if marker is not None:
            marker.cancel()
        _release(pool, kept, clean)
        if lanes is not None:
            lanes.close()
    seen = lane_judge.judge(spec.lanes, report, spec.warmup_s, stopped) if report else None
    return _merge(spec, snaps, finals, seen or LaneFigures(), report.cpu_pct if report else None)


def _await_ready(pipes: list[Connection]) -> None:
    waiting = set(pipes)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TunerError(f"load generator: workers not ready after {READY_TIMEOUT_S:.0f} s")
        for pipe in _readable(waiting, left):
            if isinstance(_receive(pipe), Ready):
                waiting.discard(pipe)


def _readable(pipes: set[Connection], timeout_s: float) -> list[Connection]:
    """The pipes with a message waiting (`wait` also takes sockets and fds: ours are pipes)."""
    return [pipe for pipe in wait(list(pipes), timeout=timeout_s) if isinstance(pipe, Connection)]


def _receive(pipe: Connection) -> FromWorker:
    message: FromWorker = _message(pipe, "a worker process")
    return message


def _message(pipe: Connection, sender: str) -> Any:
    """The next message `sender` sent; TunerError when it died or failed."""
    try:
        message = pipe.recv()
    except EOFError:
        raise TunerError(f"load generator: {sender} died unexpectedly") from None
    if isinstance(message, Failed):
        raise TunerError(f"load generator: {sender} failed:\n{message.traceback}")
    return message


def _collect(
    pipes: list[Connection],
    deadline: float,
    on_window: Callable[[WindowStats], bool] | None,
    beside: list[Connection],
) -> tuple[list[WindowReport], list[Done], bool]:
    """Receive window reports and final reports; call `on_window` as windows complete. When it
    stops the run, the workers and the lane process `beside` are told to stop; the last value
    says whether it did."""
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
        for pipe in _readable(running, left):
            message = _receive(pipe)
            if isinstance(message, WindowReport):
                snaps.append(message)
                windows.setdefault(message.index, _Window()).add(message)
            elif isinstance(message, Done):
                finals.append(message)
                running.discard(pipe)
        # Hand complete windows to the caller in order.
        while not stopped and next_window in windows and windows[next_window].reports == len(pipes):
            window = windows[next_window]
            next_window += 1
            if on_window is not None and on_window(window.stats(next_window - 1)) is False:
                stopped = True
                for pipe in [*pipes, *beside]:
                    with contextlib.suppress(OSError):  # that worker already finished
                        pipe.send(Stop())
    return snaps, finals, stopped


def _reap(procs: list[Any], pipes: list[Connection], wait_s: float) -> None:
    for proc in procs:
        proc.join(timeout=wait_s)
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=2.0)
        if proc.is_alive():
            proc.kill()
            proc.join()
    for pipe in pipes:
        pipe.close()


@dataclass
class _Sums:
    """The workers' window reports added up: counts, latency histograms, and each window."""

    hist: Histogram
    connect: Histogram
    errors: list[int]
    requests: int = 0
    bytes_: int = 0
    late: int = 0
    completed_us: int = 0
    slow_requests: int = 0

    @classmethod
    def of(cls, snaps: list[WindowReport], windows: dict[int, _Window]) -> _Sums:
        """The sums of `snaps`; each report is also added to its window in `windows`."""
        sums = cls(Histogram(), Histogram(), [0] * len(ERROR_KINDS))
        for snap in snaps:
            sums.requests += snap.requests
            sums.bytes_ += snap.response_bytes
            sums.late += snap.late
            sums.completed_us += snap.completed_us
            sums.slow_requests += snap.slow_requests
            sums.errors = [a + b for a, b in zip(sums.errors, snap.errors, strict=True)]
            sums.hist.merge(Histogram.from_sparse(snap.histogram))
            if snap.connect_histogram:
                sums.connect.merge(Histogram.from_sparse(snap.connect_histogram))
            windows.setdefault(snap.index, _Window()).add(snap)
        return sums


def _merge(
    spec: LoadSpec,
    snaps: list[WindowReport],
    finals: list[Done],
    lanes: LaneFigures,
    lanes_cpu: float | None = None,
) -> Measurement:
    """The workers' reports and the lanes' figures as one measurement; `lanes_cpu` is the
    lanes' process's CPU (% of one core; None: the run had no lanes), which shares the load
    CPUs with the workers and so counts with theirs."""
    windows: dict[int, _Window] = {}
    sums = _Sums.of(snaps, windows)
    hist, connect, errors = sums.hist, sums.connect, sums.errors
    requests, bytes_, late = sums.requests, sums.bytes_, sums.late
    completed_us, slow_requests = sums.completed_us, sums.slow_requests
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
    judged = assess(
        RunTotals(
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
            workers_cpu=sum(f.cpu_pct for f in finals),
            lanes_cpu=lanes_cpu or 0.0,
            load_cpus=len(finals),
        )
    )
    idle = breakdown.idle_connections(spec, finals)
    # A run stopped early (a pruned trial) ends with a sliver of a window: its rate says
    # nothing (a few ms with 0 or 3 answers) and would drag the median; the requests in it
    # still count in the overall rate.
    window_rps = tuple(
        windows[i].stats(i).rps for i in sorted(windows) if windows[i].length_s >= MIN_WINDOW_S
    )
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
        littles_law_ratio=judged.littles_law_ratio,
        unfair_reasons=judged.unfair_reasons,
        late_requests=late,
        target_rps=spec.rate_rps,
        loadgen_cpu_pct=loadgen_cpu,
        loadgen_kernel_cpu_pct=busiest.cpu_kernel_pct,
        client_bound=judged.client_bound,
        notes=(*judged.notes, *breakdown.idle_note(idle)),
        templates=breakdown.templates(spec.workload, finals, duration),
        slow_clients=breakdown.slow_clients(spec, snaps, finals, duration),
        idle_connections=idle,
        connect=breakdown.latency_of(connect) if connect.total else None,
        loadgen_busy_cpus=(sum(f.cpu_pct for f in finals) + (lanes_cpu or 0.0)) / 100,
        lanes_cpu_pct=lanes_cpu,
        streams=lanes.streams,
        probe=lanes.probe,
    )
