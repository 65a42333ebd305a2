"""What one server's study learnt about the app, carried to the next server: its concurrency.

How many requests a server should hold at once depends on the app more than on the server: a
request that computes for its whole time needs about one slot per CPU, one that waits 50 ms
on I/O for 0.2 ms of CPU needs hundreds. The tuner measures both halves of every run: the
server's CPU-seconds per wall second (`ServerCpu.busy_cpus`) over its req/s is the CPU time
of one request, C; Little's law gives the wall time a request holds a slot, S = slots / req/s,
where slots are the config's processes x threads (busy, as a closed loop keeps more requests
coming than that), never more than its measured mean latency. S - C is the waiting, and the
slots that keep the CPUs busy are cpus x S / C (Goetz et al., Java Concurrency in Practice,
8.2: threads = cpus x (1 + wait / compute)).

Only configs whose slots the process model counts are read: the baselines' concurrency models
(a process, or a thread, per request). A greenlet or event-loop config serves more requests
than its processes x threads, so its S would look too short. S is an upper bound: a request
also holds its slot while it queues for a CPU (or, among one process's threads, for the GIL),
which looks like waiting. So the least S measured gives the estimate, and a run that kept its
CPUs busy caps it: it had enough slots for them, so no more than its slots per busy CPU are
wanted. Pure logic.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from tuner.errors import ConfigError
from tuner.metrics.measurement import Measurement
from tuner.search.branches import RandomDraw, Replay
from tuner.search.covering import Allowed, space_limits
from tuner.search.space import SearchSpace, suggest
from tuner.servers.base import ServerAdapter
from tuner.settings import Value

# A run with more failed requests than this is not read: fast failures look like short waits.
MAX_ERROR_RATE = 0.01
# A run whose server kept this share of the CPUs it could use busy had slots enough for them.
SATURATED = 0.8


@dataclass(frozen=True)
class Sample:
    """One run of a config whose concurrency the process model counts."""

    measurement: Measurement
    slots: int  # processes x threads of the config
    connections: int  # the load's connections (at most that many requests are in flight)
    processes: int = 1  # its Python processes: each runs Python on one CPU at a time


@dataclass(frozen=True)
class RequestShape:
    """How one request of the app spends its wall time on a server."""

    cpu_s: float  # CPU time of one request (C)
    held_s: float  # wall time it holds a slot (S >= C)
    # The fewest slots per CPU a run had while it kept its CPUs busy (None: no such run).
    busy_at: float | None = None

    @property
    def waiting(self) -> float:
        """The share of a request spent waiting (0 = pure CPU, near 1 = waits on I/O)."""
        return 1.0 - self.cpu_s / self.held_s if self.held_s > 0 else 0.0

    def concurrency(self, cpus: float, connections: int) -> int:
        """Requests to hold at once to keep `cpus` busy: cpus x S / C, at least one per CPU
        and at most the load's connections (more slots than requests in flight do nothing)."""
        wanted = cpus * self.held_s / self.cpu_s if self.cpu_s > 0 else connections
        if self.busy_at is not None:
            wanted = min(wanted, cpus * self.busy_at)
        return max(1, min(connections, max(math.ceil(cpus), math.ceil(wanted - 1e-9))))

    def describe(self) -> str:
        busy = f"; CPUs kept busy with {self.busy_at:g} per CPU" if self.busy_at is not None else ""
        return (
            f"{self.cpu_s * 1000:.2f} ms CPU of {self.held_s * 1000:.2f} ms held "
            f"({self.waiting:.0%} waiting){busy}"
        )


def shape_of(samples: Iterable[Sample]) -> RequestShape | None:
    """The app's request shape from runs of several configs (and servers): the shortest held
    time of any run, its CPU time, and the fewest slots per CPU that kept the CPUs busy; None
    without a run that measured the server's CPU."""
    best: RequestShape | None = None
    busy_at: float | None = None
    for sample in samples:
        run = sample.measurement
        rps = run.median_rps
        if run.server_cpu is None or rps <= 0 or run.error_rate > MAX_ERROR_RATE:
            continue
        cpu_s = run.server_cpu.busy_cpus / rps
        if cpu_s <= 0:
            continue
        in_flight = min(sample.slots, sample.connections)
        held_s = in_flight / rps
        if run.latency.mean_ms > 0:
            held_s = min(held_s, run.latency.mean_ms / 1000.0)
        shape = RequestShape(cpu_s, max(held_s, cpu_s))
        if best is None or shape.held_s < best.held_s:
            best = shape
        usable = min(run.server_cpu.of_cpus, float(sample.processes))
        if usable > 0 and run.server_cpu.busy_cpus >= SATURATED * usable:
            per_cpu = in_flight / usable
            busy_at = per_cpu if busy_at is None else min(busy_at, per_cpu)
    return None if best is None else replace(best, busy_at=busy_at)


def slots(adapter: ServerAdapter, settings: Mapping[str, Value]) -> int:
    """Processes x threads of a config, as the server's process model counts them."""
    return adapter.processes(settings) * adapter.threads(settings)


def with_concurrency(
    space: SearchSpace,
    adapter: ServerAdapter,
    cpus: int,
    params: Mapping[str, Value],
    target: int,
    slot_models: Collection[str],
) -> dict[str, Value] | None:
    """`params` (a start, by param name) with its process and thread counts set for `target`
    requests at once: where the server forks and has threads, a process per CPU and the
    threads to make up `target`; with only one of them, that one; each within the space's
    range. Only where those counts are what serves requests at once: a config that draws a
    thread count, or one in `slot_models` (the baselines' models: a process or a thread per
    request); a greenlet or event-loop config serves more than its counts, and stays. None
    when nothing changes, or the change leaves the config's concurrency model."""
    model = adapter.process_model
    drawn = suggest(space, Replay(dict(params), RandomDraw(random.Random(0))), cpus)
    limits = space_limits(space, cpus)
    name_of = {p.setting: p.name for p in space.params}
    workers_key = model.processes if model.processes in drawn else None
    threads_key = model.threads if model.threads in drawn else None
    try:
        before = adapter.concurrency_model(adapter.resolve(drawn))
    except ConfigError:
        return None
    if threads_key is None and before not in slot_models:
        return None
    if workers_key is None and threads_key is None:
        return None
    counts: dict[str, int] = {}
    if workers_key is not None and threads_key is not None:
        counts[workers_key] = _within(limits.get(workers_key), max(1, cpus))
        counts[threads_key] = _within(
            limits.get(threads_key), math.ceil(target / counts[workers_key])
        )
    elif workers_key is not None:
        counts[workers_key] = _within(limits.get(workers_key), target)
    elif threads_key is not None:
        counts[threads_key] = _within(limits.get(threads_key), target)
    changed = {**params, **{name_of[key]: count for key, count in counts.items()}}
    try:
        settings = suggest(space, Replay(changed, RandomDraw(random.Random(0))), cpus)
        if adapter.concurrency_model(adapter.resolve(settings)) != before:
            return None
    except ConfigError:  # the server refuses the counts with its other settings
        return None
    if settings == drawn:
        return None
    return {name_of[setting]: value for setting, value in settings.items()}


def carried_starts(
    space: SearchSpace,
    adapter: ServerAdapter,
    cpus: int,
    default: Mapping[str, Value] | None,
    starts: Sequence[Mapping[str, Value]],
    target: int,
    slot_models: Collection[str],
) -> list[tuple[dict[str, Value], bool]]:
    """The starts a study queues when the app's concurrency is known, each with whether it was
    moved there: the server's default (its params, when the space can express it) moved to
    `target` requests at once, where that changes it, then each branch start moved there too,
    or as it was where the space cannot move it. A start that lands on another's config is
    queued once."""
    queued: list[tuple[dict[str, Value], bool]] = []

    def move(params: Mapping[str, Value]) -> dict[str, Value] | None:
        return with_concurrency(space, adapter, cpus, params, target, slot_models)

    carried = None if default is None else move(default)
    candidates = [] if carried is None else [(carried, True)]
    for params in starts:
        shifted = move(params)
        candidates.append((shifted, True) if shifted is not None else (dict(params), False))
    for start, moved in candidates:
        if all(start != other for other, _ in queued):
            queued.append((start, moved))
    return queued


def _within(allowed: Allowed | None, count: int) -> int:
    """The allowed count nearest at or above `count`, or the space's highest (`count` itself
    for a setting the space does not draw as a count)."""
    if allowed is None:
        return count
    found = allowed.at_least(count)
    return allowed.high if found is None else found
