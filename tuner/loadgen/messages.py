"""What the load engine and its worker processes say to each other over their pipes.

parent -> worker: Go (start at this instant), Stop (end the measurement now).
worker -> parent: Ready, then a WindowReport per second of the measurement, then Done;
or Failed with the traceback if anything went wrong.

Named types instead of positional tuples, so neither side depends on the other's field order.
Slotted: a report crosses the pipe every second and should pickle small.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.metrics.histogram import SparseHistogram


@dataclass(frozen=True, slots=True)
class Ready:
    """The worker is pinned, its loop exists: it waits for Go."""


@dataclass(frozen=True, slots=True)
class Go:
    start_ns: int  # time.monotonic_ns() at which every worker starts sending


@dataclass(frozen=True, slots=True)
class Stop:
    """End the measurement now (the caller has seen enough, e.g. a pruned trial)."""


@dataclass(frozen=True, slots=True)
class WindowReport:
    """One worker's counts for one window (one second, the last one possibly shorter)."""

    index: int
    length_s: float
    elapsed_s: float  # since the measurement began, at this window's end
    requests: int  # responses completed (any status)
    errors: tuple[int, ...]  # per kind, in ERROR_KINDS order
    response_bytes: int
    late: int  # open loop: requests sent late
    # Sum over the completed responses of the time from the request's issue to our handling
    # of its answer: each connection's cycle, for Little's law (the latencies are the
    # server's, from the request's first byte out to the answer's arrival).
    completed_us: int
    histogram: SparseHistogram
    # `requests`, `completed_us` and `histogram` are the fast clients'; the slow clients'
    # are these (`errors` and `response_bytes` count every client).
    slow_requests: int = 0
    slow_completed_us: int = 0
    slow_histogram: SparseHistogram | None = None  # None: no slow response in the window
    # The connects that completed in the window, from connect() to the socket connected.
    connect_histogram: SparseHistogram | None = None


@dataclass(frozen=True, slots=True)
class EntryFigures:
    """One workload entry's (template's) figures over a worker's measurement window, fast
    clients only: responses, failed requests, and the latency histogram (sparse)."""

    requests: int
    errors: int
    histogram: SparseHistogram


@dataclass(frozen=True, slots=True)
class Done:
    """The worker's totals once its measurement window and drain are over."""

    measure_s: float
    cpu_pct: float  # user + kernel, % of its core over the measurement window
    cpu_kernel_pct: float
    starved: int  # connections passed over in the window
    connections: int
    total_responses: int  # warm-up and drain included
    inflight_at_end: int
    unsent_at_end: int
    abandoned: int  # still unanswered after the drain
    # Responses per connection that had a request in the window: how evenly the server
    # shared itself out.
    completed: tuple[int, ...]
    # The slow clients' connections, those passed over (within `starved`), and their
    # responses per connection, apart: slow by design, they are not judged with the others.
    slow_connections: int = 0
    slow_starved: int = 0
    slow_completed: tuple[int, ...] = ()
    # Per workload entry, in the workload's order; empty for a single-request workload.
    entries: tuple[EntryFigures, ...] = ()
    idle_connections: int = 0
    idle_held: int = 0  # idle connections still open at the end of the measurement window


@dataclass(frozen=True, slots=True)
class Failed:
    traceback: str


ToWorker = Go | Stop
FromWorker = Ready | WindowReport | Done | Failed
