"""The verdict by pairs: the exact test, and its error rate and power under a machine's noise.

The noise model is this project's VMs' (docs/pages/figures.md): each round moves every config
alike (a stolen core, drift: `round_sd`), each run has its own noise (`run_sd`), and now and
then one run loses a large share of its window (`outlier`: a 40% loss). Pure logic: the rounds
are drawn, not measured; `settle` runs as `tune` runs it, second look included.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

import pytest

from tests.support.measurements import measurement
from tuner.metrics.paired import (
    ALPHA,
    FIRST_LOOK_ALPHA,
    Looks,
    Pairs,
    level_alpha,
    second_look_alpha,
    signed_rank_p,
)
from tuner.search.objectives import THROUGHPUT, Slo
from tuner.workflow.confirm import EXTRA_ROUNDS, Candidate, Confirmed, settle

ROUNDS = 5


def brute_force_p(advantages: Sequence[float]) -> float:
    """P(W+ >= observed) by listing every sign pattern, mid-ranks for ties."""
    steps = [a for a in advantages if a != 0]
    magnitudes = sorted(abs(a) for a in steps)

    def rank(value: float) -> float:
        places = [i + 1 for i, m in enumerate(magnitudes) if m == value]
        return sum(places) / len(places)

    ranks = [rank(abs(a)) for a in steps]
    observed = sum(r for r, a in zip(ranks, steps, strict=True) if a > 0)
    patterns = list(itertools.product((0, 1), repeat=len(steps)))
    at_least = sum(
        1 for signs in patterns if sum(r * s for r, s in zip(ranks, signs, strict=True)) >= observed
    )
    return at_least / len(patterns) if steps else 1.0


@pytest.mark.parametrize("seed", range(40))
def test_the_exact_p_value_matches_every_sign_pattern_listed(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 9)
    # Rounded, so tied magnitudes and zeros occur.
    advantages = [round(rng.gauss(0.05, 0.1), 1) for _ in range(n)]
    assert signed_rank_p(advantages) == pytest.approx(brute_force_p(advantages))


def test_five_wins_of_five_is_the_first_looks_share_and_fewer_rounds_cannot_decide() -> None:
    assert signed_rank_p([0.1, 0.2, 0.3, 0.4, 0.5]) == FIRST_LOOK_ALPHA == 1 / 32
    assert signed_rank_p([0.1, 0.2, 0.3, 0.4]) == 1 / 16 > ALPHA
    # The level over both looks stays at ALPHA; a first look that could not decide spends none.
    assert second_look_alpha(5) + FIRST_LOOK_ALPHA == pytest.approx(ALPHA)
    assert second_look_alpha(3) == ALPHA


def test_each_pair_is_decided_at_the_level_of_its_own_look() -> None:
    """After some configs had more rounds: a pair measured only in the first look's rounds keeps
    that look's level; a pair with more rounds gets what the first look left of 5%."""
    looks = Looks(frozenset(range(5)))
    assert looks.alpha(range(5)) == looks.alpha([0, 2, 4]) == FIRST_LOOK_ALPHA
    assert looks.alpha(range(9)) == second_look_alpha(5) == pytest.approx(ALPHA - 1 / 32)
    # Two first-look pairs could decide nothing, so they spent nothing.
    assert looks.alpha([3, 4, 5, 6, 7, 8]) == ALPHA
    assert level_alpha(looks, range(9)) == second_look_alpha(5)
    assert level_alpha(0.01, range(9)) == 0.01


def test_pairs_follow_the_rounds_and_the_figures_direction() -> None:
    faster = Pairs.of([110, 120, 130], [0, 1, 2], [100, 100, 100], [0, 1, 2], higher_is_better=True)
    assert (faster.wins, faster.losses) == (3, 0)
    lower_p99 = Pairs.of([9, 12], [0, 1], [10, 10], [0, 1], higher_is_better=False)
    assert (lower_p99.wins, lower_p99.losses) == (1, 1)
    gap = Pairs.of([1, 2, 3], [0, 2, 3], [5, 6, 7], [0, 1, 2], higher_is_better=True)
    assert gap.rounds == (0, 2) and gap.mine == (1, 2) and gap.theirs == (5, 7)


def _noisy_rounds(
    effect: float, run_sd: float, round_sd: float, outlier: float, repeats: int, seed: int
) -> tuple[float, float]:
    """How often `settle` writes B over the default A, and how often the ranges rule this
    replaced (3 rounds, 2 more when the best median was B's) would have, on the same runs."""
    rng = random.Random(seed)
    calls = [_one_repeat(rng, effect, run_sd, round_sd, outlier) for _ in range(repeats)]
    return (
        sum(by_pairs for by_pairs, _ in calls) / repeats,
        sum(by_ranges for _, by_ranges in calls) / repeats,
    )


def _one_repeat(
    rng: random.Random, effect: float, run_sd: float, round_sd: float, outlier: float
) -> tuple[bool, bool]:
    a, b = Confirmed(Candidate("default", None, {})), Confirmed(Candidate("B", 1, {}))
    # Every round of both drawn up front: the ranges rule reads its 3 + 2 from the same runs.
    for index in range(ROUNDS + EXTRA_ROUNDS):
        shift = math.exp(rng.gauss(0.0, round_sd))
        for entry, gain in ((a, 1.0), (b, effect)):
            value = 1000.0 * gain * shift * math.exp(rng.gauss(0.0, run_sd))
            entry.runs.append(measurement(value * 0.6 if rng.random() < outlier else value))
            entry.rounds.append(index)
    mine = [run.median_rps for run in b.runs]
    theirs = [run.median_rps for run in a.runs]
    by_ranges = min(mine[:3]) > max(theirs[:3])
    if not by_ranges and sorted(mine[:3])[1] > sorted(theirs[:3])[1]:
        by_ranges = min(mine[:5]) > max(theirs[:5])
    # The pairs, as `tune` decides: the first five rounds, then the rest if asked.
    later = {id(e): (e.runs[ROUNDS:], e.rounds[ROUNDS:]) for e in (a, b)}
    for entry in (a, b):
        del entry.runs[ROUNDS:], entry.rounds[ROUNDS:]

    def more(pair: Sequence[Confirmed]) -> bool:
        for entry in pair:
            runs, rounds = later[id(entry)]
            entry.runs += runs
            entry.rounds += rounds
        return True

    verdict = settle([a, b], THROUGHPUT, Slo(), None, more)
    return verdict is not None and verdict.winner is b, by_ranges


NOISE = {
    # round_sd: drift shared by a round's runs; run_sd: each run's own; outlier: 40% losses.
    "drift": (0.05, 0.20, 0.0),
    "drift-and-hiccups": (0.05, 0.20, 0.05),
    "own-noise": (0.15, 0.05, 0.05),
}


@pytest.mark.parametrize("noise", NOISE, ids=list(NOISE))
def test_two_equal_configs_are_called_different_at_most_at_the_stated_rate(noise: str) -> None:
    """The A/A check: the same config twice, 600 times, both looks counted."""
    run_sd, round_sd, outlier = NOISE[noise]
    rate, _ = _noisy_rounds(1.0, run_sd, round_sd, outlier, repeats=600, seed=7)
    assert rate <= ALPHA


def test_a_ten_percent_gain_the_ranges_missed_is_found_by_the_pairs() -> None:
    """The A/B check of issue 44's kind: the drift moves both configs alike, so the ranges
    overlap; the pairs find the faster one in at least 9 of 10 repeats."""
    pairs, ranges = _noisy_rounds(1.10, 0.03, 0.20, 0.0, repeats=300, seed=11)
    assert pairs >= 0.9 and ranges < 0.2, (pairs, ranges)
