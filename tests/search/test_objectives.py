"""Objective values, directions, SLO constraints and the `multi` pick rule."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tests.support.measurements import measurement
from tuner.errors import ConfigError, InvalidMeasurement
from tuner.metrics.lanes import ProbeFigures, StreamFigures
from tuner.search.objectives import (
    LATENCY,
    MULTI,
    OBJECTIVES,
    THROUGHPUT,
    Figures,
    Slo,
    constraints,
    feasible,
    infeasible_reason,
    named_constraints,
    objective_named,
    pick_pareto_point,
)

NAN = math.nan


def metrics(rps: float, p99: float, pss: float | None = 100.0, errors: float = 0.0) -> Figures:
    return Figures(rps, p99, NAN if pss is None else pss, errors)


def test_directions() -> None:
    assert OBJECTIVES == ("throughput", "latency", "multi")
    assert objective_named("throughput").directions == ["maximize"]
    assert objective_named("latency").directions == ["minimize"]
    assert objective_named("multi").directions == ["maximize", "minimize", "minimize"]
    with pytest.raises(ConfigError, match="valid objectives: throughput, latency, multi"):
        objective_named("speed")


def test_values_match_directions() -> None:
    m = metrics(1200.0, 35.0, 250.0)
    assert THROUGHPUT.values(m) == [1200.0]
    assert LATENCY.values(m) == [35.0]
    assert MULTI.values(m) == [1200.0, 35.0, 250.0]
    for name in OBJECTIVES:
        objective = objective_named(name)
        assert len(objective.values(m)) == len(objective.directions)


def test_values_missing_metric_is_an_invalid_measurement() -> None:
    with pytest.raises(InvalidMeasurement, match="PSS"):
        MULTI.values(metrics(1.0, 1.0, pss=None))
    with pytest.raises(InvalidMeasurement, match="p99"):
        LATENCY.values(Figures(1.0, NAN, NAN, 0.0))
    assert THROUGHPUT.values(Figures(3, NAN, NAN, 0.0)) == [3.0]  # only what it needs


def test_every_ranking_goes_through_the_objective() -> None:
    points = [metrics(100.0, 50.0), metrics(300.0, 90.0), metrics(200.0, 10.0)]
    assert THROUGHPUT.rank(points, lambda f: f) == [points[1], points[2], points[0]]
    assert LATENCY.rank(points, lambda f: f) == [points[2], points[0], points[1]]
    assert MULTI.rank(points, lambda f: f)[0] is points[1]  # fastest first, for display
    assert THROUGHPUT.order_text == "highest req/s" and LATENCY.order_text == "lowest p99"
    # An unmeasured figure ranks last, whatever the direction.
    assert LATENCY.rank([Figures(1, NAN, 1, 0), points[1]], lambda f: f)[0] is points[1]


def test_pruning_follows_the_objective() -> None:
    class Window:
        rps, p99_ms = 900.0, 12.0

    assert THROUGHPUT.window_value(Window()) == 900.0
    assert LATENCY.window_value(Window()) == 12.0
    assert MULTI.window_value(Window()) is None  # Optuna cannot prune several objectives


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
    unmeasured = Figures(10.0, NAN, NAN, NAN)
    c = constraints(slo, unmeasured)
    assert len(c) == 4 and all(math.isinf(x) and x > 0 for i, x in enumerate(c) if i != 1)
    assert not feasible(slo, unmeasured)


def test_an_unfair_run_is_infeasible_by_how_unequal_it_was() -> None:
    m = measurement(7000.0, 0.7)  # fast-looking figures of a server that served a few clients
    assert feasible(Slo(), Figures.of(m))
    starved = replace(m, unfair_reasons=("starved",), connections=64, starved_connections=48)
    assert starved.unfairness == pytest.approx(0.75)
    assert not feasible(Slo(), Figures.of(starved))
    assert infeasible_reason(Slo(), starved) == "unfair: starved"
    uneven = replace(m, unfair_reasons=("x",), fairness_index=0.8, littles_law_ratio=1.1)
    assert uneven.unfairness == pytest.approx(0.2)
    little = replace(m, unfair_reasons=("x",), connections=0, littles_law_ratio=0.4)
    assert little.unfairness == pytest.approx(0.6)
    # Judged unfair although every figure looks even (a rule added later): still infeasible.
    assert replace(m, unfair_reasons=("x",), fairness_index=0.999).unfairness > 0
    # A fair run with a fairness figure is fully feasible.
    assert replace(m, fairness_index=0.5).unfairness == 0.0


def test_slo_violations_say_which_limit_and_by_how_much() -> None:
    m = measurement(100.0, p99=80.0, pss=300.0, error_rate=0.021)
    m = replace(m, errors=replace(m.errors, read=18))
    reason = infeasible_reason(Slo(p99_ms=20.0, max_memory_mb=200.0), m)
    assert reason == (
        "violates SLO: 2.1% of requests failed (read 18) > --max-error-rate 0.01; "
        "p99 80.0 ms > --slo-p99 20; memory (PSS) 300.0 MB > --max-memory 200"
    )
    assert infeasible_reason(Slo(), measurement(100.0)) == ""


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


def _dominates(a: Figures, b: Figures) -> bool:
    ka = (a.rps, -a.p99_ms, -a.pss_mb)
    kb = (b.rps, -b.p99_ms, -b.pss_mb)
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


def test_shortlist_is_the_ranking_or_the_front_with_its_pick_first() -> None:
    fat = metrics(1000.0, 40.0, 400.0)
    lean = metrics(970.0, 42.0, 150.0)
    slow = metrics(500.0, 40.0, 50.0)
    points = [slow, fat, lean]
    assert THROUGHPUT.shortlist(points, lambda f: f, lambda f: False) == [fat, lean, slow]
    on_front = [fat, lean]  # as Optuna's best_trials would say
    assert MULTI.shortlist(points, lambda f: f, lambda f: f in on_front) == [lean, fat]
    assert MULTI.shortlist(points, lambda f: f, lambda f: False) == []


def test_a_cut_stream_and_a_restart_break_the_slo_only_in_a_study_with_that_lane() -> None:
    cut = StreamFigures("/s", 2, 2, 1, {"closed early": 2})
    restart = ProbeFigures("/healthz", 4, 3, 3, 1.0, 3, {"over 1 s": 3}, 1000.0, 1000.0, 1000.0)
    run = replace(measurement(100), streams=cut, probe=restart)
    assert infeasible_reason(Slo(), run) == ""
    assert named_constraints(Slo(), Figures.of(run)).keys() == {"error_rate", "fair"}
    both = Slo(streams=True, probe=True)
    constraints = named_constraints(both, Figures.of(run))
    assert constraints["streams_cut"] == pytest.approx(0.5)
    assert constraints["probe"] == pytest.approx(1 / 3)  # 3 in a row at a threshold of 3
    assert infeasible_reason(both, run) == (
        "violates SLO: 50% of the streams cut (2 completed, 2 cut (2 closed early), 1 open at "
        "the end); the orchestrator would restart this server: 3 probes of /healthz in a row "
        "failed (over 1 s or not 2xx-3xx; it restarts after 3), p99 of probes 1,000 ms"
    )
    clean = replace(
        run,
        streams=replace(cut, cut=0, cut_causes={}),
        probe=replace(restart, longest_failed_run=2),
    )
    assert infeasible_reason(both, clean) == ""
    assert named_constraints(both, Figures.of(clean))["probe"] == pytest.approx(0.0)
