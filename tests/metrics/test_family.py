"""The family's test: several candidates confirmed against the default, the error held at 5%
for all of them, and the power kept where one is really better.

Pure logic: the rounds are drawn (a drift each round shares, a noise each run has), and
`settle` decides as `tune` does, second look and its extra rounds included.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

import pytest

from tests.support.measurements import measurement
from tuner.metrics.family import MIN_ROUNDS, SHUFFLES, family_better, group_p
from tuner.metrics.paired import ALPHA
from tuner.metrics.stats import Spread
from tuner.search.objectives import THROUGHPUT, Slo
from tuner.workflow.confirm import EXTRA_ROUNDS, Candidate, Confirmed, decide, settle

ROUNDS = 5
DRIFT = (0.05, 0.15)  # each run's own sd, the round's shared sd (of log req/s)


def _drawn(
    rng: random.Random, gains: Sequence[float], run_sd: float, round_sd: float, rounds: int
) -> list[list[float]]:
    """rounds x configs of req/s."""
    table = []
    for _ in range(rounds):
        shift = math.exp(rng.gauss(0.0, round_sd))
        table.append([1000 * g * shift * math.exp(rng.gauss(0.0, run_sd)) for g in gains])
    return table


def _written(rng: random.Random, gains: Sequence[float], run_sd: float, round_sd: float) -> int:
    """The index of the config `settle` writes (0: the default)."""
    entries = [Confirmed(Candidate("default", None, {}))] + [
        Confirmed(Candidate(f"trial {i}", i, {})) for i in range(1, len(gains))
    ]
    table = _drawn(rng, gains, run_sd, round_sd, ROUNDS + EXTRA_ROUNDS)
    for index, row in enumerate(table[:ROUNDS]):
        for entry, value in zip(entries, row, strict=True):
            entry.runs.append(measurement(value))
            entry.rounds.append(index)
    asked: list[int] = []

    def more(group: Sequence[Confirmed]) -> bool:
        asked.append(len(group))
        for index in range(ROUNDS, ROUNDS + EXTRA_ROUNDS):
            for entry in group:
                entry.runs.append(measurement(table[index][entries.index(entry)]))
                entry.rounds.append(index)
        return True

    verdict = settle(entries, THROUGHPUT, Slo(), None, more)
    assert len(asked) <= 1
    return entries.index(verdict.winner) if verdict is not None else 0


def _rate(gains: Sequence[float], noise: tuple[float, float], repeats: int, seed: int) -> float:
    rng = random.Random(seed)
    return sum(_written(rng, gains, *noise) == 1 for _ in range(repeats)) / repeats


@pytest.mark.parametrize("noise", [DRIFT, (0.20, 0.05)], ids=["drift", "own-noise"])
def test_three_equal_candidates_are_called_better_at_most_at_the_stated_rate(
    noise: tuple[float, float],
) -> None:
    """A/A for the family: judged pair by pair, the best of three equal candidates wins its
    pairs 8-11% of the time; the family's test holds the 5% for all three."""
    rng = random.Random(3)
    repeats = 400
    false = sum(_written(rng, [1.0] * 4, *noise) != 0 for _ in range(repeats))
    assert false / repeats <= ALPHA, false


def test_a_better_candidate_beside_a_clearly_worse_one_is_still_found() -> None:
    """A worse rival (a slow baseline) must not hide the better one: shuffled into the
    default's place its runs would make any config look better, so it is left out."""
    assert _rate([1.0, 1.3, 0.7, 1.0], DRIFT, repeats=200, seed=5) >= 0.9


def test_a_lone_better_candidate_among_equals_is_found_in_most_repeats() -> None:
    assert _rate([1.0, 1.15, 1.0, 1.0], DRIFT, repeats=200, seed=9) >= 0.8


def _spread(values: Sequence[float], rounds: Sequence[int] | None = None) -> Spread:
    return Spread.of(list(values), list(rounds) if rounds is not None else range(len(values)))


def test_the_group_p_value_counts_every_arrangement_when_they_are_few() -> None:
    """Three rounds of three configs: 6^3 arrangements, enumerated; checked against a count
    written out here, and the best case's p is one arrangement's share times the ties."""
    reference, a, b = _spread([100, 100, 100]), _spread([130, 125, 140]), _spread([99, 102, 98])
    table = [
        [math.log(v) for v in row]
        for row in zip([100] * 3, [130, 125, 140], [99, 102, 98], strict=True)
    ]

    def statistic(rows: Sequence[Sequence[float]]) -> float:
        return max(sum(row[j] - row[0] for row in rows) / len(rows) for j in (1, 2))

    observed = statistic(table)
    arrangements = list(itertools.product(itertools.permutations(range(3)), repeat=len(table)))
    hits = sum(
        statistic([[row[i] for i in order] for row, order in zip(table, orders, strict=True)])
        >= observed - 1e-12
        for orders in arrangements
    )
    assert MIN_ROUNDS <= 3 and SHUFFLES >= 6**3
    assert group_p(reference, [a, b], True) == pytest.approx(hits / len(arrangements))
    # Lower is better turns the figures over: the same group is now far from better.
    assert group_p(reference, [a, b], False) > 0.5


def test_a_shuffled_p_value_never_falls_below_one_in_the_shuffles() -> None:
    rounds = range(9)
    reference = _spread([100.0] * 9, rounds)
    members = [_spread([200.0 + i] * 9, rounds) for i in range(3)]
    p = group_p(reference, members, True)
    assert 1 / (1 + SHUFFLES) <= p < 0.01


def test_too_few_common_rounds_cannot_decide_a_group() -> None:
    reference = _spread([100, 100, 100, 100], [0, 1, 2, 3])
    a = _spread([200, 200, 200, 200], [0, 1, 2, 3])
    b = _spread([200, 200], [2, 3])  # two rounds in common with the rest
    assert group_p(reference, [a, b], True) == 1.0


def test_a_member_needs_every_group_holding_it_rejected() -> None:
    """`a` wins its pair; beside an equal `b` whose runs swing as much as its own gain, the
    group {a, b} cannot be told from the default, so `a` is not kept."""
    rng = random.Random(1)
    reference = _spread([1000 * math.exp(rng.gauss(0, 0.3)) for _ in range(5)])
    a = _spread([v * 1.05 for v in reference.samples])
    b = _spread([1000 * math.exp(rng.gauss(0, 0.3)) for _ in range(5)])
    kept = family_better(
        reference, {"a": a, "b": b}, lambda label: label == "a", higher_is_better=True, alpha=ALPHA
    )
    assert kept == frozenset()
    alone = family_better(
        reference, {"a": a}, lambda label: label == "a", higher_is_better=True, alpha=ALPHA
    )
    assert alone == {"a"}


def test_spreads_without_rounds_are_judged_by_their_pair_alone() -> None:
    reference = Spread.of([100, 100, 100])
    kept = family_better(
        reference,
        {"a": Spread.of([130, 130, 130]), "b": Spread.of([100, 101, 99])},
        lambda label: label == "a",
        higher_is_better=True,
        alpha=ALPHA,
    )
    assert kept == {"a"}


def test_the_verdict_says_when_the_family_held_a_winner_back() -> None:
    """The best won its pairs, five of five, but a group with an equal, noisy rival did not
    beat the default: the default is written and the summary says why."""
    rng = random.Random(2)
    entries = [Confirmed(Candidate(label, None, {})) for label in ("default", "trial 1", "trial 2")]
    base = [1000 * math.exp(rng.gauss(0, 0.02)) for _ in range(ROUNDS)]
    swings = [0.6, 1.5, 0.7, 1.45, 0.65]
    for index in range(ROUNDS):
        for entry, value in zip(
            entries, (base[index], base[index] * 1.04, base[index] * swings[index]), strict=True
        ):
            entry.runs.append(measurement(value))
            entry.rounds.append(index)
    verdict = decide(entries, THROUGHPUT, Slo())
    assert verdict is not None and verdict.winner is entries[0]
    assert verdict.lucky == ("trial 1",)
    assert "family's luck" in verdict.summary and "closed test" in verdict.summary
