"""Small, exact statistics over repeated measurements: medians, spread, and a noise verdict."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tuner.metrics.paired import ALPHA, Level, Pairs, level_alpha


@dataclass(frozen=True)
class Spread:
    """min / median / max of repeated samples of one figure."""

    low: float
    median: float
    high: float
    samples: tuple[float, ...]
    # The interleaved round of each sample, where the samples came from rounds: what pairs
    # them with another config's (empty: unpaired, e.g. a study stored before they were kept).
    rounds: tuple[int, ...] = ()

    @classmethod
    def of(cls, samples: Sequence[float], rounds: Sequence[int] = ()) -> Spread:
        if not samples:
            raise ValueError("no samples")
        if rounds and len(rounds) != len(samples):
            raise ValueError("one round per sample")
        return cls(
            min(samples), statistics.median(samples), max(samples), tuple(samples), tuple(rounds)
        )

    @classmethod
    def from_dict(cls, stored: Mapping[str, float]) -> Spread:
        """From its stored form {"min", "median", "max"} (the samples are not stored)."""
        return cls(stored["min"], stored["median"], stored["max"], ())

    @property
    def relative_range(self) -> float:
        """(max - min) / median: how far apart repeats of the same thing landed."""
        return (self.high - self.low) / self.median if self.median else 0.0


def spread_text(spread: Spread | None, pattern: str) -> str:
    """The spread as "min / median / max", each with `pattern` (e.g. "{:,.0f}"); or "n/a"."""
    if spread is None:
        return "n/a"
    return " / ".join(pattern.format(v) for v in (spread.low, spread.median, spread.high))


def ratio(value: float, reference: float) -> float:
    return value / reference if reference else float("inf")


def pairs(candidate: Spread, reference: Spread, *, higher_is_better: bool) -> Pairs | None:
    """The two spreads paired by round; None when either has no rounds (stored unpaired)."""
    if not candidate.rounds or not reference.rounds:
        return None
    return Pairs.of(
        candidate.samples,
        candidate.rounds,
        reference.samples,
        reference.rounds,
        higher_is_better=higher_is_better,
    )


def clearly_better(
    candidate: Spread, reference: Spread, *, higher_is_better: bool, alpha: Level = ALPHA
) -> bool:
    """True when `candidate` is better than `reference` beyond the noise.

    Measured in the same interleaved rounds, they are judged by the pairs the rounds make
    (`tuner.metrics.paired`: an exact test at `alpha`, or at the level of their look). Spreads
    without rounds (stored before the rounds were kept, or never paired) fall back to the
    ranges: every sample of one beyond every sample of the other.
    """
    paired = pairs(candidate, reference, higher_is_better=higher_is_better)
    if paired is not None and paired.count:
        return paired.better(level_alpha(alpha, paired.rounds))
    if higher_is_better:
        return candidate.low > reference.high
    return candidate.high < reference.low


def clearly_lower(
    candidate: Spread, reference: Spread, *, by: float = 0.0, alpha: Level = ALPHA
) -> bool:
    """True when `candidate` is lower than `reference` beyond the noise of their pairs and its
    median lower by at least the share `by` of the reference's: a difference the rounds can see
    and that is large enough to spend a change on (a tenth of a megabyte is beyond the noise of
    PSS, and buys nothing)."""
    if not clearly_better(candidate, reference, higher_is_better=False, alpha=alpha):
        return False
    return candidate.median <= reference.median * (1 - by)


def pair_alpha(level: Level, candidate: Spread, reference: Spread) -> float:
    """The level two spreads are judged at: `level`, or the level of the look their common
    rounds make."""
    return level_alpha(level, set(candidate.rounds) & set(reference.rounds))


def better_in_every_round(candidate: Spread, reference: Spread, *, higher_is_better: bool) -> bool:
    """`candidate` better in every round both were measured in (by the ranges when unpaired):
    an interim call on too few rounds for a test at 5% (a race's rung has two), which a margin
    of its own must back (tuner.workflow.race_rule)."""
    paired = pairs(candidate, reference, higher_is_better=higher_is_better)
    if paired is not None and paired.count:
        return paired.wins == paired.count
    if higher_is_better:
        return candidate.low > reference.high
    return candidate.high < reference.low
