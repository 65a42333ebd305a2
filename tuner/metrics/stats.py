"""Small, exact statistics over repeated measurements: medians, spread, and a noise verdict."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    """min / median / max of repeated samples of one figure."""

    low: float
    median: float
    high: float
    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread:
        if not samples:
            raise ValueError("no samples")
        return cls(min(samples), statistics.median(samples), max(samples), tuple(samples))

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


def clearly_better(candidate: Spread, reference: Spread, *, higher_is_better: bool) -> bool:
    """True when every sample of `candidate` beats every sample of `reference`.

    With interleaved rounds A B A B ..., non-overlapping ranges are the plain, conservative
    test: drift or noise that moves both equally cannot create a difference that is not there.
    """
    if higher_is_better:
        return candidate.low > reference.high
    return candidate.high < reference.low
