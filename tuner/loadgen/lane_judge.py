"""The lanes' records judged over the measurement window, and the input they show was wrong.

A stream counts where it ended: in the window (read to its end, or cut), or still open at the
window's end; one that ended in the warm-up is the warm-up's. Its longest gap is over the
silences that ended in the window. A probe counts when it was sent in the window.

Bad input shows only once the lane ran, so it is judged here, as a ConfigError (exit 2): a
stream path that answers a plain response, a probe path that is not there, a stream longer
than the run.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.errors import ConfigError
from tuner.loadgen.beside import LaneReport, ProbeRecord, StreamRecord
from tuner.loadgen.lanes import Lanes, Probe, Streams
from tuner.metrics.lanes import ProbeFigures, StreamFigures


@dataclass(frozen=True)
class LaneFigures:
    """What each lane of a run saw; None for a lane the run did not have."""

    streams: StreamFigures | None = None
    probe: ProbeFigures | None = None


def judge(lanes: Lanes, report: LaneReport, warmup_s: float, stopped_early: bool) -> LaneFigures:
    """The figures of each lane the run had; ConfigError where the lane's input was wrong."""
    window = (warmup_s, report.ended_s)
    streams = probe = None
    if lanes.streams is not None:
        _check_streams(lanes.streams, report.streams, report.ended_s, stopped_early)
        streams = stream_figures(lanes.streams.path, report.streams, window)
    if lanes.probe is not None:
        _check_probe(lanes.probe, report.probes)
        probe = probe_figures(lanes.probe, report.probes, window)
    return LaneFigures(streams, probe)


def stream_figures(
    path: str, records: Sequence[StreamRecord], window: tuple[float, float]
) -> StreamFigures:
    start, end = window
    judged = [r for r in records if r.started < end and (r.ended is None or r.ended >= start)]
    ended = [r for r in judged if r.ended is not None and r.ended <= end]
    cut = Counter(r.cause for r in ended if r.cause is not None)
    ttfb = [r.first_byte - r.started for r in judged if r.first_byte is not None]
    gaps = [_longest_gap(r, start, end) for r in judged]
    longest = [g for g in gaps if g is not None]
    chunks = sum(1 for r in judged for t in r.chunk_times if start <= t <= end)
    return StreamFigures(
        path=path,
        completed=sum(1 for r in ended if r.cause is None),
        cut=sum(cut.values()),
        open_at_end=len(judged) - len(ended),
        cut_causes={str(cause): n for cause, n in cut.items()},
        chunks=chunks,
        ttfb_p50_ms=_percentile(ttfb, 50) * 1000,
        ttfb_p99_ms=_percentile(ttfb, 99) * 1000,
        max_gap_p50_ms=_percentile(longest, 50) * 1000,
        max_gap_p99_ms=_percentile(longest, 99) * 1000,
    )


def _longest_gap(record: StreamRecord, start: float, end: float) -> float | None:
    """The longest silence between two of the stream's chunks that ended in the window."""
    times = record.chunk_times
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if start <= b <= end]
    return max(gaps, default=None)


def probe_figures(
    probe: Probe, records: Sequence[ProbeRecord], window: tuple[float, float]
) -> ProbeFigures:
    start, end = window
    judged = [r for r in records if start <= r.started < end]
    run = longest = 0
    for record in judged:
        run = run + 1 if record.cause is not None else 0
        longest = max(longest, run)
    latencies = [min(r.latency_s, probe.timeout_s) for r in judged]
    causes = Counter(r.cause for r in judged if r.cause is not None)
    return ProbeFigures(
        path=probe.path,
        sent=len(judged),
        failed=sum(causes.values()),
        longest_failed_run=longest,
        timeout_s=probe.timeout_s,
        failures=probe.failures,
        fail_causes={str(cause): n for cause, n in causes.items()},
        p50_ms=_percentile(latencies, 50) * 1000,
        p99_ms=_percentile(latencies, 99) * 1000,
        max_ms=max(latencies, default=math.nan) * 1000,
    )


def _check_streams(
    streams: Streams, records: Sequence[StreamRecord], ended_s: float, stopped_early: bool
) -> None:
    answered = [r for r in records if 200 <= r.status < 300]
    if answered and all(r.plain for r in answered):
        raise ConfigError(
            f"stream path {streams.path}: answers {answered[0].plain}, not a stream; "
            "expected a text/event-stream or chunked response the app writes as it goes"
        )
    never_ended = records and all(r.ended is None for r in records)
    flowing = any(r.chunk_times for r in records)
    if never_ended and flowing and not stopped_early:
        raise ConfigError(
            f"stream path {streams.path}: no stream ended within the run ({ended_s:.1f} s of "
            "warm-up and measurement), so none can be judged complete or cut; expected streams "
            "shorter than the run: raise --duration, or shorten the app's streams"
        )


def _check_probe(probe: Probe, records: Sequence[ProbeRecord]) -> None:
    answered = [r for r in records if r.status]
    if answered and all(r.status == 404 for r in answered):
        raise ConfigError(
            f"probe path {probe.path}: answers 404; expected the app's health route, "
            "which answers 200-399 (e.g. --probe /healthz)"
        )


def _percentile(values: Sequence[float], percent: float) -> float:
    """Nearest-rank percentile; nan for no values."""
    if not values:
        return math.nan
    ranked = sorted(values)
    rank = max(1, math.ceil(percent / 100 * len(ranked)))
    return ranked[rank - 1]
