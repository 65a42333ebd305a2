"""The checks that say whether a load run's numbers can be trusted: unfair service, a busy
client, errors, late requests. The run's figures themselves are a `Measurement`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # NOTE: the engine builds measurements from these checks; no import cycle
    from tuner.metrics.measurement import Measurement

# The load generator's own CPU above this (% of its core during the window) means the
# measured rate is the client's limit, not the server's: the busiest worker's, or the load
# CPUs' on average, where the lanes beside the load share them with the workers.
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
# A run under the fairness line (FAIRNESS_MIN_INDEX) by less than this, with no other sign
# of unfair service, is "nearly fair": one run may tip such a config either way. Read from the
# kept grid_vs_tuner studies of stop 24: the fastest unfair trials on gunicorn hello (gevent,
# 1-5 workers) measured 0.888-0.900, and the grid's own runs of such configs passed the line;
# the clearly uneven trials measured 0.16-0.79 (0.18-0.84 above), uWSGI's starving configs
# under 0.4.
NEARLY_FAIR_INDEX = 0.85

# The latency percentiles every run reports (Latency's p50_ms, p90_ms, p99_ms, p999_ms).
PERCENTILES = (50.0, 90.0, 99.0, 99.9)


@dataclass(frozen=True)
class RunTotals:
    """A run's totals the checks judge. `rps`, `mean_completed_ms`, `connections`, `fairness`
    and `requests` are the fast clients'. Slow clients (`slow_connections`, slow by design:
    their rate is their link's and their think time's) are judged only on starvation, by their
    own rule (the worker's), and `starved` includes their `slow_starved`."""

    rps: float
    mean_completed_ms: float
    connections: int
    open_loop: bool
    starved: int
    fairness: float | None
    error_rate: float
    loadgen_cpu: float
    late_requests: int
    requests: int
    slow_connections: int = 0
    slow_starved: int = 0
    # The workers' CPU summed and the lanes' process's (streams, a probe), each in % of one
    # core, over the `load_cpus` both run on.
    workers_cpu: float = 0.0
    lanes_cpu: float = 0.0
    load_cpus: int = 1

    @property
    def load_cpus_busy(self) -> float:
        """How busy the load CPUs were on average, % of each: the workers and the lanes."""
        return (self.workers_cpu + self.lanes_cpu) / max(1, self.load_cpus)


@dataclass(frozen=True)
class Assessment:
    """What the checks found: Little's law's ratio (closed loop only), the reasons the run was
    unfair, whether the load generator was the limit, and the notes the run carries (the
    unfair reasons among them)."""

    littles_law_ratio: float | None
    unfair_reasons: tuple[str, ...]
    client_bound: bool
    notes: tuple[str, ...]


def assess(run: RunTotals) -> Assessment:
    """The checks over a run's totals."""
    ratio = None
    if not run.open_loop:
        ratio = run.rps * (run.mean_completed_ms / 1000) / run.connections
    reasons = _unfair_reasons(run, ratio)
    client_bound = max(run.loadgen_cpu, run.load_cpus_busy) > CLIENT_BOUND_CPU_PCT
    notes = [*_notes(run, client_bound), *("unfair: " + r for r in reasons)]
    return Assessment(ratio, tuple(reasons), client_bound, tuple(notes))


def _unfair_reasons(run: RunTotals, ratio: float | None) -> list[str]:
    reasons: list[str] = []
    # Judged only once the window held a response per connection: a window shorter than
    # one turn of a slow fair queue (1 sync worker, 64 clients, 50 ms each: 3.2 s) sees
    # only its shorter waits complete, and the ratio comes out low by chance.
    if ratio is not None and ratio < LITTLES_LAW_MIN_RATIO and run.requests >= run.connections:
        reasons.append(
            f"littles_law: rps x mean latency / connections = {ratio:.2f} "
            f"(< {LITTLES_LAW_MIN_RATIO}); most connections were waiting unanswered, "
            "so the latency percentiles understate what clients saw"
        )
    if run.starved:
        slow = f" ({run.slow_starved} of them slow clients)" if run.slow_starved else ""
        reasons.append(
            f"starved: {run.starved} of {run.connections + run.slow_connections} "
            f"connections{slow} got no response during the measurement window (the server "
            "serves some clients and ignores others)"
        )
    if run.fairness is not None and run.fairness < FAIRNESS_MIN_INDEX:
        reasons.append(
            f"unequal_share: fairness index {run.fairness:.2f} (< {FAIRNESS_MIN_INDEX}) of the "
            "responses per connection; some clients were served over and over while others "
            "waited"
        )
    return reasons


def _notes(run: RunTotals, client_bound: bool) -> list[str]:
    notes: list[str] = []
    if client_bound:
        busy = f"the load generator was {run.loadgen_cpu:.0f}% busy"
        if run.loadgen_cpu <= CLIENT_BOUND_CPU_PCT:  # the lanes tipped it over
            busy = (
                f"the load CPUs were {run.load_cpus_busy:.0f}% busy with the load and the "
                f"lanes beside it ({run.lanes_cpu:.0f}% of a core)"
            )
        notes.append(
            f"client_bound: {busy}; this figure is its limit, not the server's; give it more "
            "cores with --load-cpus"
        )
    if run.error_rate > ERROR_RATE_NOTE:
        notes.append(
            f"errors: {run.error_rate:.1%} of requests failed (more than "
            f"{ERROR_RATE_NOTE:.0%}); the figures describe a failing server"
        )
    if run.open_loop and run.late_requests:
        share = run.late_requests / max(1, run.requests)
        notes.append(
            f"late: {run.late_requests} requests ({share:.1%}) were sent late (no idle "
            "connection or a busy client); their latency counts from the intended time"
        )
    return notes


def fairness_index(shares: list[int]) -> float | None:
    """Jain's fairness index of per-connection responses, or None when the connections got too
    few each (under FAIRNESS_MIN_MEAN) for the spread to mean anything."""
    if not shares or sum(shares) < FAIRNESS_MIN_MEAN * len(shares):
        return None
    return sum(shares) ** 2 / (len(shares) * sum(x * x for x in shares))


def nearly_fair(measurement: Measurement) -> bool:
    """Judged unfair only because the responses per connection were a little uneven: no
    connection starved, Little's law met, the fairness index at least NEARLY_FAIR_INDEX."""
    index = measurement.fairness_index
    return (
        len(measurement.unfair_reasons) == 1
        and measurement.starved_connections == 0
        and index is not None
        and NEARLY_FAIR_INDEX <= index < FAIRNESS_MIN_INDEX
    )
