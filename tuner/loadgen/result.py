"""A load run's result, with the checks that say whether its numbers can be trusted."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tuner.metrics.measurement import Errors, Latency, Measurement, Memory, median_of_windows

# The load generator's own CPU above this (% of its core during the window) means the
# measured rate is the client's limit, not the server's.
CLIENT_BOUND_CPU_PCT = 90.0
# More errors than this fraction of attempts gets a note (the figures describe a failing server).
ERROR_RATE_NOTE = 0.01
# Closed loop: rps * mean latency / connections below this means connections sat waiting
# outside the measured latencies (starved by the server), so the percentiles flatter it.
# (The starved and fairness checks below catch the servers that pass connections over.)
LITTLES_LAW_MIN_RATIO = 0.5
# Closed loop: Jain's fairness index of the responses each connection got, (sum x)^2 /
# (n * sum x^2): 1 when every connection got the same share, 1/n when one got everything.
# Measured here (1.5 s windows, 64 connections): every fair config scored >= 0.997, while
# gunicorn's gevent worker under overload (p50 0.1 ms, p99 0.2-2 s) scored 0.18-0.84 and
# uWSGI http11-socket with sync workers 0.02. Even service in random order would score
# m / (m + 1) (~0.95 at m = 20 responses per connection), so 0.9 leaves a margin both ways.
# Only judged when connections averaged FAIRNESS_MIN_MEAN responses: a slow fair queue that
# served each connection once or twice in the window looks uneven by chance.
FAIRNESS_MIN_INDEX = 0.9
FAIRNESS_MIN_MEAN = 20.0

PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9))


@dataclass(frozen=True)
class LoadResult:
    """The load generator's own figures, like wrk's: `rps` is the overall rate. Everything
    past the load generator reads a `Measurement` (see `measurement`)."""

    rps: float
    duration_s: float
    requests: int  # responses completed in the measurement window (any status)
    latency_ms: dict[str, float]  # p50, p90, p99, p999, max, mean
    errors: dict[str, int]  # connect, read, timeout, status_4xx, status_5xx
    error_rate: float
    bytes: int
    connections: int
    starved_connections: int
    littles_law_ratio: float | None  # closed loop only; None in open loop
    fairness: float | None  # Jain's index of per-connection responses; None if not judged
    unfair: bool
    unfair_reasons: list[str]
    loadgen_cpu: float  # % busy, of the busiest load process
    loadgen_cpu_kernel: float  # the part of loadgen_cpu spent in the kernel
    client_bound: bool
    late_requests: int
    target_rps: float | None
    total_responses: int  # every response received, warm-up and drain included
    windows_rps: list[float]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["latency_ms"] = dict(self.latency_ms)
        data["errors"] = dict(self.errors)
        return data

    def measurement(
        self, memory: Memory | None = None, startup_s: float | None = None
    ) -> Measurement:
        """These figures as the typed measurement the rest of the tuner reads."""
        windows = tuple(self.windows_rps)
        latency = self.latency_ms
        return Measurement(
            median_rps=median_of_windows(windows, self.rps),
            overall_rps=self.rps,
            window_rps=windows,
            duration_s=self.duration_s,
            requests=self.requests,
            total_responses=self.total_responses,
            response_bytes=self.bytes,
            latency=Latency(
                p50_ms=latency["p50"],
                p90_ms=latency["p90"],
                p99_ms=latency["p99"],
                p999_ms=latency["p999"],
                max_ms=latency["max"],
                mean_ms=latency["mean"],
            ),
            errors=Errors(**self.errors),
            error_rate=self.error_rate,
            connections=self.connections,
            starved_connections=self.starved_connections,
            fairness_index=self.fairness,
            littles_law_ratio=self.littles_law_ratio,
            unfair_reasons=tuple(self.unfair_reasons),
            late_requests=self.late_requests,
            target_rps=self.target_rps,
            loadgen_cpu_pct=self.loadgen_cpu,
            loadgen_kernel_cpu_pct=self.loadgen_cpu_kernel,
            client_bound=self.client_bound,
            notes=tuple(self.notes),
            memory=memory,
            startup_s=startup_s,
        )


def assess(
    *,
    rps: float,
    mean_completed_ms: float,
    connections: int,
    open_loop: bool,
    starved: int,
    fairness: float | None,
    error_rate: float,
    loadgen_cpu: float,
    late_requests: int,
    requests: int,
) -> tuple[float | None, list[str], bool, list[str]]:
    """(littles_law_ratio, unfair_reasons, client_bound, notes) for a run's totals."""
    reasons: list[str] = []
    notes: list[str] = []
    ratio = None
    if not open_loop:
        ratio = rps * (mean_completed_ms / 1000) / connections
        # Judged only once the window held a response per connection: a window shorter than
        # one turn of a slow fair queue (1 sync worker, 64 clients, 50 ms each: 3.2 s) sees
        # only its shorter waits complete, and the ratio comes out low by chance.
        if ratio < LITTLES_LAW_MIN_RATIO and requests >= connections:
            reasons.append(
                f"littles_law: rps x mean latency / connections = {ratio:.2f} "
                f"(< {LITTLES_LAW_MIN_RATIO}); most connections were waiting unanswered, "
                "so the latency percentiles understate what clients saw"
            )
    if starved:
        reasons.append(
            f"starved: {starved} of {connections} connections got no response during the "
            "measurement window (the server serves some clients and ignores others)"
        )
    if fairness is not None and fairness < FAIRNESS_MIN_INDEX:
        reasons.append(
            f"unequal_share: fairness index {fairness:.2f} (< {FAIRNESS_MIN_INDEX}) of the "
            "responses per connection; some clients were served over and over while others "
            "waited"
        )
    client_bound = loadgen_cpu > CLIENT_BOUND_CPU_PCT
    if client_bound:
        notes.append(
            f"client_bound: the load generator was {loadgen_cpu:.0f}% busy; this figure is its "
            "limit, not the server's; give it more cores with --load-cpus"
        )
    if error_rate > ERROR_RATE_NOTE:
        notes.append(
            f"errors: {error_rate:.1%} of requests failed (more than {ERROR_RATE_NOTE:.0%}); "
            "the figures describe a failing server"
        )
    if open_loop and late_requests:
        share = late_requests / max(1, requests)
        notes.append(
            f"late: {late_requests} requests ({share:.1%}) were sent late (no idle connection "
            "or a busy client); their latency counts from the intended time"
        )
    notes += ["unfair: " + r for r in reasons]
    return ratio, reasons, client_bound, notes


def fairness_index(shares: list[int]) -> float | None:
    """Jain's fairness index of per-connection responses, or None when the connections got too
    few each (under FAIRNESS_MIN_MEAN) for the spread to mean anything."""
    if not shares or sum(shares) < FAIRNESS_MIN_MEAN * len(shares):
        return None
    return sum(shares) ** 2 / (len(shares) * sum(x * x for x in shares))
