"""Objective values, directions, SLO constraints and the `multi` pick rule and knee."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pytest

from tests.support.measurements import measurement
from tuner.errors import ConfigError, InvalidMeasurement
from tuner.metrics.lanes import ProbeFigures, StreamFigures
from tuner.metrics.stats import Spread
from tuner.search.objectives import (
    FRONT_POINTS,
    LATENCY,
    MULTI,
    OBJECTIVES,
    P99,
    PSS,
    RATE_TOLERANCE,
    THROUGHPUT,
    Figures,
    Headline,
    Once,
    Slo,
    constraints,
    feasible,
    infeasible_reason,
    knee_index,
    named_constraints,
    objective_named,
    pick_pareto_point,
    pick_rule,
    slo_violations,
    spread_along,
)

NAN = math.nan


def metrics(rps: float, p99: float, pss: float | None = 100.0, errors: float = 0.0) -> Figures:
    return Figures(rps, p99, NAN if pss is None else pss, errors)


def test_directions() -> None:
    assert OBJECTIVES == ("throughput", "latency", "multi")
    assert objective_named("throughput").directions == ["maximize"]
    assert objective_named("latency").directions == ["minimize"]
    assert objective_named("multi").directions == ["minimize", "minimize"]  # p99, PSS
    with pytest.raises(ConfigError, match="valid objectives: throughput, latency, multi"):
        objective_named("speed")


def test_values_match_directions() -> None:
    m = metrics(1200.0, 35.0, 250.0)
    assert THROUGHPUT.values(m) == [1200.0]
    assert LATENCY.values(m) == [35.0]
    assert MULTI.values(m) == [35.0, 250.0]
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
    assert MULTI.rank(points, lambda f: f)[0] is points[2]  # lowest p99 first, for display
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


def point(p99: list[float], pss: list[float]) -> Spreads:
    """A re-measured config: its runs' p99 and PSS in rounds 0, 1, 2, ..."""
    return Spreads({P99.name: p99, PSS.name: pss})


@dataclass(frozen=True)
class Spreads:
    samples: dict[str, list[float]]

    def spread(self, headline: Headline) -> Spread | None:
        values = self.samples.get(headline.name)
        return Spread.of(values, range(len(values))) if values else None


def test_pick_prefers_leanest_within_noise_of_fastest() -> None:
    """--max-memory: the fastest p99 within it; a point the noise cannot tell from the
    fastest on p99 wins when it is leaner."""
    fastest = point([10, 12, 9, 13, 10], [300] * 5)  # the best median, but noisy
    lean = point([11, 10, 12, 10, 12], [150] * 5)  # no round-by-round loss: a tie on p99
    slow = point([20, 21, 22, 20, 21], [80] * 5)  # clearly slower
    points = [fastest, lean, slow]
    assert pick_pareto_point(points, Slo(max_memory_mb=400)) == 1
    assert pick_pareto_point(points, Slo(max_memory_mb=100)) == 2  # only it fits
    clear = point([5, 5, 5, 5, 5], [300] * 5)  # faster than the lean one in every round
    assert pick_pareto_point([clear, lean, slow], Slo(max_memory_mb=400)) == 0


def test_pick_respects_slo_and_falls_back_to_all_points() -> None:
    """--slo-p99: the least memory meeting it; no point meets a limit: every point counts."""
    fast = point([10] * 5, [400] * 5)
    middle = point([18, 19, 18, 19, 18], [200] * 5)
    slow = point([40] * 5, [100] * 5)
    points = [fast, middle, slow]
    assert pick_pareto_point(points, Slo(p99_ms=20.0)) == 1
    assert pick_pareto_point(points, Slo(p99_ms=50.0)) == 2
    assert pick_pareto_point(points, Slo(p99_ms=5.0)) == 2  # none meets it: the cheapest
    assert pick_pareto_point(points, Slo(max_memory_mb=50.0)) == 0  # none fits: the fastest
    # Memory the noise cannot separate: the faster of the cheapest ones.
    near = point([30] * 5, [101, 99, 100, 102, 98])
    assert pick_pareto_point([slow, near], Slo(p99_ms=50.0)) == 1


def test_pick_ties_and_missing_metrics() -> None:
    same = [metrics(1000.0, 40.0, 100.0), metrics(1000.0, 40.0, 100.0)]
    assert MULTI.pick(same, lambda f: f, Slo()) is same[0]
    no_memory = [metrics(1000.0, 10.0, pss=None), metrics(990.0, 40.0, 300.0)]
    assert MULTI.pick(no_memory, lambda f: f, Slo()) is no_memory[1]  # unmeasured: worst
    assert pick_pareto_point([Once(no_memory[0])]) == 0  # alone, it is the front
    with pytest.raises(ValueError):
        pick_pareto_point([])


def test_the_knee_is_the_point_nearest_the_ideal_corner() -> None:
    """Scaled to the front's ranges: the point that gives most of the p99 for least memory."""
    front = [
        point([100] * 3, [50] * 3),  # cheapest, slowest
        point([30] * 3, [70] * 3),  # most of the p99 gain for 20 MB: the knee
        point([25] * 3, [150] * 3),
        point([20] * 3, [300] * 3),  # fastest, most memory
    ]
    assert knee_index(front) == 1
    assert pick_pareto_point(front) == 1  # no limit given: the knee
    # Two points are the corners: equally far, the cheaper.
    assert knee_index([front[3], front[0]]) == 1
    assert knee_index([front[2]]) == 0
    assert pick_rule(None) == "the knee of the front"
    assert pick_rule(Slo(p99_ms=20)) == "the least memory meeting --slo-p99 20 ms"
    assert pick_rule(Slo(max_memory_mb=512)) == "the fastest p99 within --max-memory 512 MB"


def _dominates(a: Figures, b: Figures) -> bool:
    ka = (a.p99_ms, a.pss_mb)
    kb = (b.p99_ms, b.pss_mb)
    return all(x <= y for x, y in zip(ka, kb, strict=True)) and ka != kb


def test_pick_is_always_pareto_optimal() -> None:
    import random

    rng = random.Random(7)
    rules = (Slo(), Slo(p99_ms=50.0), Slo(max_memory_mb=250.0))
    for _ in range(300):
        points = [
            metrics(rng.uniform(100, 1000), rng.uniform(5, 100), rng.uniform(50, 500))
            for _ in range(rng.randint(1, 12))
        ]
        for slo in rules:
            chosen = MULTI.pick(points, lambda f: f, slo)
            assert not any(_dominates(p, chosen) for p in points)


def test_shortlist_is_the_ranking_or_the_front_spread_along_it() -> None:
    fat = metrics(1000.0, 40.0, 400.0)
    lean = metrics(970.0, 42.0, 150.0)
    slow = metrics(500.0, 40.0, 50.0)
    points = [slow, fat, lean]
    assert THROUGHPUT.shortlist(points, lambda f: f, lambda f: False) == [fat, lean, slow]
    on_front = [fat, lean]  # as Optuna's best_trials would say
    assert MULTI.shortlist(points, lambda f: f, lambda f: f in on_front) == [lean, fat]
    assert MULTI.shortlist(points, lambda f: f, lambda f: False) == []
    # A long front: FRONT_POINTS of it from the cheapest to the fastest, then the rest.
    front = [metrics(100.0, 100.0 - i, 10.0 * i) for i in range(10)]
    listed = MULTI.shortlist(front[::-1], lambda f: f, lambda f: True)
    assert listed[:FRONT_POINTS] == [front[i] for i in (0, 2, 4, 5, 7, 9)]
    assert sorted(listed[FRONT_POINTS:], key=lambda f: f.pss_mb) == [front[i] for i in (1, 3, 6, 8)]
    assert MULTI.confirm_count(3) == FRONT_POINTS and THROUGHPUT.confirm_count(3) == 3
    assert spread_along([1, 2, 3], 1) == [1] and spread_along([1, 2], 6) == [1, 2]


def test_a_config_that_cannot_carry_the_rate_breaks_the_slo() -> None:
    """The offered rate is a constraint of the front: achieved within RATE_TOLERANCE of it."""
    carried = Figures(980.0, 12.0, 100.0, 0.0, offered_rps=1000.0)
    short = Figures(700.0, 900.0, 60.0, 0.0, offered_rps=1000.0)
    slo = Slo(carry_rate=True)
    assert carried.shortfall == pytest.approx(0.02) and short.shortfall == pytest.approx(0.3)
    assert feasible(slo, carried) and not feasible(slo, short)
    assert named_constraints(slo, short)["rate"] == pytest.approx(0.3 - RATE_TOLERANCE)
    assert feasible(Slo(), short)  # only a study that carries a rate has the constraint
    assert "carried 700.0 req/s of the 1000 offered (30% short" in slo_violations(slo, short)
    closed = Figures(500.0, 10.0, 50.0, 0.0)  # a closed loop offers no rate to fall short of
    assert closed.shortfall == 0.0 and feasible(slo, closed)
    assert Figures(NAN, 10.0, 50.0, 0.0, offered_rps=100.0).shortfall == 1.0
    run = measurement(400.0, target_rps=500.0)
    assert Figures.of(run).offered_rps == 500.0


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
