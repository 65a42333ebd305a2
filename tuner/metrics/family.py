"""Several configs against one reference: which are better, with the chance of calling any
equal one better held at the level for the whole family (closed testing).

`tune` confirms several candidates against the default and writes the best of them. Each pair
judged alone at 5% (tuner.metrics.paired) lets a family of equal candidates produce a "better"
one more often, the more there are: the best of several is the likeliest to have won its
rounds by luck. Here a candidate counts as better only when every group of candidates that
holds it is rejected as a whole ("all of these equal the reference"):

- a group of one by the pair's own test (`pair_better`, the signed-rank rule);
- a larger group by a permutation test within rounds: under "all of the group equal the
  reference" their runs in one round are exchangeable, so shuffling them across the group's
  places round by round gives the statistic's distribution, whatever the noise. The statistic
  is the group's largest mean log-ratio over the reference (magnitudes, not ranks: with ranks a
  group of two could not be rejected in five rounds, as each member alone wins them all one
  time in 32).

Testing every group that holds a candidate controls the family's error at `alpha` (Marcus,
Peritz and Gabriel's closure). Pure logic; the shuffles are seeded, so a decision repeats.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from functools import cache

import numpy as np

from tuner.metrics.stats import Spread

# Shuffles per group test when enumerating every arrangement would take more.
SHUFFLES = 2000
# Fewer rounds in common than this and a group cannot be told from the reference.
MIN_ROUNDS = 3
_SEED = 44


def family_better(
    reference: Spread,
    candidates: Mapping[str, Spread],
    pair_better: Callable[[str], bool],
    *,
    higher_is_better: bool,
    alpha: float,
) -> frozenset[str]:
    """The candidates better than `reference` with the family's error held at `alpha`: each
    passes its own pair test (`pair_better(label)`) and every larger group holding it is
    rejected. Candidates whose spreads carry no rounds cannot be grouped: they are judged by
    their pair test alone, as before rounds were kept."""
    singles = [label for label in candidates if pair_better(label)]
    grouped = {label: s for label, s in candidates.items() if s.rounds} if reference.rounds else {}
    if len(grouped) < 2:
        return frozenset(singles)

    @cache
    def rejected(group: frozenset[str]) -> bool:
        return (
            group_p(reference, [grouped[label] for label in sorted(group)], higher_is_better)
            <= alpha
        )

    better = set()
    for label in singles:
        if label not in grouped:
            better.add(label)
            continue
        others = sorted(set(grouped) - {label})
        groups = (
            frozenset((label, *chosen))
            for size in range(1, len(others) + 1)
            for chosen in itertools.combinations(others, size)
        )
        if all(rejected(group) for group in groups):
            better.add(label)
    return frozenset(better)


def group_p(reference: Spread, members: Sequence[Spread], higher_is_better: bool) -> float:
    """The permutation p-value of "every member equals the reference", over the rounds all of
    them were measured in: exact when the arrangements are few, else from `SHUFFLES` seeded
    shuffles (counting the observed one, so it stays a valid p-value)."""
    table = _log_table(reference, members, higher_is_better)
    if table.shape[0] < MIN_ROUNDS:
        return 1.0
    observed = _statistic(table[np.newaxis])[0]
    places = table.shape[1]
    arrangements = math.factorial(places) ** table.shape[0]
    if arrangements <= SHUFFLES:
        orders = np.array(
            list(itertools.product(itertools.permutations(range(places)), repeat=table.shape[0]))
        )
        shuffled = np.take_along_axis(table[np.newaxis], orders, axis=2)
        # A hair of tolerance, so the observed arrangement counts itself despite rounding.
        return float(np.mean(_statistic(shuffled) >= observed - 1e-12))
    rng = np.random.default_rng(_SEED)
    orders = rng.random((SHUFFLES, *table.shape)).argsort(axis=2)
    shuffled = np.take_along_axis(np.broadcast_to(table, orders.shape), orders, axis=2)
    hits = int(np.sum(_statistic(shuffled) >= observed - 1e-12))
    return (1 + hits) / (1 + SHUFFLES)


def _log_table(reference: Spread, members: Sequence[Spread], higher_is_better: bool) -> np.ndarray:
    """Rounds x places (the reference first), each the signed log of a run's figure, so that
    larger is better; only the rounds every one of them has."""
    spreads = [reference, *members]
    by_round = [dict(zip(s.rounds, s.samples, strict=True)) for s in spreads]
    common = sorted(set.intersection(*(set(values) for values in by_round)))
    sign = 1.0 if higher_is_better else -1.0
    return np.array(
        [[sign * math.log(max(values[r], 1e-12)) for values in by_round] for r in common]
    ).reshape(len(common), len(spreads))


def _statistic(tables: np.ndarray) -> np.ndarray:
    """Per arrangement (tables: arrangements x rounds x places): the largest mean log-ratio of
    a member's place over the reference's (place 0)."""
    gains = tables[:, :, 1:] - tables[:, :, :1]
    return gains.mean(axis=1).max(axis=1)
