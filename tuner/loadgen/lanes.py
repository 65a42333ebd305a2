"""Traffic beside the request load, as production sends it: long-lived streams and a health probe.

A short-request benchmark never holds a connection for seconds, and never asks the server a
question it must answer in time while saturated. These two lanes do, from a process of their
own beside the load workers (tuner/loadgen/beside.py), so the request figures stay those of
the request load alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.loadgen.inputs import is_path, number

# Kubernetes' defaults for an HTTP probe: periodSeconds, timeoutSeconds, failureThreshold.
KUBE_PERIOD_S = 10.0
KUBE_TIMEOUT_S = 1.0
KUBE_FAILURES = 3
# A run lasts seconds, kubelet probes every 10 s: the lane sends a probe at least this often
# (one at a time, each on a new connection), so a short run still holds several, and judges
# them as kubelet would judge its own.
PROBE_SAMPLE_S = 0.5
# Streams are file descriptors in one process, beside the load's own connections.
MAX_STREAMS = 512


@dataclass(frozen=True)
class Streams:
    """`count` streams held open at once on `path`, each read to its end and reopened. A gap
    between two chunks longer than `stall_s` ends the stream as cut (stalled)."""

    count: int
    path: str
    stall_s: float = 5.0

    def problem(self) -> str | None:
        if isinstance(self.count, bool) or not isinstance(self.count, int):
            return f"streams {self.count!r}: expected a whole number 1-{MAX_STREAMS}"
        if not 1 <= self.count <= MAX_STREAMS:
            return f"streams {self.count}: expected a whole number 1-{MAX_STREAMS}"
        if not is_path(self.path):
            return f"stream path {self.path!r}: expected an absolute path like /stream"
        if not _positive(self.stall_s):
            return f"stream stall {self.stall_s!r}: expected seconds > 0"
        return None

    def describe(self) -> str:
        return f"{self.count} stream{'s' if self.count != 1 else ''} on {self.path}"


@dataclass(frozen=True)
class Probe:
    """A health probe sent the way kubelet sends one: GET `path` on a new connection, failed
    when it answers outside 200-399 or not within `timeout_s`; `failures` failed in a row and
    the orchestrator restarts the server. kubelet waits `interval_s` between probes; the lane
    samples at least every PROBE_SAMPLE_S (see `sample_s`)."""

    path: str
    interval_s: float = KUBE_PERIOD_S
    timeout_s: float = KUBE_TIMEOUT_S
    failures: int = KUBE_FAILURES

    @property
    def sample_s(self) -> float:
        """The time between the starts of two probes the lane sends."""
        return min(self.interval_s, PROBE_SAMPLE_S)

    def problem(self) -> str | None:
        if not is_path(self.path):
            return f"probe path {self.path!r}: expected an absolute path like /healthz"
        if not _positive(self.interval_s):
            return f"probe interval {self.interval_s!r}: expected seconds > 0"
        if not _positive(self.timeout_s):
            return f"probe timeout {self.timeout_s!r}: expected seconds > 0"
        bad_count = isinstance(self.failures, bool) or not isinstance(self.failures, int)
        if bad_count or self.failures < 1:
            return f"probe failures {self.failures!r}: expected a whole number >= 1"
        return None

    def describe(self) -> str:
        return (
            f"probe {self.path} (timeout {self.timeout_s:g} s, restart after {self.failures} "
            f"failed in a row)"
        )


@dataclass(frozen=True)
class Lanes:
    """The lanes a run has beside its request load; none by default."""

    streams: Streams | None = None
    probe: Probe | None = None

    def __bool__(self) -> bool:
        return self.streams is not None or self.probe is not None

    def kinds(self) -> tuple[str, ...]:
        """The lanes present, by name: "streams", "probe"."""
        named = (("streams", self.streams), ("probe", self.probe))
        return tuple(name for name, lane in named if lane is not None)

    def problem(self, run_s: float) -> str | None:
        """What is wrong with the lanes of a run lasting `run_s` (warm-up and measurement)."""
        if self.streams is not None and (problem := self.streams.problem()):
            return problem
        if self.probe is not None:
            if problem := self.probe.problem():
                return problem
            if self.probe.timeout_s >= run_s:
                return (
                    f"probe timeout {self.probe.timeout_s:g} s: expected less than the run "
                    f"({run_s:g} s of warm-up and measurement)"
                )
        return None

    def describe(self) -> str:
        parts = [lane.describe() for lane in (self.streams, self.probe) if lane is not None]
        return "; ".join(parts)


def _positive(value: object) -> bool:
    return number(value) and value > 0
