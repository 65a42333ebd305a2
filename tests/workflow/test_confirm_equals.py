"""The equals call: a cheaper config written among equals that trails the best median by more
than `EQUALS_GAP` gets more rounds beside it before it is written. Pure logic, no servers."""

from __future__ import annotations

from tests.support.measurements import measurement
from tuner.search.objectives import THROUGHPUT, Slo
from tuner.workflow.confirm import (
    EQUALS_GAP,
    EXTRA_ROUNDS,
    MAX_EQUALS_ENTRIES,
    Candidate,
    Confirmed,
    decide,
    equals_call,
    settle,
)

DEFAULTS = {"workers": 1, "threads": 1}


def settled(label: str, rps: list[float], pss: float, **settings: int) -> Confirmed:
    runs = [measurement(value, p99=10.0, pss=pss) for value in rps]
    return Confirmed(Candidate(label, None, {**DEFAULTS, **settings}), runs)


def more_of(values: dict[str, list[float]], asked: list[list[str]]):
    """`more` as `settle` calls it: each config's next rounds, from `values`."""

    def more(entries) -> bool:
        asked.append([e.candidate.label for e in entries])
        for e in entries:
            pss = e.runs[0].pss_mean_mb
            e.runs += [measurement(value, p99=10.0, pss=pss) for value in values[e.candidate.label]]
        return True

    return more


def study() -> list[Confirmed]:
    """Issue 45's case: the best median (5 workers) and a leaner config (2 workers) about 9%
    behind it, which won one round of five: the first look cannot separate them, and the
    leaner is written as the cheapest."""
    return [
        settled("default", [100, 104, 98, 101, 103], pss=30),
        settled("trial 5", [200, 190, 210, 205, 195], pss=85, workers=5, threads=16),
        settled("trial 9", [180, 195, 185, 182, 178], pss=47, workers=2, threads=32),
    ]


def test_the_first_look_writes_the_cheaper_equal_and_the_call_names_it():
    confirmed = study()
    verdict = decide(confirmed, THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner.candidate.label == "trial 9"
    call = equals_call(confirmed, verdict, THROUGHPUT, Slo())
    assert call is not None
    assert [e.candidate.label for e in call.entries] == ["trial 5", "trial 9"]
    assert "trial 9, the cheapest of the configs the noise could not separate" in call.why
    assert "trailed the best median, trial 5, by 9%" in call.why


def test_more_rounds_that_separate_them_write_the_best_median():
    confirmed = study()
    asked: list[list[str]] = []
    more = more_of({"trial 5": [205, 198, 202, 207], "trial 9": [181, 184, 179, 183]}, asked)
    verdict = settle(confirmed, THROUGHPUT, Slo(), DEFAULTS, more)
    assert asked == [["trial 5", "trial 9"]]  # the default is not measured again
    assert verdict is not None and verdict.winner.candidate.label == "trial 5"
    assert verdict.beats_default  # its pairs with the default keep the first look's decision
    assert f"after {EXTRA_ROUNDS} more rounds of trial 5, trial 9" in verdict.summary
    assert "trailed the best median, trial 5, by 9%" in verdict.summary


def test_more_rounds_that_still_cannot_tell_keep_the_cheaper():
    confirmed = study()
    asked: list[list[str]] = []
    # Trial 9 wins two of the four more: no test separates them, so the leaner stays.
    more = more_of({"trial 5": [205, 180, 202, 185], "trial 9": [181, 190, 179, 192]}, asked)
    verdict = settle(confirmed, THROUGHPUT, Slo(), DEFAULTS, more)
    assert len(asked) == 1
    assert verdict is not None and verdict.winner.candidate.label == "trial 9"
    assert "PSS 47.0 vs 85.0 MB for trial 5" in verdict.summary


def test_an_equal_within_the_gap_is_not_measured_again_and_stays_an_equal():
    """A third config 2% behind the best is an equal worth its lower memory whatever more
    rounds show: it is left out of the call, its pairs stay at the first look's level, and
    once the leaner one is separated it is the cheapest of what ties."""
    confirmed = [
        *study(),
        settled("trial 12", [196, 192, 205, 199, 193], pss=60, workers=3, threads=16),
    ]
    asked: list[list[str]] = []
    more = more_of({"trial 5": [205, 198, 202, 207], "trial 9": [181, 184, 179, 183]}, asked)
    verdict = settle(confirmed, THROUGHPUT, Slo(), DEFAULTS, more)
    assert asked == [["trial 5", "trial 9"]]
    assert verdict is not None and verdict.winner.candidate.label == "trial 12"
    assert verdict.tied_with == ("trial 5",)


def test_no_call_when_the_cheaper_is_within_the_gap_or_the_best_is_written():
    default = settled("default", [100, 102, 101, 99, 103], pss=30)
    fat = settled("trial 5", [160, 171, 165, 163, 166], pss=85, workers=5)
    lean = settled("trial 9", [158, 169, 162, 164, 161], pss=47, workers=2)
    asked: list[list[str]] = []
    verdict = settle([default, fat, lean], THROUGHPUT, Slo(), DEFAULTS, more_of({}, asked))
    assert verdict is not None and verdict.winner is lean and asked == []
    assert EQUALS_GAP > 1 - 162 / 165  # lean's median trails fat's by 2%
    clear = settled("trial 9", [120, 125, 121, 119, 124], pss=47, workers=2)
    verdict = settle([default, fat, clear], THROUGHPUT, Slo(), DEFAULTS, more_of({}, asked))
    assert verdict is not None and verdict.winner is fat and asked == []


def test_the_call_holds_at_most_its_share_of_configs_widest_gaps_first():
    default = settled("default", [100, 104, 98, 101, 103], pss=30)
    best = settled("trial 5", [200, 190, 210, 205, 195], pss=85, workers=5)
    trailing = [
        settled(f"trial {n}", [v - gap for v in (180, 200, 185, 182, 178)], pss=40 + n, workers=2)
        for n, gap in ((9, 0), (10, 8), (11, 4), (12, 2))
    ]
    confirmed = [default, best, *trailing]
    verdict = decide(confirmed, THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner.candidate.label == "trial 9"  # least PSS
    call = equals_call(confirmed, verdict, THROUGHPUT, Slo())
    assert call is not None and len(call.entries) == MAX_EQUALS_ENTRIES
    assert [e.candidate.label for e in call.entries] == [
        "trial 5",
        "trial 9",
        "trial 10",
        "trial 11",
    ]


def paired(label: str, rps: list[float], pss: list[float], **settings: int) -> Confirmed:
    runs = [measurement(r, p99=10.0, pss=m) for r, m in zip(rps, pss, strict=True)]
    return Confirmed(Candidate(label, None, {**DEFAULTS, **settings}), runs, rounds=[0, 1, 2, 3, 4])


def test_a_tenth_of_a_megabyte_beyond_the_noise_does_not_pick_among_equals():
    # Equal on req/s; trial 9 is 0.1 MB lighter in every round: beyond PSS's noise, and nothing
    # anyone sizes a box by, so the fewer changes decide (trial 5 changes one setting).
    confirmed = [
        paired("default", [100, 104, 98, 101, 103], [33.0] * 5),
        paired("trial 5", [200, 190, 210, 205, 195], [48.4, 48.5, 48.4, 48.5, 48.4], workers=2),
        paired("trial 9", [198, 195, 205, 200, 199], [48.3, 48.4, 48.3, 48.4, 48.3], workers=2,
               threads=2),
    ]  # fmt: skip
    verdict = decide(confirmed, THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner.candidate.label == "trial 5"
    lighter = [
        paired("default", [100, 104, 98, 101, 103], [33.0] * 5),
        paired("trial 5", [200, 190, 210, 205, 195], [48.4] * 5, workers=2),
        paired("trial 9", [198, 195, 205, 200, 199], [40.0] * 5, workers=2, threads=2),
    ]
    verdict = decide(lighter, THROUGHPUT, Slo(), DEFAULTS)
    assert verdict is not None and verdict.winner.candidate.label == "trial 9"  # 17% lighter
