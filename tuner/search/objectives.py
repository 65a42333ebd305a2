"""What a study optimises: objective values, SLO constraints and the `multi` pick rule.

Pure functions of a trial's metrics (a LoadResult-like mapping):

    {"rps": float, "error_rate": float,
     "latency_ms": {"p50": ..., "p99": ...}, "memory_mb": {"pss_mean": ..., ...}}

throughput  maximise rps.
latency     minimise p99 *under load*: p99 is only comparable between configs measured at the
            same offered load, so the latency objective expects an open-loop run at a fixed
            request rate (a config that cannot keep up shows it as queueing delay or errors).
            With a closed-loop load it uses the same connection count for every trial; then
            p99 ~ connections / rps (Little's law) and largely tracks throughput.
multi       maximise rps, minimise p99 and PSS memory (MB) at the same load; Optuna keeps the
            Pareto front and `pick_pareto_point` chooses the one config that is emitted.

Constraints follow Optuna's convention (each value <= 0 means satisfied) so a study can pass
them to `Trial.set_constraint`. Two are always present: the error rate, so a config cannot "win"
latency by failing fast, and fairness, so a config that starves some connections (whose figures
describe only the clients it chose to serve) cannot win at all. Both being constraints rather
than failed trials lets the sampler learn where the boundary lies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from tuner.errors import ConfigError, InvalidMeasurement

OBJECTIVES = ("throughput", "latency", "multi")
_DIRECTIONS = {
    "throughput": ["maximize"],
    "latency": ["minimize"],
    "multi": ["maximize", "minimize", "minimize"],
}


# The constraint value of a run judged unfair whose figures look nearly even: still > 0.
MIN_UNFAIRNESS = 0.01


@dataclass(frozen=True)
class Slo:
    """Limits a config must meet to count: p99 latency, error rate, mean PSS memory."""

    p99_ms: float | None = None
    max_error_rate: float = 0.01
    max_memory_mb: float | None = None


def _check(objective: str) -> None:
    if objective not in OBJECTIVES:
        raise ConfigError(
            f"unknown objective {objective!r}; valid objectives: " + ", ".join(OBJECTIVES)
        )


def directions(objective: str) -> list[str]:
    """Optuna study directions for `objective`, in the order of `values`."""
    _check(objective)
    return list(_DIRECTIONS[objective])


def rps(metrics: Mapping) -> float:
    return _number(metrics.get("rps"), "rps")


def p99_ms(metrics: Mapping) -> float:
    return _number((metrics.get("latency_ms") or {}).get("p99"), "latency_ms.p99")


def pss_mb(metrics: Mapping) -> float:
    return _number((metrics.get("memory_mb") or {}).get("pss_mean"), "memory_mb.pss_mean")


def error_rate(metrics: Mapping) -> float:
    return _number(metrics.get("error_rate"), "error_rate")


def _number(value: object, name: str) -> float:
    # A missing metric means this measurement is unusable: the study records it and goes on.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidMeasurement(f"metric {name} missing or not a number: {value!r}")
    return float(value)


def values(objective: str, metrics: Mapping) -> list[float]:
    """The trial's objective values, in `directions(objective)` order."""
    _check(objective)
    if objective == "throughput":
        return [rps(metrics)]
    if objective == "latency":
        return [p99_ms(metrics)]
    return [rps(metrics), p99_ms(metrics), pss_mb(metrics)]


def constraints(slo: Slo, metrics: Mapping) -> list[float]:
    """Optuna-style constraint values (<= 0 is satisfied), always the same length for a Slo:
    [error_rate - max_error_rate] + [p99 - p99_ms if set] + [pss - max_memory_mb if set].
    A limited metric that was not measured counts as violated (+inf): it cannot be shown met."""
    return list(named_constraints(slo, metrics).values())


def named_constraints(slo: Slo, metrics: Mapping) -> dict[str, float]:
    """The same values as `constraints`, by name (for Optuna's `Trial.set_constraint`)."""
    out = {
        "error_rate": _excess(metrics.get("error_rate"), slo.max_error_rate),
        "fair": unfairness(metrics),
    }
    if slo.p99_ms is not None:
        out["p99_ms"] = _excess((metrics.get("latency_ms") or {}).get("p99"), slo.p99_ms)
    if slo.max_memory_mb is not None:
        out["pss_mb"] = _excess((metrics.get("memory_mb") or {}).get("pss_mean"), slo.max_memory_mb)
    return out


def unfairness(metrics: Mapping) -> float:
    """0 for a run judged fair; else how unequal the service was, in (0, 1]: 1 minus the
    worst of the served share of connections, the fairness index and the Little's-law ratio.
    A graded value (not a flag) tells the sampler which unfair configs were nearly fair."""
    if not metrics.get("unfair"):
        return 0.0
    connections = metrics.get("connections") or 0
    starved = metrics.get("starved_connections") or 0
    shares = [1 - starved / connections] if connections else []
    for key in ("fairness", "littles_law_ratio"):
        value = metrics.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            shares.append(min(1.0, float(value)))
    return min(1.0, max(MIN_UNFAIRNESS, 1 - min(shares, default=0.0)))


def _excess(value: object, limit: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return math.inf
    return float(value) - limit


def satisfied(values: Iterable[float]) -> bool:
    """Optuna's rule: every constraint value <= 0."""
    return all(value <= 0 for value in values)


def feasible(slo: Slo, metrics: Mapping) -> bool:
    return satisfied(constraints(slo, metrics))


def pick_pareto_point(
    points: Sequence[Mapping],
    slo: Slo | None = None,
    *,
    rps_tolerance: float = 0.05,
    p99_tolerance: float = 0.10,
) -> int:
    """Index of the config the `multi` objective emits: the leanest config that is nearly as
    fast as the fastest.

    1. Candidates: the points that meet `slo` (all points if none does, or if no slo).
    2. Keep those with rps >= (1 - rps_tolerance) * the best candidate rps (default 5%:
       differences below that are measurement noise, not a reason to spend memory).
    3. Of those, keep p99 <= (1 + p99_tolerance) * their best p99 (default 10%, p99 is noisier).
    4. Pick the lowest PSS memory; ties go to higher rps, then lower p99, then lower index.

    The pick is always Pareto-optimal among the candidates: anything dominating it would pass
    steps 2-3 too and win step 4. Passing all trials or only Optuna's `best_trials` gives the
    same answer. A point without a metric counts as worst on it.
    """
    if not points:
        raise ValueError("pick_pareto_point needs at least one point")
    slo = slo or Slo()
    indices = [i for i, m in enumerate(points) if feasible(slo, m)] or list(range(len(points)))
    rows = {i: _row(points[i]) for i in indices}  # i -> (rps, p99, pss)

    best_rps = max(r[0] for r in rows.values())
    fast = [i for i in indices if rows[i][0] >= (1 - rps_tolerance) * best_rps]
    best_p99 = min(rows[i][1] for i in fast)
    quick = [i for i in fast if rows[i][1] <= (1 + p99_tolerance) * best_p99]
    return min(quick, key=lambda i: (rows[i][2], -rows[i][0], rows[i][1], i))


def _row(metrics: Mapping) -> tuple[float, float, float]:
    def get(fn: Callable[[Mapping], float], worst: float) -> float:
        try:
            value = fn(metrics)
        except InvalidMeasurement:
            return worst
        return worst if math.isnan(value) else value

    return (get(rps, -math.inf), get(p99_ms, math.inf), get(pss_mb, math.inf))
