"""The confirmed front's close calls: more rounds for the pairs its first look left undecided.

As the single pick gets `EXTRA_ROUNDS` more for the default and the best median when their
pairs have not decided (tuner.workflow.confirm.settle), the front gets them for the pairs whose
medians differ but whose five rounds could not tell (five wins of five are needed): the point
written and the default, and configs merged into one point. They are measured once more, and
the front is decided again over all the runs, each pair at the level of its own look
(tuner.metrics.paired.Looks: the two looks of a pair together stay at 5%). Pure logic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tuner.metrics.paired import FIRST_LOOK_ALPHA, Looks
from tuner.metrics.stats import clearly_better
from tuner.search.objectives import P99, PSS, Headline, Slo
from tuner.workflow.confirm import EXTRA_ROUNDS, Confirmed, MoreRounds, not_looked_again
from tuner.workflow.pareto_front import (
    FrontPoint,
    FrontVerdict,
    decide_front,
    material,
    versus_default,
)

# A config merged into a point is worth more rounds when its median is better than the point's
# by more than this share on p99 or PSS: a smaller gap would rarely decide in four more rounds,
# nor change the front much if it did.
MERGE_GAP = 0.05
# At most this many configs are measured again (each costs EXTRA_ROUNDS runs, as long as the
# search's trials): the point written and the default first (what is written turns on them),
# then the written point's merges (one of them may become the pick), then other points'.
MAX_CLOSE_ENTRIES = 4


@dataclass(frozen=True)
class CloseCall:
    """Two configs whose medians differ but whose pairs have not decided, and why they are
    worth more rounds (words for the summary)."""

    entries: tuple[Confirmed, Confirmed]
    why: str


def settle_front(
    confirmed: Sequence[Confirmed],
    slo: Slo,
    *,
    rate_rps: float | None,
    rate_source: str,
    more: MoreRounds,
    defaults: Mapping[str, Any] | None = None,
) -> FrontVerdict | None:
    """`decide_front` at the first look's level; when it leaves close calls (`close_calls`),
    `more(entries)` measures their configs `EXTRA_ROUNDS` more, once, and the front is decided
    again over all the runs, each pair at its own look's level; its summary and the stored
    front say which configs had the rounds and why."""
    first = decide_front(
        confirmed,
        slo,
        rate_rps=rate_rps,
        rate_source=rate_source,
        alpha=FIRST_LOOK_ALPHA,
        defaults=defaults,
    )
    calls = chosen_calls(close_calls(first, slo)) if first else []
    if first is None or not calls:
        return first
    looks = Looks(frozenset(index for entry in confirmed for index in entry.run_rounds()))
    if not more(close_entries(calls)):
        of = "; of ".join(call.why for call in calls)
        return replace(first, verdict=not_looked_again(first.verdict, of))
    again = decide_front(
        confirmed, slo, rate_rps=rate_rps, rate_source=rate_source, alpha=looks, defaults=defaults
    )
    if again is None:
        return None
    said = f"after {EXTRA_ROUNDS} more rounds of " + "; of ".join(call.why for call in calls)
    verdict = replace(again.verdict, summary=f"{again.verdict.summary} ({said})")
    return replace(again, verdict=verdict, front=replace(again.front, extra_rounds=said))


def close_calls(decided: FrontVerdict, slo: Slo) -> list[CloseCall]:
    """The pairs of the first look worth more rounds, the most telling first: the point
    written and the default, when the point's median is better on a figure and neither figure
    decided (it would beat the default but for the rounds); then each config merged into a
    point whose median is better than the point's by more than `MERGE_GAP` on a figure (its
    pairs did not decide, or it would not have been merged), the written point's first, the
    biggest gap first."""
    verdict = decided.verdict
    winner, default = verdict.winner, verdict.default
    calls = []
    if default is not None and winner is not default and default.usable(slo):
        versus = versus_default(winner, default, FIRST_LOOK_ALPHA)
        # Lower is better on both of the front's figures.
        ahead = [v.headline.short for v in versus if v.mine.median < v.default.median]
        if ahead and not any(v.better or v.worse for v in versus):
            why = (
                f"{winner.candidate.label} and the default: its median was the better one on "
                f"{' and '.join(ahead)}, but their pairs had not decided"
            )
            calls.append(CloseCall((winner, default), why))
    points = sorted(decided.points, key=lambda point: point.entry is not winner)
    for point in points:
        # The default merged into the written point is the first call's pair already.
        calls += [c for c in _merge_calls(point) if not any(_same(c, o) for o in calls)]
    return calls


def _same(call: CloseCall, other: CloseCall) -> bool:
    return {id(entry) for entry in call.entries} == {id(entry) for entry in other.entries}


def _merge_calls(point: FrontPoint) -> list[CloseCall]:
    """The configs merged into `point` that are ahead of it by more than `MERGE_GAP` on a
    figure, the biggest gap first."""
    keeper = point.entry
    found = []
    for member in point.merged:
        gap, headline = max(((_gap(member, keeper, h), h) for h in (P99, PSS)), key=_first)
        if gap:
            why = (
                f"{member.candidate.label} and {keeper.candidate.label}, the point it was "
                f"merged into: its median {headline.short} was {gap:.0%} lower, but their pairs "
                "had not decided"
            )
            found.append((gap, CloseCall((member, keeper), why)))
    return [call for _, call in sorted(found, key=lambda item: -item[0])]


def _first(item: tuple[float, Headline]) -> float:
    return item[0]


def _gap(member: Confirmed, keeper: Confirmed, headline: Headline) -> float:
    """How much lower (better: p99 and PSS) `member`'s median is than `keeper`'s, as a share
    of `keeper`'s, when more than `MERGE_GAP` and their pairs have not decided it; else 0 (a
    config merged through another point may be clearly ahead of this one)."""
    mine, theirs = member.spread(headline), keeper.spread(headline)
    if mine is None or theirs is None or not theirs.median > 0:
        return 0.0
    if clearly_better(mine, theirs, higher_is_better=False, alpha=FIRST_LOOK_ALPHA):
        return 0.0
    gap = 1.0 - mine.median / theirs.median
    # A gap the merge would not count even if the pairs decided it is not worth the rounds.
    return gap if gap > max(MERGE_GAP, material(headline)) else 0.0


def chosen_calls(calls: Sequence[CloseCall]) -> list[CloseCall]:
    """The calls in order whose configs fit in `MAX_CLOSE_ENTRIES` together (a config in two
    calls counts once)."""
    chosen: list[CloseCall] = []
    for call in calls:
        if len(close_entries([*chosen, call])) <= MAX_CLOSE_ENTRIES:
            chosen.append(call)
    return chosen


def close_entries(calls: Sequence[CloseCall]) -> list[Confirmed]:
    """The configs of `calls`, each once, in the order they come."""
    entries: list[Confirmed] = []
    for call in calls:
        entries += [entry for entry in call.entries if all(entry is not e for e in entries)]
    return entries
