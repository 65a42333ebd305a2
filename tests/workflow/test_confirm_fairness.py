"""A winner unfair in some of its confirmation runs is measured again before it is written:
pure logic, the rounds driven by a scripted `measure`, no servers."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from tests.support.measurements import measurement
from tuner.metrics.measurement import Measurement
from tuner.report.data import StoredResult
from tuner.search.objectives import THROUGHPUT, Slo
from tuner.workflow.confirm import (
    EXTRA_ROUNDS,
    Candidate,
    Confirmed,
    Verdict,
    confirm,
    more_rounds,
    settle,
    unfair_text,
)

ROUNDS = 5
Script = dict[str, list[tuple[float, bool]]]  # label: (req/s, unfair) per round


class Rounds:
    """Confirmation rounds over scripted runs, recording what was measured and when, and
    the extra rounds `settle` asked for, run as `tune` runs them."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.seen: list[tuple[str, int]] = []
        self.asked: list[list[str]] = []

    def measure(self, candidate: Candidate, round_index: int) -> Measurement:
        self.seen.append((candidate.label, round_index))
        rps, unfair = self.script[candidate.label][round_index]
        reasons = ("fairness index 0.82 < 0.9",) if unfair else ()
        return measurement(rps, unfair_reasons=reasons)

    def more(self, pair: Sequence[Confirmed]) -> bool:
        self.asked.append([entry.candidate.label for entry in pair])
        more_rounds(pair, range(ROUNDS, ROUNDS + EXTRA_ROUNDS), self.measure)
        return True

    def settle(self) -> tuple[dict[str, Confirmed], Verdict]:
        candidates = [Candidate(label, None, {"label": label}) for label in self.script]
        confirmed = confirm(candidates, ROUNDS, self.measure)
        verdict = settle(confirmed, THROUGHPUT, Slo(), None, self.more)
        assert verdict is not None
        return {entry.candidate.label: entry for entry in confirmed}, verdict

    def extra(self) -> list[tuple[str, int]]:
        return [(label, index) for label, index in self.seen if index >= ROUNDS]


def fair(*rps: float) -> list[tuple[float, bool]]:
    return [(value, False) for value in rps]


DEFAULT = fair(100, 101, 102, 101, 100, 99, 100, 101, 102)
# The gevent case: fastest by far, unfair in the second of its first 5 runs.
ONCE_UNFAIR = [(300.0, False), (310.0, True), (305.0, False), (302.0, False), (304.0, False)]
FOUR_UNFAIR = [(300.0, True), (305.0, True), (301.0, True), (303.0, True)]
FOUR_FAIR = fair(300, 305, 301, 303)


def test_a_winner_unfair_in_1_of_5_runs_unfair_again_four_times_is_not_written() -> None:
    rounds = Rounds({
        "default": DEFAULT,
        "trial 7": [*ONCE_UNFAIR, *FOUR_UNFAIR],
        "trial 9": fair(200, 205, 210, 202, 207, 999, 999, 999, 999),
    })  # fmt: skip
    entries, verdict = rounds.settle()
    # Once, the pair alone, interleaved after the first rounds.
    assert rounds.asked == [["default", "trial 7"]]
    pair = ("default", "trial 7")
    assert rounds.extra() == [
        (label, index)
        for index in range(5, 9)
        for label in (pair if index % 2 == 0 else pair[::-1])
    ]
    assert (entries["trial 7"].unfair_runs, len(entries["trial 7"].runs)) == (5, 9)
    assert len(entries["trial 9"].runs) == ROUNDS
    assert verdict.winner is entries["trial 9"] and verdict.beats_default
    assert (
        f"(after {EXTRA_ROUNDS} more rounds of trial 7 and the default: trial 7 was unfair in 1 "
        "of its 5 runs; over all its 9 runs it was unfair in 5, at least half, so it cannot be "
        "written)"
    ) in verdict.summary
    # As the e2e test of `tune` reads which pair got the extra rounds.
    match = re.search(r"after \d+ more rounds of (.+?) and the default", verdict.summary)
    assert match is not None and match.group(1) == "trial 7"


@pytest.mark.parametrize("again", [3, 0], ids=["4-of-9", "1-of-9"])
def test_a_winner_unfair_in_fewer_than_half_of_all_its_runs_is_still_written(again: int) -> None:
    rounds = Rounds({
        "default": DEFAULT,
        "trial 7": [*ONCE_UNFAIR, *FOUR_UNFAIR[:again], *FOUR_FAIR[again:]],
    })  # fmt: skip
    entries, verdict = rounds.settle()
    unfair = 1 + again
    assert rounds.asked == [["default", "trial 7"]]
    assert verdict.winner is entries["trial 7"] and verdict.beats_default
    assert (
        f"trial 7 was unfair in 1 of its 5 runs; over all its 9 runs it was unfair in {unfair}, "
        "fewer than half, so its fairness does not rule it out"
    ) in verdict.summary
    assert f"note: it was unfair in {unfair} of its 9 runs" in verdict.summary


def test_a_winner_fair_in_every_run_gets_no_more_rounds() -> None:
    rounds = Rounds({
        "default": DEFAULT,
        "trial 7": fair(300, 310, 305, 302, 304),
        # Unfair in 1 of 5 but not the winner: its fairness decides nothing.
        "trial 9": [(200, True), (205, False), (210, False), (202, False), (207, False)],
    })  # fmt: skip
    entries, verdict = rounds.settle()
    assert rounds.asked == [] and rounds.extra() == []
    assert verdict.winner is entries["trial 7"]
    assert "more rounds" not in verdict.summary and "unfair" not in verdict.summary


def test_the_default_written_gets_no_more_rounds_for_its_fairness() -> None:
    rounds = Rounds({
        "default": [(300, False), (310, True), (305, False), (302, False), (304, False)],
        "trial 7": fair(100, 101, 102, 101, 100),
    })  # fmt: skip
    entries, verdict = rounds.settle()
    assert rounds.asked == [] and verdict.winner is entries["default"]


def test_the_extra_rounds_are_run_once_and_the_next_winner_is_named_unmeasured() -> None:
    rounds = Rounds({
        "default": DEFAULT,
        "trial 7": [*ONCE_UNFAIR, *FOUR_UNFAIR],
        "trial 9": [(200, True), (205, False), (210, False), (202, False), (207, False)],
    })  # fmt: skip
    entries, verdict = rounds.settle()
    assert rounds.asked == [["default", "trial 7"]]
    assert verdict.winner is entries["trial 9"]
    assert "note: it was unfair in 1 of its 5 runs" in verdict.summary
    assert (
        "; trial 9, written instead, was not measured again (the extra rounds are run once)"
    ) in verdict.summary


def test_without_a_default_the_winner_alone_is_measured_again() -> None:
    rounds = Rounds({"trial 7": [*ONCE_UNFAIR, *FOUR_FAIR]})
    _, verdict = rounds.settle()
    assert rounds.asked == [["trial 7"]]
    assert rounds.extra() == [("trial 7", index) for index in range(5, 9)]
    assert (
        f"(after {EXTRA_ROUNDS} more rounds of trial 7: trial 7 was unfair in 1 of its 5 runs"
    ) in verdict.summary


def test_the_kept_result_reads_back_every_run_and_the_reason() -> None:
    """What `tune` stores (and `report`, `show` and a resumed study's page read back) holds the
    counts over all the runs and the verdict's words."""
    rounds = Rounds(
        {"default": DEFAULT, "trial 7": [*ONCE_UNFAIR, *FOUR_UNFAIR[:1], *FOUR_FAIR[1:]]}
    )
    entries, verdict = rounds.settle()
    stored = {
        "confirmation": [entry.summary().to_json() for entry in entries.values()],
        "verdict": verdict.to_json(),
    }
    result = StoredResult.from_json(stored)
    by_label = {summary.label: summary for summary in result.confirmation}
    assert (by_label["trial 7"].unfair_runs, by_label["trial 7"].runs) == (2, 9)
    assert (by_label["default"].unfair_runs, by_label["default"].runs) == (0, 9)
    assert not by_label["trial 7"].unfair
    assert unfair_text(by_label["trial 7"].unfair_runs, by_label["trial 7"].runs) == "unfair 2/9"
    assert result.verdict is not None and result.verdict.summary == verdict.summary
    assert "trial 7 was unfair in 1 of its 5 runs" in result.verdict.summary
    # The rounds are kept with each figure: a page read back later pairs them again.
    assert by_label["trial 7"].rps is not None
    assert by_label["trial 7"].rps.rounds == tuple(range(9))
