"""Objective values, directions, SLO constraints and the `multi` pick rule."""

from __future__ import annotations

import math

import pytest

from tuner.errors import ConfigError, InvalidMeasurement
from tuner.search.objectives import (
    OBJECTIVES,
    Slo,
    constraints,
    directions,
    feasible,
    pick_pareto_point,
    unfairness,
    values,
)


def metrics(rps: float, p99: float, pss: float | None = 100.0, errors: float = 0.0) -> dict:
    return {
        "rps": rps,
        "error_rate": errors,
        "latency_ms": {"p50": p99 / 3, "p99": p99},
        "memory_mb": {"pss_mean": pss, "pss_max": pss},
    }


def test_directions() -> None:
    assert OBJECTIVES == ("throughput", "latency", "multi")
    assert directions("throughput") == ["maximize"]
    assert directions("latency") == ["minimize"]
    assert directions("multi") == ["maximize", "minimize", "minimize"]
    with pytest.raises(ConfigError, match="valid objectives: throughput, latency, multi"):
        directions("speed")


def test_values_match_directions() -> None:
    m = metrics(1200.0, 35.0, 250.0)
    assert values("throughput", m) == [1200.0]
    assert values("latency", m) == [35.0]
    assert values("multi", m) == [1200.0, 35.0, 250.0]
    for objective in OBJECTIVES:
        assert len(values(objective, m)) == len(directions(objective))


def test_values_missing_metric_is_an_invalid_measurement() -> None:
    with pytest.raises(InvalidMeasurement, match="memory_mb.pss_mean"):
        values("multi", metrics(1.0, 1.0, pss=None))
    with pytest.raises(InvalidMeasurement, match="latency_ms.p99"):
        values("latency", {"rps": 1.0})
    assert values("throughput", {"rps": 3}) == [3.0]  # only what the objective needs


def test_constraints_sign_convention_and_length() -> None:
    m = metrics(1000.0, 50.0, 300.0, errors=0.002)
    assert constraints(Slo(), m) == pytest.approx([0.002 - 0.01, 0.0])  # error rate, fairness
    full = Slo(p99_ms=40.0, max_error_rate=0.001, max_memory_mb=400.0)
    c = constraints(full, m)
    assert c == pytest.approx([0.001, 0.0, 10.0, -100.0])
    assert [x <= 0 for x in c] == [False, True, False, True]
    assert not feasible(full, m)
    assert feasible(Slo(p99_ms=60.0, max_memory_mb=400.0), m)
    # exactly at the limit is satisfied (Optuna: <= 0)
    assert feasible(Slo(p99_ms=50.0, max_error_rate=0.002, max_memory_mb=300.0), m)


def test_constraints_same_length_when_metrics_are_missing() -> None:
    slo = Slo(p99_ms=40.0, max_memory_mb=400.0)
    c = constraints(slo, {"rps": 10.0})
    assert len(c) == 4 and all(math.isinf(x) and x > 0 for i, x in enumerate(c) if i != 1)
    assert not feasible(slo, {"rps": 10.0})


def test_an_unfair_run_is_infeasible_by_how_unequal_it_was() -> None:
    m = metrics(7000.0, 0.7)  # fast-looking figures of a server that served a few clients
    assert feasible(Slo(), m)
    starved = {**m, "unfair": True, "connections": 64, "starved_connections": 48}
    assert unfairness(starved) == pytest.approx(0.75)
    assert not feasible(Slo(), starved)
    uneven = {**m, "unfair": True, "connections": 64, "fairness": 0.8, "littles_law_ratio": 1.1}
    assert unfairness(uneven) == pytest.approx(0.2)
    assert unfairness({**m, "unfair": True, "littles_law_ratio": 0.4}) == pytest.approx(0.6)
    # Judged unfair although every figure looks even (a rule added later): still infeasible.
    assert unfairness({**m, "unfair": True, "fairness": 0.999}) > 0
    # A fair run with a fairness figure is fully feasible.
    assert unfairness({**m, "unfair": False, "fairness": 0.5}) == 0.0


def test_pick_prefers_leanest_within_noise_of_fastest() -> None:
    points = [
        metrics(1000.0, 40.0, 400.0),  # fastest, hungriest
        metrics(970.0, 42.0, 150.0),  # within 5% rps, 10% p99: the lean pick
        metrics(900.0, 43.0, 80.0),  # 10% slower: outside the rps band
        metrics(990.0, 60.0, 100.0),  # fast but p99 50% worse: outside the p99 band
    ]
    assert pick_pareto_point(points) == 1
    assert pick_pareto_point(points, rps_tolerance=0.0) == 0
    assert pick_pareto_point(points, rps_tolerance=0.2) == 2
    assert pick_pareto_point(points, p99_tolerance=1.0) == 3


def test_pick_respects_slo_and_falls_back_to_all_points() -> None:
    points = [
        metrics(1000.0, 40.0, 400.0),
        metrics(600.0, 30.0, 100.0),
    ]
    assert pick_pareto_point(points, Slo(max_memory_mb=200.0)) == 1
    assert pick_pareto_point(points, Slo(max_memory_mb=50.0)) == 0  # none feasible: all count
    errors = [metrics(1000.0, 40.0, 100.0, errors=0.5), metrics(500.0, 40.0, 100.0)]
    assert pick_pareto_point(errors) == 1  # default Slo rejects a 50% error rate


def test_pick_ties_and_missing_metrics() -> None:
    same = [metrics(1000.0, 40.0, 100.0), metrics(1000.0, 40.0, 100.0)]
    assert pick_pareto_point(same) == 0
    tie_memory = [metrics(980.0, 40.0, 100.0), metrics(1000.0, 40.0, 100.0)]
    assert pick_pareto_point(tie_memory) == 1  # same memory: higher rps wins
    no_memory = [metrics(1000.0, 40.0, pss=None), metrics(990.0, 40.0, 300.0)]
    assert pick_pareto_point(no_memory) == 1  # unmeasured memory counts as worst
    with pytest.raises(ValueError):
        pick_pareto_point([])


def _dominates(a: dict, b: dict) -> bool:
    ka = (a["rps"], -a["latency_ms"]["p99"], -a["memory_mb"]["pss_mean"])
    kb = (b["rps"], -b["latency_ms"]["p99"], -b["memory_mb"]["pss_mean"])
    return all(x >= y for x, y in zip(ka, kb, strict=True)) and ka != kb


def test_pick_is_always_pareto_optimal() -> None:
    import random

    rng = random.Random(7)
    for _ in range(300):
        points = [
            metrics(rng.uniform(100, 1000), rng.uniform(5, 100), rng.uniform(50, 500))
            for _ in range(rng.randint(1, 12))
        ]
        chosen = points[pick_pareto_point(points)]
        assert not any(_dominates(p, chosen) for p in points)
