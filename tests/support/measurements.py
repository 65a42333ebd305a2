"""Measurements with chosen figures, for the pure-logic tests (no server, no load)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from tuner.metrics.coreshare import CoresGot, CoreShare
from tuner.metrics.measurement import Errors, Latency, Measurement, Memory


def measurement(
    rps: float, p99: float = 10.0, pss: float | None = 30.0, error_rate: float = 0.0, **changes: Any
) -> Measurement:
    """A fair, closed-loop run with these headline figures (`pss=None`: memory not sampled)."""
    base = Measurement(
        median_rps=rps,
        overall_rps=rps,
        window_rps=(rps,),
        duration_s=1.0,
        requests=int(rps),
        total_responses=int(rps),
        response_bytes=0,
        latency=Latency(p99 / 3, p99 / 2, p99, p99 * 1.5, p99 * 2, p99 / 3),
        errors=Errors(),
        error_rate=error_rate,
        connections=64,
        starved_connections=0,
        fairness_index=None,
        littles_law_ratio=None,
        unfair_reasons=(),
        late_requests=0,
        target_rps=None,
        loadgen_cpu_pct=20.0,
        loadgen_kernel_cpu_pct=5.0,
        client_bound=False,
        memory=None if pss is None else Memory(pss, pss, pss, pss * 2, 4),
        startup_s=0.5,
    )
    return replace(base, **changes)


def cores(
    stolen: float = 0.0, other: float = 0.0, load_stolen: float = 0.0, load_other: float = 0.0
) -> CoresGot:
    """What a run's CPUs lost: the server's one CPU and the load's one (pass it as
    `measurement(..., cores=cores(...))`)."""
    return CoresGot(CoreShare(1, stolen, other), CoreShare(1, load_stolen, load_other))


def unmeasured_p99(m: Measurement) -> Measurement:
    return replace(m, latency=replace(m.latency, p99_ms=math.nan))
