"""Two configs compared round by round: the pairs interleaved rounds make, and an exact test.

Interleaved rounds measure every config once per round, so a drift of the machine (a stolen
core, a neighbour's burst) moves all of them alike within a round and differently between
rounds. Comparing every run of one config with every run of another throws that away: the
ranges overlap even when one config wins every round. Here the figures are paired by round,
and the within-round ratios are judged by the exact one-sided Wilcoxon signed-rank test (the
log-ratios' signs, weighted by their ranks): under "no difference" each sign is a coin toss,
whatever the size of the round-to-round noise, so the chance of calling two equal configs
different is at most the level asked for. With n rounds the smallest p is 2^-n: five wins of
five give 1/32, so fewer than five rounds can never decide at 5%.

Looks: the confirmation may add rounds to a pair it could not decide and look again. Two looks
at 5% each would call equal configs different up to 10% of the time, so the level is split:
`FIRST_LOOK_ALPHA` (five wins of five, exactly) at the first, the rest at the second
(`second_look_alpha`); a first look too short to decide anything spends nothing. When only some
configs get the second look (the confirmed front), each pair is decided at the level of its own
look (`Looks`). Pure logic.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TypeAlias

# The chance of calling two equal configs different, over all the looks of one decision.
ALPHA = 0.05
# The first look's share: five wins in five rounds (p = 1/32) decide at once.
FIRST_LOOK_ALPHA = 1 / 32


@dataclass(frozen=True)
class Pairs:
    """One figure of two configs in the rounds both were measured in (by round index)."""

    rounds: tuple[int, ...]
    mine: tuple[float, ...]
    theirs: tuple[float, ...]
    higher_is_better: bool

    @classmethod
    def of(
        cls,
        mine: Sequence[float],
        mine_rounds: Sequence[int],
        theirs: Sequence[float],
        theirs_rounds: Sequence[int],
        *,
        higher_is_better: bool,
    ) -> Pairs:
        """The rounds both have, in round order (a failed run leaves its round unpaired)."""
        by_round = dict(zip(theirs_rounds, theirs, strict=True))
        common = sorted(
            (index, value, by_round[index])
            for index, value in zip(mine_rounds, mine, strict=True)
            if index in by_round
        )
        return cls(
            tuple(index for index, _, _ in common),
            tuple(value for _, value, _ in common),
            tuple(value for _, _, value in common),
            higher_is_better,
        )

    @property
    def count(self) -> int:
        return len(self.rounds)

    @property
    def advantages(self) -> list[float]:
        """Mine over theirs per round, > 0 where mine is better: the log of the ratio where
        both figures are positive and finite (a ratio's size does not depend on the figure's
        scale), else the plain difference."""
        out = []
        for a, b in zip(self.mine, self.theirs, strict=True):
            if a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b):
                step = math.log(a / b)
            elif a == b:
                step = 0.0
            else:
                step = a - b if math.isfinite(a - b) else math.copysign(math.inf, a - b)
            out.append(step if self.higher_is_better else -step)
        return out

    @property
    def wins(self) -> int:
        """Rounds in which mine was the better."""
        return sum(1 for step in self.advantages if step > 0)

    @property
    def losses(self) -> int:
        return sum(1 for step in self.advantages if step < 0)

    def p_better(self) -> float:
        """The exact one-sided p-value of "mine is better" (1.0 without pairs)."""
        return signed_rank_p(self.advantages)

    def p_worse(self) -> float:
        return signed_rank_p([-step for step in self.advantages])

    def better(self, alpha: float = ALPHA) -> bool:
        return self.count > 0 and self.p_better() <= alpha

    def worse(self, alpha: float = ALPHA) -> bool:
        return self.count > 0 and self.p_worse() <= alpha

    def ratios(self) -> list[float]:
        """Mine / theirs in each round (as measured, not oriented); rounds with a zero or an
        unmeasured figure are left out."""
        return [
            a / b
            for a, b in zip(self.mine, self.theirs, strict=True)
            if b and math.isfinite(a) and math.isfinite(b)
        ]

    def text(self, alpha: float) -> str:
        """ "won 5 of 5 interleaved rounds, x1.16-x1.62 within rounds (p 0.031; 3.1% asked)"."""
        ratios = self.ratios()
        within = f", x{min(ratios):.2f}-x{max(ratios):.2f} within rounds" if ratios else ""
        p = self.p_better()
        return (
            f"better in {self.wins} of {self.count} interleaved rounds{within} "
            f"(signed-rank p {p:.3f}, decided at {alpha:.1%})"
        )


def signed_rank_p(advantages: Sequence[float]) -> float:
    """P(W+ >= observed) under "no difference", exactly: every sign pattern of the nonzero
    advantages' ranks equally likely (ties take their mean rank; zeros are left out)."""
    nonzero = [step for step in advantages if step != 0 and not math.isnan(step)]
    if not nonzero:
        return 1.0
    doubled = _doubled_ranks([abs(step) for step in nonzero])
    observed = sum(rank for rank, step in zip(doubled, nonzero, strict=True) if step > 0)
    # counts[s]: sign patterns whose positive ranks sum to s (doubled ranks are integers).
    counts = [1] + [0] * sum(doubled)
    for rank in doubled:
        for total in range(len(counts) - 1, rank - 1, -1):
            counts[total] += counts[total - rank]
    return sum(counts[observed:]) / 2 ** len(doubled)


def _doubled_ranks(values: Sequence[float]) -> list[int]:
    """Twice the mid-ranks of `values` (1-based), so tied values keep integer ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = start + end + 2  # (start+1 + end+1): twice the mean rank
        start = end + 1
    return ranks


def smallest_p(rounds: int) -> float:
    """The smallest p-value `rounds` pairs can give (every round won)."""
    return 2.0**-rounds


def second_look_alpha(first_look_rounds: int) -> float:
    """The level left for a second look, after a first look over `first_look_rounds` pairs: a
    first look that could not have decided (its smallest p above its share) spent nothing."""
    spent = FIRST_LOOK_ALPHA if smallest_p(first_look_rounds) <= FIRST_LOOK_ALPHA else 0.0
    return ALPHA - spent


@dataclass(frozen=True)
class Looks:
    """The level of each pair in a decision taken again after some of its configs had more
    rounds: a pair with rounds beyond the first look's is at its second look, at the level the
    first left; a pair measured only in the first look's rounds is decided on that look's data,
    at its level, as it was (at the second look's level a decided pair of five rounds would be
    undone by other configs' extra rounds)."""

    first_rounds: frozenset[int]

    def alpha(self, rounds: Collection[int]) -> float:
        """The level of a pair measured together in `rounds`."""
        first = sum(1 for index in rounds if index in self.first_rounds)
        return FIRST_LOOK_ALPHA if first == len(rounds) else second_look_alpha(first)


# What a decision is taken at: one level for every pair, or the level of each pair's look.
Level: TypeAlias = float | Looks


def level_alpha(level: Level, rounds: Collection[int]) -> float:
    """The level of a pair measured together in `rounds`."""
    return level.alpha(rounds) if isinstance(level, Looks) else level
