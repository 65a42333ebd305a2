"""The decision rule after interleaved re-measurement: pure logic, no servers."""

from __future__ import annotations

import pytest

from tests.support.measurements import measurement
from tuner.errors import ServerStartError
from tuner.metrics.measurement import Measurement
from tuner.metrics.paired import second_look_alpha
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
    default = entry("default", [run(100), run(110), run(105), run(103), run(108)])
    best = entry("trial 7", [run(150), run(160), run(155), run(151), run(158)])
    verdict = decide([default, best], THROUGHPUT, Slo())
    assert verdict is not None
    assert verdict.winner is best and verdict.beats_default
    assert "beats the default beyond the noise" in verdict.summary
    assert "better in 5 of 5 interleaved rounds, x1.45-x1.50 within rounds" in verdict.summary


def test_three_rounds_cannot_tell_even_a_clear_winner_at_five_percent():
    """Three pairs give p 1/8 at best: too few to decide; the default is written."""
    default = entry("default", [run(100), run(110), run(105)])
    best = entry("trial 7", [run(150), run(160), run(155)])
    verdict = decide([default, best], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is default and not verdict.beats_default
    assert "better in 3 of 3 interleaved rounds" in verdict.summary


def test_a_config_that_wins_every_round_is_not_called_inside_the_noise():
    """Issue 44: the machine's noise moves both configs alike from round to round, so their
    ranges overlap (1,248-2,052 vs 1,208-1,819 req/s) while the access log off wins every
    round; the pairs see it."""
    default = entry("default", [run(r) for r in (1208, 1500, 1819, 1350, 1600)])
    logging_off = entry("default, logging off", [run(r) for r in (1400, 1800, 2052, 1600, 1900)])
    verdict = decide([default, logging_off], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is logging_off and verdict.beats_default
    assert "better in 5 of 5 interleaved rounds" in verdict.summary
    # The same figures, unpaired (the rounds shuffled): the ranges overlap and nothing pairs.
    shuffled = entry("default, logging off", [run(r) for r in (2052, 1400, 1600, 1900, 1800)])
    verdict = decide([default, shuffled], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is default


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
    default = settled("default", [100, 102, 101, 99, 103], pss=30)
    fat = settled("trial 5", [160, 171, 165, 163, 166], pss=85, workers=5, worker_class="gevent")
    lean = settled("trial 9", [158, 169, 162, 164, 161], pss=47, workers=2, worker_class="gevent")
    verdict = decide([default, fat, lean], THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.beats_default
    assert verdict.winner is lean  # the best median (fat) ties with it within the noise
    assert verdict.tied_with == ("trial 5",)
    assert "PSS 47.0 vs 85.0 MB for trial 5" in verdict.summary


def test_a_config_better_than_the_default_in_every_run_is_written_when_the_best_median_is_not():
    """The quickstart's case: the best median lost a round to the default, while another
    config with about the same median won every round."""
    default = settled("default", [5470, 5514, 6069, 5600, 5550], pss=35)
    lean = settled(
        "trial 16, other settings at default", [6068, 6428, 6013, 6520, 6513], pss=37, workers=2
    )
    clear = settled("trial 2", [6188, 6407, 6646, 6300, 6200], pss=36, workers=3)
    verdict = decide([default, lean, clear], THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner is clear and verdict.beats_default
    assert "the best median, trial 16, other settings at default, was not measurably" in (
        verdict.summary
    )
    # Nobody better than the default in every round: the default, as before.
    overlapping = settled("trial 2", [6000, 6407, 6646, 5500, 6200], pss=36, workers=3)
    verdict = decide([default, lean, overlapping], THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner is default and not verdict.beats_default


def test_a_config_clearly_faster_is_not_traded_for_memory():
    default = settled("default", [100, 102, 101, 99, 103], pss=30)
    fat = settled("trial 5", [200, 205, 210, 204, 206], pss=85, workers=5)
    lean = settled("trial 9", [150, 155, 160, 152, 158], pss=47, workers=2)
    verdict = decide([default, fat, lean], THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner is fat and verdict.tied_with == ()


def test_among_equals_fewer_changes_from_the_default_win():
    default = settled("default", [100, 102, 101, 99, 103], pss=30)
    logged_off = settled("trial 4", [150, 161, 155, 152, 158], pss=40, workers=3, accesslog=True)
    as_default = settled("trial 4, default logging", [149, 160, 156, 151, 154], pss=40, workers=3)
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
    default = entry("default", [run(100), run(101), run(102), run(100), run(101), run(99)])
    even = entry(
        "trial 2",
        [run(900, unfair=True), run(900), run(900, unfair=True), run(900)]
        + [run(900, unfair=True), run(900)],
    )
    assert even.unfair and even.unfair_runs == 3
    verdict = decide([default, even], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is default
    once = entry("trial 3", [run(800), run(800, unfair=True)] + [run(800)] * 4)
    assert not once.unfair and once.unfair_runs == 1
    verdict = decide([default, even, once], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is once and verdict.beats_default
    assert "unfair in 1 of its 6 runs" in verdict.summary
    fair = entry("trial 4", [run(700)] * 6)
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
    default = entry("default", [run(100, p99=40 + i) for i in range(5)])
    best = entry("trial 2", [run(90, p99=10 + i) for i in range(5)])
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
    # Odd rounds reversed: no config always has the same place in its round.
    assert order == [(0, "A"), (0, "B"), (1, "B"), (1, "A"), (2, "A"), (2, "B")]
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
def test_unpaired_spreads_need_separated_ranges(a, b, higher, expected):
    """Spreads stored without their rounds (studies from before) fall back to the ranges."""
    assert clearly_better(Spread.of(a), Spread.of(b), higher_is_better=higher) is expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([5, 9, 7, 6, 8], [4, 8, 6, 5, 7], True),  # ranges overlap, every round won
        ([5, 9, 7, 6, 8], [4, 8, 6, 5, 9], False),  # one round lost: 1/32 no longer
        ([5, 9, 7], [4, 8, 6], False),  # three rounds: p 1/8 at best
        ([50, 60, 70], [1, 2, 3], False),
    ],
)
def test_paired_spreads_are_judged_round_by_round(a, b, expected):
    rounds = range(len(a))
    mine, theirs = Spread.of(a, rounds), Spread.of(b, rounds)
    assert clearly_better(mine, theirs, higher_is_better=True) is expected


def test_only_the_rounds_both_were_measured_in_pair():
    """A failed run leaves its round unpaired: the other config's run of it is not compared."""
    mine = Spread.of([10, 11, 12, 13, 14], [0, 1, 2, 3, 5])
    theirs = Spread.of([9, 10, 11, 12, 99, 13], [0, 1, 2, 3, 4, 5])
    assert clearly_better(mine, theirs, higher_is_better=True)


def test_spread_relative_range():
    spread = Spread.of([90, 100, 110])
    assert spread.median == 100 and spread.relative_range == pytest.approx(0.2)


def test_multi_objective_uses_the_pareto_pick_rule():
    """On the medians, the knee: most of the p99 for the least memory (the confirmed front's
    own decision, with merges and ranges, is tuner.workflow.pareto_front's)."""
    default = entry("default", [run(100, p99=30 + i / 10, pss=20 + i / 10) for i in range(5)])
    fast_fat = entry("trial 3", [run(100, p99=10 + i / 10, pss=90 + i / 10) for i in range(5)])
    knee = entry("trial 4", [run(100, p99=12 + i / 10, pss=40 + i / 10) for i in range(5)])
    verdict = decide([default, fast_fat, knee], MULTI, Slo())
    assert verdict is not None and verdict.winner is knee
    assert "p99 x0.40 (better)" in verdict.summary and "PSS x1.99 (worse)" in verdict.summary


def test_a_much_worse_tail_is_called_out():
    default = entry(
        "default", [run(100 + i, p99=20 + i) for i in range(3)] + [run(101, p99=21)] * 2
    )
    bursty = entry(
        "trial 5",
        [run(150, p99=500), run(151, p99=550), run(152, p99=560)] + [run(151, p99=550)] * 2,
    )
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
    default = settled("default", [100, 110, 105, 103, 108], pss=30)
    best = settled("trial 5", [150, 160, 155, 153, 158], pss=85, workers=5)
    # ties with the best within the noise, is leaner, but loses a round to the default
    lean = settled("trial 9", [98, 158, 150, 160, 157], pss=47, workers=2)
    verdict = decide([default, best, lean], THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner is best and verdict.beats_default
    assert "beats the default beyond the noise" in verdict.summary


def test_a_better_median_the_pairs_do_not_decide_gets_more_rounds_beside_it():
    # uWSGI fib: the best median (x1.07) lost a round to the default; a grid separated a
    # config like it by 6% over more rounds.
    default = entry("default", [run(100), run(104), run(108), run(101), run(105)])
    best = entry("trial 7", [run(106), run(112), run(104), run(109), run(111)])
    other = entry("trial 9", [run(95), run(99), run(101), run(97), run(100)])
    verdict = decide([default, best, other], THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is default
    pair = close_call([default, best, other], verdict, THROUGHPUT, Slo())
    assert pair == [default, best]
    seen: list[tuple[str, int]] = []
    more = {"default": [103, 105], "trial 7": [101, 115]}

    def measure(candidate: Candidate, round_index: int) -> Measurement:
        seen.append((candidate.label, round_index))
        return run(more[candidate.label].pop(0))

    more_rounds(pair, range(5, 7), measure)
    # Interleaved, numbered after the first rounds, added to the runs they had.
    assert seen == [("trial 7", 5), ("default", 5), ("default", 6), ("trial 7", 6)]
    assert len(default.runs) == len(best.runs) == 7 and len(other.runs) == 5
    assert default.rounds == best.rounds == [0, 1, 2, 3, 4, 5, 6]
    again = decide([default, best, other], THROUGHPUT, Slo(), alpha=second_look_alpha(5))
    assert again is not None and again.winner is default  # two rounds of seven lost


@pytest.mark.parametrize(
    "runs",
    [
        {"default": [120, 125, 130, 122, 126], "trial 7": [106, 112, 114, 110, 111]},  # default
        {"default": [100, 104, 108, 101, 105], "trial 7": [116, 118, 120, 117, 119]},  # decided
    ],
    ids=["default-best", "decided"],
)
def test_no_more_rounds_when_nothing_is_in_doubt(runs: dict[str, list[float]]) -> None:
    entries = [entry(label, [run(r) for r in values]) for label, values in runs.items()]
    verdict = decide(entries, THROUGHPUT, Slo())
    assert close_call(entries, verdict, THROUGHPUT, Slo()) == []


def _more_rounds_of(values: dict[str, list[float]], asked: list[list[str]]):
    def more(pair) -> bool:
        asked.append([e.candidate.label for e in pair])
        for e in pair:
            e.runs += [run(value) for value in values[e.candidate.label]]
        return True

    return more


def test_settle_measures_a_close_call_again_and_says_so():
    default = entry("default", [run(100), run(104), run(108), run(101), run(105)])
    best = entry("trial 7", [run(106), run(112), run(104), run(109), run(111)])
    asked: list[list[str]] = []
    # Four more rounds, one lost again: 7 of 9 is not enough at the second look's 1.9%.
    more = _more_rounds_of({"default": [101, 102, 110, 100], "trial 7": [116, 117, 95, 108]}, asked)
    verdict = settle([default, best], THROUGHPUT, Slo(), None, more)
    assert asked == [["default", "trial 7"]]
    assert verdict is not None and verdict.winner is default
    assert "after 4 more rounds of trial 7 and the default" in verdict.summary
    assert "better in 7 of 9 interleaved rounds" in verdict.summary
    assert "decided at 1.9%" in verdict.summary
    clear = [entry("default", [run(100 + i) for i in range(5)]), entry("trial 7", [run(150)] * 5)]
    assert settle(clear, THROUGHPUT, Slo(), None, more).winner is clear[1]
    assert len(asked) == 1  # nothing in doubt: no more rounds


def test_settle_decides_at_the_second_look_when_the_pair_keeps_winning():
    """A 10% gain that lost one round of five to the noise wins the four more: 8 of 9."""
    default = entry("default", [run(100), run(104), run(108), run(101), run(105)])
    best = entry("trial 7", [run(112), run(115), run(107), run(111), run(116)])
    asked: list[list[str]] = []
    more = _more_rounds_of(
        {"default": [101, 102, 110, 100], "trial 7": [112, 113, 121, 109]}, asked
    )
    verdict = settle([default, best], THROUGHPUT, Slo(), None, more)
    assert verdict is not None and verdict.winner is best and verdict.beats_default
    assert "better in 8 of 9 interleaved rounds" in verdict.summary
