"""Among configs the noise cannot separate, the cheapest: the rule behind a written file.

A difference inside the measured noise is no difference. When the interleaved rounds cannot
tell the best median from another config on the objective's figures, the file should not
spend memory, tail latency or changes for nothing. So among the configs that tie with the best,
the written one is: the least memory, then the lower p99 (each only where the pairs of the
interleaved rounds separate them, memory only by a hundredth or more: tuner.metrics.material),
then the fewest settings changed from the server's default, then the best median. Pure logic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from tuner.metrics.material import MATERIAL_MEMORY
from tuner.metrics.paired import ALPHA, Level
from tuner.metrics.stats import Spread, clearly_better, clearly_lower
from tuner.search.objectives import P99, PSS, Headline, Objective


class Remeasured(Protocol):
    """What the rule needs of a re-measured config (`Confirmed` is one)."""

    def spread(self, headline: Headline) -> Spread | None: ...


C = TypeVar("C", bound=Remeasured)


@dataclass(frozen=True)
class Choice(Generic[C]):
    """The config to write, the others it tied with, and why it was preferred ("" = best)."""

    chosen: C
    tied: tuple[C, ...]
    why: str


def ties_with(
    best: Remeasured, other: Remeasured, objective: Objective, level: Level = ALPHA
) -> bool:
    """True when no headline of the objective separates `best` from `other` beyond the noise
    (their pairs at `level`)."""
    for headline in objective.headlines:
        mine, theirs = best.spread(headline), other.spread(headline)
        if mine is None or theirs is None:
            return False
        if clearly_better(mine, theirs, higher_is_better=headline.higher_is_better, alpha=level):
            return False
    return True


def cheapest_among_equals(
    best: C,
    candidates: Sequence[C],
    objective: Objective,
    changes: Callable[[C], int],
    label: Callable[[C], str],
    level: Level = ALPHA,
) -> Choice[C]:
    """`best` (the best median), or the cheapest config that ties with it (see the module;
    `level`: what their pairs are decided at)."""
    tied = [c for c in candidates if c is best or ties_with(best, c, objective, level)]
    if len(tied) < 2:
        return Choice(best, (), "")
    pool = list(tied)
    reasons: list[str] = []
    for headline in (PSS, P99):
        pool, reason = _keep_not_clearly_worse(pool, headline, best, label)
        if reason:
            reasons.append(reason)
    fewest = min(changes(c) for c in pool)
    pool = [c for c in pool if changes(c) == fewest]
    chosen = best if best in pool else pool[0]
    if chosen is not best and not reasons and changes(chosen) < changes(best):
        reasons.append(
            f"{changes(chosen)} setting(s) changed from the default instead of {changes(best)}"
        )
    others = tuple(c for c in tied if c is not chosen)
    return Choice(chosen, others, "; ".join(reasons))


def _keep_not_clearly_worse(
    pool: list[C], headline: Headline, best: C, label: Callable[[C], str]
) -> tuple[list[C], str]:
    """The configs of `pool` whose `headline` is not clearly worse than the lowest one's."""
    measured = [(c, s) for c in pool if (s := c.spread(headline)) is not None]
    if len(measured) < len(pool):  # a figure missing: nothing to compare on this one
        return pool, ""
    low = min((s for _, s in measured), key=lambda s: s.median)
    # A tenth of a MB is beyond PSS's noise and buys nothing: memory counts from a hundredth.
    by = MATERIAL_MEMORY if headline is PSS else 0.0
    kept = [c for c, s in measured if not clearly_lower(low, s, by=by)]
    if best in pool and best not in kept:
        mine = best.spread(headline)
        assert mine is not None
        digits = 1
        while digits < 3 and f"{low.median:.{digits}f}" == f"{mine.median:.{digits}f}":
            digits += 1  # separated beyond the noise, yet equal at one decimal: show why
        reason = (
            f"{headline.short} {low.median:,.{digits}f} vs {mine.median:,.{digits}f} "
            f"{headline.unit} for {label(best)}"
        )
        return kept, reason
    return kept, ""


def settings_changed(settings: Mapping[str, Any], defaults: Mapping[str, Any]) -> int:
    """How many settings differ from the server's defaults."""
    return sum(1 for name, value in settings.items() if defaults.get(name, value) != value)
