"""The decision rule after interleaved re-measurement: pure logic, no servers."""

from __future__ import annotations

import pytest

from tests.support.measurements import measurement
from tuner.errors import ServerStartError
from tuner.metrics.measurement import Measurement
from tuner.metrics.stats import Spread, clearly_better
from tuner.search.objectives import LATENCY, MULTI, THROUGHPUT, Slo
from tuner.workflow.confirm import (
    Candidate,
    Confirmed,
    ConfirmedSummary,
    close_call,
    confirm,
    decide,
    more_rounds,
    settle,
    unfair_text,
)


def run(
    rps: float, p99: float = 10.0, pss: float = 30.0, unfair: bool = False, **extra
) -> Measurement:
    reasons = ("starved: 48 of 64 connections",) if unfair else ()
    return measurement(rps, p99=p99, pss=pss, unfair_reasons=reasons, **extra)


def entry(label: str, runs: list[Measurement]) -> Confirmed:
    return Confirmed(Candidate(label, None, {"label": label}), runs=runs)


def test_clear_winner_replaces_default():
    default = entry("default", [run(100), run(110), run(105)])
    best = entry("trial 7", [run(150), run(160), run(155)])
    verdict = decide([default, best], THROUGHPUT, Slo())
    assert verdict is not None
    assert verdict.winner is best and verdict.beats_default
    assert "beats the default beyond the noise" in verdict.summary


def test_overlapping_ranges_write_the_default_and_say_it_is_within_the_noise():
    default = entry("default", [run(100), run(140), run(105)])
    best = entry("trial 7", [run(130), run(150), run(135)])
    verdict = decide([default, best], THROUGHPUT, Slo())
    assert verdict is not None
    assert verdict.winner is default and not verdict.beats_default
    assert "not measurably better than the default" in verdict.summary
    assert "the default is written" in verdict.summary
    assert "x1.29" in verdict.summary and "100.0-140.0" in verdict.summary


def settled(label: str, rps: list[float], pss: float, p99: float = 10.0, **settings) -> Confirmed:
    runs = [run(r, p99=p99, pss=pss) for r in rps]
    return Confirmed(Candidate(label, None, {"workers": 1, "accesslog": False, **settings}), runs)


DEFAULTS = {"workers": 1, "accesslog": False, "worker_class": "sync"}


def test_among_configs_the_noise_cannot_separate_the_leanest_is_written():
    default = settled("default", [100, 102, 101], pss=30)
    fat = settled("trial 5", [160, 171, 165], pss=85, workers=5, worker_class="gevent")
    lean = settled("trial 9", [158, 169, 162], pss=47, workers=2, worker_class="gevent")
    verdict = decide([default, fat, lean], THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.beats_default
    assert verdict.winner is lean  # the best median (fat) ties with it within the noise
    assert verdict.tied_with == ("trial 5",)
    assert "PSS 47.0 vs 85.0 MB for trial 5" in verdict.summary


def test_a_config_better_than_the_default_in_every_run_is_written_when_the_best_median_is_not():
    """The quickstart's case: the best median's lowest run fell 1 req/s short of the default's
    highest, while another config with about the same median cleared it in every run."""
    default = settled("default", [5470, 5514, 6069], pss=35)
    lean = settled("trial 16, other settings at default", [6068, 6428, 6513], pss=37, workers=2)
    clear = settled("trial 2", [6188, 6407, 6646], pss=36, workers=3)
    verdict = decide([default, lean, clear], THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner is clear and verdict.beats_default
    assert "the best median, trial 16, other settings at default, was not measurably" in (
        verdict.summary
    )
    # Nobody better than the default in every run: the default, as before.
    overlapping = settled("trial 2", [6000, 6407, 6646], pss=36, workers=3)
    verdict = decide([default, lean, overlapping], THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner is default and not verdict.beats_default


def test_a_config_clearly_faster_is_not_traded_for_memory():
    default = settled("default", [100, 102, 101], pss=30)
    fat = settled("trial 5", [200, 205, 210], pss=85, workers=5)
    lean = settled("trial 9", [150, 155, 160], pss=47, workers=2)
    verdict = decide([default, fat, lean], THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner is fat and verdict.tied_with == ()


def test_among_equals_fewer_changes_from_the_default_win():
    default = settled("default", [100, 102, 101], pss=30)
    logged_off = settled("trial 4", [150, 161, 155], pss=40, workers=3, accesslog=True)
    as_default = settled("trial 4, default logging", [149, 160, 154], pss=40, workers=3)
    verdict = decide([default, logged_off, as_default], THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner is as_default
    assert "1 setting(s) changed from the default instead of 2" in verdict.summary


def test_default_with_the_best_median_is_the_pick():
    default = entry("default", [run(120), run(140), run(125)])
    other = entry("trial 7", [run(120), run(150), run(100)])
    verdict = decide([default, other], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is default and not verdict.beats_default
    assert "default config measured best" in verdict.summary


def test_unfair_or_slo_violating_candidates_never_win():
    default = entry("default", [run(100), run(101), run(102)])
    unfair = entry("trial 3", [run(900, unfair=True), run(900), run(900, unfair=True)])
    slow_tail = entry("trial 4", [run(500, p99=80), run(500, p99=80), run(500, p99=80)])
    verdict = decide([default, unfair, slow_tail], THROUGHPUT, Slo(p99_ms=50))
    assert verdict is not None and verdict.winner is default


def test_fairness_is_judged_by_the_majority_of_runs_and_a_borderline_winner_is_named():
    """Unfair in half the runs or more: cannot win. Unfair in fewer: can, and the verdict says
    in how many runs, so a config near the fairness line is not passed over by one run in
    five (the benchmark's 5 rounds) while the tuner's 3 rounds passed it."""
    default = entry("default", [run(100), run(101), run(102), run(100)])
    even = entry("trial 2", [run(900, unfair=True), run(900), run(900, unfair=True), run(900)])
    assert even.unfair and even.unfair_runs == 2
    verdict = decide([default, even], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is default
    once = entry("trial 3", [run(800), run(800, unfair=True), run(800), run(800)])
    assert not once.unfair and once.unfair_runs == 1
    verdict = decide([default, even, once], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is once and verdict.beats_default
    assert "unfair in 1 of its 4 runs" in verdict.summary
    fair = entry("trial 4", [run(700)] * 4)
    verdict = decide([default, fair], THROUGHPUT, Slo())
    assert verdict is not None and "unfair" not in verdict.summary


def test_summary_keeps_the_unfair_count_and_reads_old_studies_as_unfair():
    once = entry("trial 3", [run(800), run(800, unfair=True), run(800)])
    summary = ConfirmedSummary.from_json(once.summary().to_json())
    assert (summary.unfair_runs, summary.runs, summary.unfair) == (1, 3, False)
    assert unfair_text(summary.unfair_runs, summary.runs) == "unfair 1/3"
    twice = entry("trial 4", [run(800, unfair=True), run(800, unfair=True), run(800)])
    assert ConfirmedSummary.from_json(twice.summary().to_json()).unfair
    assert unfair_text(2, 3) == "unfair" and unfair_text(0, 3) == ""
    # Written before the counts were kept (schema of stop 21): "unfair": true is unfair.
    old = {"label": "trial 7", "rps": None, "p99_ms": None, "pss_mb": None, "unfair": True}
    assert ConfirmedSummary.from_json(old).unfair
    assert not ConfirmedSummary.from_json({**old, "unfair": False}).unfair


def test_latency_objective_prefers_lower_p99():
    default = entry("default", [run(100, p99=40), run(100, p99=42), run(100, p99=41)])
    best = entry("trial 2", [run(90, p99=10), run(90, p99=12), run(90, p99=11)])
    verdict = decide([default, best], LATENCY, Slo())
    assert verdict is not None and verdict.winner is best and verdict.beats_default


def test_nothing_usable_means_no_verdict():
    assert decide([entry("default", [run(100, error_rate=0.5)])], THROUGHPUT, Slo()) is None


def test_confirm_interleaves_rounds_and_records_failures():
    order = []

    def measure(candidate: Candidate, round_index: int) -> Measurement:
        order.append((round_index, candidate.label))
        if candidate.label == "B" and round_index == 1:
            raise ServerStartError("exited with 3")
        return run(100)

    confirmed = confirm([Candidate("A", 1, {}), Candidate("B", 2, {})], 3, measure)
    assert order == [(0, "A"), (0, "B"), (1, "A"), (1, "B"), (2, "A"), (2, "B")]
    assert len(confirmed[0].runs) == 3
    assert len(confirmed[1].runs) == 2 and confirmed[1].failures == ["server_exited: exited with 3"]


@pytest.mark.parametrize(
    ("a", "b", "higher", "expected"),
    [
        ([5, 6, 7], [1, 2, 3], True, True),
        ([5, 6, 7], [1, 2, 5], True, False),
        ([1, 2, 3], [5, 6, 7], False, True),
    ],
)
def test_clearly_better_needs_separated_ranges(a, b, higher, expected):
    assert clearly_better(Spread.of(a), Spread.of(b), higher_is_better=higher) is expected


def test_spread_relative_range():
    spread = Spread.of([90, 100, 110])
    assert spread.median == 100 and spread.relative_range == pytest.approx(0.2)


def test_multi_objective_uses_the_pareto_pick_rule():
    default = entry("default", [run(100, pss=20), run(101, pss=20), run(102, pss=20)])
    fast_fat = entry("trial 3", [run(200, pss=90), run(201, pss=90), run(202, pss=90)])
    fast_lean = entry("trial 4", [run(195, pss=40), run(196, pss=40), run(197, pss=40)])
    verdict = decide([default, fast_fat, fast_lean], MULTI, Slo())
    assert verdict is not None and verdict.winner is fast_lean
    assert "req/s x1.94 (better)" in verdict.summary and "PSS x2.00 (worse)" in verdict.summary


def test_a_much_worse_tail_is_called_out():
    default = entry("default", [run(100, p99=20), run(101, p99=21), run(102, p99=22)])
    bursty = entry("trial 5", [run(150, p99=500), run(151, p99=550), run(152, p99=560)])
    verdict = decide([default, bursty], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is bursty
    assert "p99 is x26.2 the default's" in verdict.summary and "--slo-p99" in verdict.summary


def test_no_usable_default_is_said_plainly_for_every_objective():
    failed_default = entry("default", [])
    best = entry("trial 2", [run(150), run(151), run(152)])
    for objective in (THROUGHPUT, MULTI):
        verdict = decide([failed_default, best], objective, Slo())
        assert verdict is not None and verdict.winner is best and verdict.beats_default
        assert (
            verdict.summary == "trial 2 is the best usable config (the default could not be used)"
        )


def test_a_default_that_breaks_an_slo_is_beaten_by_any_usable_config():
    default = entry("default", [run(200, p99=90), run(201, p99=91), run(202, p99=92)])
    best = entry("trial 2", [run(100, p99=10), run(101, p99=11), run(102, p99=12)])
    verdict = decide([default, best], THROUGHPUT, Slo(p99_ms=50))
    assert verdict is not None and verdict.winner is best and verdict.beats_default


def test_the_kept_summary_reads_back_the_same():
    confirmed = entry("trial 3", [run(100, p99=5), run(120, p99=6), run(110, p99=7)])
    summary = confirmed.summary()
    assert summary.rps is not None and (summary.rps.low, summary.rps.median) == (100, 110)
    assert summary.latency_ms_median["p99"] == 6
    again = ConfirmedSummary.from_json(summary.to_json())
    assert again.to_json() == summary.to_json()
    assert again.rps is not None and again.rps.high == 120


def test_a_cheaper_equal_that_does_not_beat_the_default_is_not_written():
    default = settled("default", [100, 110, 105], pss=30)
    best = settled("trial 5", [150, 160, 155], pss=85, workers=5)
    # ties with the best within the noise, is leaner, but overlaps the default
    lean = settled("trial 9", [108, 158, 150], pss=47, workers=2)
    verdict = decide([default, best, lean], THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner is best and verdict.beats_default
    assert "beats the default beyond the noise" in verdict.summary


def test_a_better_median_that_overlaps_the_default_gets_more_rounds_beside_it():
    # uWSGI fib: over 3 rounds the best median (x1.07) overlapped the default; over 5 the grid
    # separated a config like it by 6%.
    default = entry("default", [run(100), run(104), run(108)])
    best = entry("trial 7", [run(106), run(112), run(114)])
    other = entry("trial 9", [run(95), run(99), run(101)])
    verdict = decide([default, best, other], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is default
    pair = close_call([default, best, other], verdict, THROUGHPUT, Slo())
    assert pair == [default, best]
    seen: list[tuple[str, int]] = []
    more = {"default": [103, 105], "trial 7": [113, 115]}

    def measure(candidate: Candidate, round_index: int) -> Measurement:
        seen.append((candidate.label, round_index))
        return run(more[candidate.label].pop(0))

    more_rounds(pair, range(3, 5), measure)
    # Interleaved, numbered after the first rounds, added to the runs they had.
    assert seen == [("default", 3), ("trial 7", 3), ("default", 4), ("trial 7", 4)]
    assert len(default.runs) == len(best.runs) == 5 and len(other.runs) == 3
    again = decide([default, best, other], THROUGHPUT, Slo())
    assert again is not None and again.winner is default  # 106-115 still overlaps 100-108


@pytest.mark.parametrize(
    "runs",
    [
        {"default": [120, 125, 130], "trial 7": [106, 112, 114]},  # the default measured best
        {"default": [100, 104, 108], "trial 7": [116, 118, 120]},  # trial 7 beats it already
    ],
    ids=["default-best", "decided"],
)
def test_no_more_rounds_when_nothing_is_in_doubt(runs: dict[str, list[float]]) -> None:
    entries = [entry(label, [run(r) for r in values]) for label, values in runs.items()]
    verdict = decide(entries, THROUGHPUT, Slo())
    assert close_call(entries, verdict, THROUGHPUT, Slo()) == []


def test_settle_measures_a_close_call_again_and_says_so():
    default = entry("default", [run(100), run(104), run(108)])
    best = entry("trial 7", [run(106), run(112), run(114)])
    asked: list[list[str]] = []

    def more(pair) -> None:
        asked.append([e.candidate.label for e in pair])
        for e, value in zip(pair, (101, 116), strict=True):
            e.runs += [run(value), run(value + 1)]

    verdict = settle([default, best], THROUGHPUT, Slo(), None, more)
    assert asked == [["default", "trial 7"]]
    assert verdict is not None and verdict.winner is default  # 106-117 still overlaps 100-108
    assert "after 2 more rounds of trial 7 and the default" in verdict.summary
    clear = [entry("default", [run(100)] * 3), entry("trial 7", [run(150)] * 3)]
    assert settle(clear, THROUGHPUT, Slo(), None, more).winner is clear[1]
    assert len(asked) == 1  # nothing in doubt: no more rounds
