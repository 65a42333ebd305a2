"""What the streams and the health probe beside the request load saw (tuner/loadgen/lanes.py).

Both are judged over the measurement window: a stream by how it ended (read to its end, or
cut and why), how long its reader waited for its first chunk and its longest silence; a probe
by whether it answered in time, and whether enough failed in a row for an orchestrator to
restart the server.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ServerCause:
    """What the server's own log said about the cut streams' run: one of its adapter's cut
    signs (tuner/logsigns.py), how many times it showed over the measurement window, and what
    in the config did it."""

    cause: str  # "gunicorn WORKER TIMEOUT"
    count: int
    explanation: str  # "timeout = 30 s kills a worker whose request runs longer, ..."

    def describe(self) -> str:
        return f"{self.cause} x{self.count} ({self.explanation})"


@dataclass(frozen=True)
class StreamFigures:
    """The streams that ended in the measurement window (`completed`, or `cut` with the count
    per cause) and those still open at its end. `ttfb` is from the request to the stream's
    first body byte (what its reader waits to see anything); `max_gap` is each stream's
    longest silence between two chunks; both in ms, p50 and p99 over the streams."""

    path: str
    completed: int
    cut: int
    open_at_end: int
    cut_causes: Mapping[str, int] = field(default_factory=dict)
    chunks: int = 0
    ttfb_p50_ms: float = math.nan
    ttfb_p99_ms: float = math.nan
    max_gap_p50_ms: float = math.nan
    max_gap_p99_ms: float = math.nan
    # The server's log over the window, where streams were cut and it said why.
    server_causes: tuple[ServerCause, ...] = ()

    @property
    def ended(self) -> int:
        return self.completed + self.cut

    @property
    def cut_share(self) -> float:
        """The share of the streams that ended in the window that were cut (0 when none
        ended)."""
        return self.cut / self.ended if self.ended else 0.0

    def brief(self) -> str:
        """For a trial's line: "streams 40 ok 3 cut"."""
        return f"streams {self.completed} ok {self.cut} cut"

    def describe(self) -> str:
        """e.g. "streams: 40 completed, 3 cut (3 reset; server log: gunicorn WORKER TIMEOUT x3
        (timeout = 30 s kills ...)), 8 open at the end; first byte p99 41 ms; longest gap p99
        180 ms"."""
        cut = f", {self.cut} cut ({causes_text([self])})" if self.cut else ", 0 cut"
        text = f"streams: {self.completed} completed{cut}, {self.open_at_end} open at the end"
        if not math.isnan(self.ttfb_p99_ms):
            text += f"; first byte p99 {self.ttfb_p99_ms:,.0f} ms"
        if not math.isnan(self.max_gap_p99_ms):
            text += f"; longest gap p99 {self.max_gap_p99_ms:,.0f} ms"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "completed": self.completed,
            "cut": self.cut,
            "open_at_end": self.open_at_end,
            "cut_causes": dict(self.cut_causes),
            "server_cut_causes": {
                said.cause: {"count": said.count, "explanation": said.explanation}
                for said in self.server_causes
            },
            "chunks": self.chunks,
            "ttfb_ms": {"p50": _num(self.ttfb_p50_ms), "p99": _num(self.ttfb_p99_ms)},
            "max_gap_ms": {"p50": _num(self.max_gap_p50_ms), "p99": _num(self.max_gap_p99_ms)},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StreamFigures:
        ttfb = data.get("ttfb_ms") or {}
        gap = data.get("max_gap_ms") or {}
        causes = data.get("cut_causes") or {}
        said = data.get("server_cut_causes") or {}
        return cls(
            path=str(data.get("path", "")),
            completed=int(data.get("completed") or 0),
            cut=int(data.get("cut") or 0),
            open_at_end=int(data.get("open_at_end") or 0),
            cut_causes={str(k): int(v) for k, v in causes.items()},
            chunks=int(data.get("chunks") or 0),
            ttfb_p50_ms=_float(ttfb.get("p50")),
            ttfb_p99_ms=_float(ttfb.get("p99")),
            max_gap_p50_ms=_float(gap.get("p50")),
            max_gap_p99_ms=_float(gap.get("p99")),
            server_causes=tuple(
                ServerCause(str(cause), int(v.get("count") or 0), str(v.get("explanation", "")))
                for cause, v in said.items()
            ),
        )


@dataclass(frozen=True)
class ProbeFigures:
    """The probes sent in the measurement window: how many failed (no answer in `timeout_s`,
    or a status outside 200-399, with the count per cause), the longest run of failures in a
    row, and the latency of every probe (a timed-out one counts as `timeout_s`), in ms.
    `failures` in a row and an orchestrator restarts the server (`restart`)."""

    path: str
    sent: int
    failed: int
    longest_failed_run: int
    timeout_s: float
    failures: int  # the threshold: this many failed in a row restart the server
    fail_causes: Mapping[str, int] = field(default_factory=dict)
    p50_ms: float = math.nan
    p99_ms: float = math.nan
    max_ms: float = math.nan

    @property
    def restart(self) -> bool:
        """Would the orchestrator have restarted the server during the run?"""
        return self.longest_failed_run >= self.failures

    def brief(self) -> str:
        """For a trial's line: "probe p99 3 ms" or "probe 3 failed, 3 in a row"."""
        if self.failed:
            return f"probe {self.failed} failed, {self.longest_failed_run} in a row"
        return f"probe p99 {self.p99_ms:,.0f} ms"

    def describe(self) -> str:
        """e.g. "probe /healthz: 3 of 9 failed (3 over 1 s), 3 in a row; p99 1,000 ms"."""
        text = f"probe {self.path}: {self.failed} of {self.sent} failed"
        if self.failed:
            causes = counts_text(self.fail_causes)
            text += f" ({causes}), {self.longest_failed_run} in a row"
        if not math.isnan(self.p99_ms):
            text += f"; p99 {self.p99_ms:,.0f} ms"
        return text

    def restart_text(self) -> str:
        """Why this run breaks the probe's SLO, for a trial's line and the file's header."""
        return (
            f"the orchestrator would restart this server: {self.longest_failed_run} probes of "
            f"{self.path} in a row failed (over {self.timeout_s:g} s or not 2xx-3xx; it "
            f"restarts after {self.failures}), p99 of probes {self.p99_ms:,.0f} ms"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "sent": self.sent,
            "failed": self.failed,
            "longest_failed_run": self.longest_failed_run,
            "timeout_s": self.timeout_s,
            "failures": self.failures,
            "fail_causes": dict(self.fail_causes),
            "restart": self.restart,
            "latency_ms": {"p50": _num(self.p50_ms), "p99": _num(self.p99_ms)}
            | {"max": _num(self.max_ms)},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProbeFigures:
        latency = data.get("latency_ms") or {}
        causes = data.get("fail_causes") or {}
        return cls(
            path=str(data.get("path", "")),
            sent=int(data.get("sent") or 0),
            failed=int(data.get("failed") or 0),
            longest_failed_run=int(data.get("longest_failed_run") or 0),
            timeout_s=_float(data.get("timeout_s")),
            failures=int(data.get("failures") or 0),
            fail_causes={str(k): int(v) for k, v in causes.items()},
            p50_ms=_float(latency.get("p50")),
            p99_ms=_float(latency.get("p99")),
            max_ms=_float(latency.get("max")),
        )


def counts_text(counts: Mapping[str, int]) -> str:
    """Counts by what they count, the most first: "12 closed early, 2 reset"."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{count} {what}" for what, count in ranked)


def cut_causes(streams: Iterable[StreamFigures]) -> Counter[str]:
    """The causes of the cut streams of several runs, added up."""
    causes: Counter[str] = Counter()
    for figures in streams:
        causes.update(figures.cut_causes)
    return causes


def server_causes(streams: Iterable[StreamFigures]) -> tuple[ServerCause, ...]:
    """What the server's log said over several runs, each cause's counts added up (its
    explanation the first run's: one config's runs share their settings)."""
    said: dict[str, ServerCause] = {}
    for figures in streams:
        for cause in figures.server_causes:
            before = said.get(cause.cause)
            count = cause.count + (before.count if before else 0)
            said[cause.cause] = ServerCause(cause.cause, count, (before or cause).explanation)
    return tuple(said.values())


def causes_text(streams: Sequence[StreamFigures]) -> str:
    """Why streams were cut, from both ends: as the client saw it, then as the server's log
    said it where it did ("3 reset; server log: gunicorn WORKER TIMEOUT x3 (timeout = ...)")."""
    client = counts_text(cut_causes(streams))
    said = ", ".join(cause.describe() for cause in server_causes(streams))
    return f"{client}; server log: {said}" if said else client


def _num(value: float) -> float | None:
    """A figure for JSON: None for an unknown one (nan is not JSON)."""
    return None if math.isnan(value) else round(value, 3)


def _float(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def lanes_brief(streams: StreamFigures | None, probe: ProbeFigures | None) -> list[str]:
    """The lanes' figures for a trial's or a round's line; empty without lanes."""
    return [lane.brief() for lane in (streams, probe) if lane is not None]


class WithLanes(Protocol):
    """A measurement's lane figures (tuner.metrics.measurement.Measurement)."""

    @property
    def streams(self) -> StreamFigures | None: ...
    @property
    def probe(self) -> ProbeFigures | None: ...


def lanes_over_runs(runs: Sequence[WithLanes]) -> list[str]:
    """The lanes of a config's runs added up, for the written file's evidence: "streams 120
    completed, 0 cut", "probe 0 of 48 failed, p99 up to 4 ms"; empty without lanes."""
    streams = [run.streams for run in runs if run.streams is not None]
    probes = [run.probe for run in runs if run.probe is not None]
    parts = []
    if streams:
        cut = sum(s.cut for s in streams)
        said = f" ({causes_text(streams)})" if cut else ""
        parts.append(f"streams {sum(s.completed for s in streams)} completed, {cut} cut{said}")
    if probes:
        worst = max((p.p99_ms for p in probes if not math.isnan(p.p99_ms)), default=math.nan)
        restarts = sum(p.restart for p in probes)
        text = f"probe {sum(p.failed for p in probes)} of {sum(p.sent for p in probes)} failed"
        text += f", p99 up to {worst:,.0f} ms" if not math.isnan(worst) else ""
        text += f", a restart in {restarts} of {len(probes)} runs" if restarts else ""
        parts.append(text)
    return parts
