"""A config as fast as the default within the noise, with a tail clearly lower: written instead.

A throughput objective ranks by req/s alone, so two things hid a far lower p99. The shortlist
re-measures the trials best on req/s, so a trial as fast within one run's noise with a much
lower tail was never measured again; and when nothing beat the default on req/s the default was
written, though among configs the noise cannot separate the cheaper one is preferred (memory,
then p99, then fewer changes: tuner.workflow.equals). TechEmpower's granian WSGI entry runs one
blocking thread where granian's default runs many; on its `/db` test both served the same req/s
and the default's p99 was several times the entry's, as requests queued behind the threads for
the pool's connections.

So the shortlist also takes the lowest-p99 trial among those within one run's noise (the
study's, as its pruner measures it) of the best req/s (`tail_trial`), and a verdict that
writes the default writes instead the config that ties with it on the objective and is lower
on p99 beyond the noise and by `MATERIAL_TAIL`, memory not materially worse, and still so after
more rounds of the two (`lower_tail`). Pure logic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from tuner.metrics.material import MATERIAL_MEMORY, MATERIAL_TAIL
from tuner.metrics.paired import FIRST_LOOK_ALPHA, second_look_alpha
from tuner.metrics.stats import clearly_lower
from tuner.search.objectives import P99, PSS, Figures, Objective, Slo
from tuner.search.pruning import MIN_MARGIN
from tuner.search.records import BASELINE_DEFAULT
from tuner.workflow.confirm import (
    EXTRA_ROUNDS,
    Confirmed,
    MoreRounds,
    Verdict,
    not_looked_again,
    settle,
)
from tuner.workflow.equals import settings_changed, ties_with

T = TypeVar("T")


def wants_tail(objective: Objective) -> bool:
    """Objectives that rank without p99 (throughput): the ones whose pick can hide a tail."""
    return not objective.trade_off and P99 not in objective.headlines


def tail_trial(
    objective: Objective,
    measured: Sequence[T],
    confirmed: Sequence[T],
    figures: Callable[[T], Figures],
    noise: float = MIN_MARGIN,
) -> T | None:
    """Among `measured` (one run each, usable), the lowest-p99 one whose objective figure is
    within one run's `noise` (the study's measured noise, which `pruning` never puts under its
    floor `MIN_MARGIN`) of the best, when its p99 is lower than every `confirmed` one's by
    more than that noise too: worth measuring again beside them."""
    if not wants_tail(objective) or not measured:
        return None
    first = objective.headlines[0]
    best = first.value(figures(objective.rank(measured, figures)[0]))
    if math.isnan(best):  # nothing measured on the objective's figure
        return None

    def close(item: T) -> bool:
        value = first.value(figures(item))
        gap = (best - value) if first.higher_is_better else (value - best)
        return gap <= abs(best) * noise

    near = [item for item in measured if close(item) and not math.isnan(figures(item).p99_ms)]
    if not near:
        return None
    lowest = min(near, key=lambda item: figures(item).p99_ms)
    known = [p99 for item in confirmed if not math.isnan(p99 := figures(item).p99_ms)]
    if known and figures(lowest).p99_ms >= min(known) * (1 - noise):
        return None
    return lowest


def settle_with_tail(
    confirmed: Sequence[Confirmed],
    objective: Objective,
    slo: Slo,
    defaults: Mapping[str, Any],
    more: MoreRounds,
) -> Verdict | None:
    """The verdict of one set of interleaved rounds, as `tune` and each `--for-cpus` size
    decide it: `settle` (its close calls measured again), then the lower tail among equals."""
    verdict = settle(confirmed, objective, slo, defaults, more)
    return lower_tail(verdict, confirmed, objective, slo, defaults, more)


def lower_tail(
    verdict: Verdict | None,
    confirmed: Sequence[Confirmed],
    objective: Objective,
    slo: Slo,
    defaults: Mapping[str, Any],
    more: MoreRounds,
) -> Verdict | None:
    """`verdict`, or, when it writes the default, the config that ties with the default on the
    objective's figures (their pairs undecided) and beats it on p99 beyond the noise and by
    `MATERIAL_TAIL`, its PSS not materially higher (the lowest p99 median of such configs).

    Several configs stand beside the default, and one of them wins its five p99 pairs by luck
    more often than one config does; so such a config is written only after `more` measured it
    and the default `EXTRA_ROUNDS` more, and the lower tail held over all their rounds at the
    second look's level (tuner.metrics.paired)."""
    if verdict is None or verdict.default is None or verdict.winner is not verdict.default:
        return verdict
    default = verdict.default
    if not wants_tail(objective) or default.spread(P99) is None:
        return verdict
    first = _lowest_tail(default, confirmed, objective, slo, defaults, FIRST_LOOK_ALPHA)
    if first is None:
        return verdict
    label = first.candidate.label
    first_look = min(len(default.runs), len(first.runs))
    if not more([default, first]):
        return not_looked_again(verdict, f"{label} and the default, for its lower p99")
    held = _lowest_tail(default, [first], objective, slo, defaults, second_look_alpha(first_look))
    rounds = f"after {EXTRA_ROUNDS} more rounds of {label} and the default"
    if held is None:
        return replace(
            verdict,
            summary=f"{verdict.summary} ({rounds}: {label}'s lower p99 did not hold beyond the "
            "noise, so the default stays)",
        )
    mine, theirs = held.spread(P99), default.spread(P99)
    assert mine is not None and theirs is not None
    figures = "/".join(h.short for h in objective.headlines)
    summary = (
        f"{label} is written instead of the default: it ties with the default on {figures} "
        f"and its p99 is lower beyond the noise ({mine.median:,.1f} vs {theirs.median:,.1f} ms, "
        f"x{mine.median / theirs.median:.2f}, {rounds}); among configs the noise cannot "
        f"separate, the lower tail. On {figures}: {verdict.summary}"
    )
    return replace(verdict, winner=held, summary=summary, tied_with=(BASELINE_DEFAULT,))


def _lowest_tail(
    default: Confirmed,
    entries: Sequence[Confirmed],
    objective: Objective,
    slo: Slo,
    defaults: Mapping[str, Any],
    alpha: float,
) -> Confirmed | None:
    """Of `entries`, the configs that tie with `default` on the objective and are lower on p99
    beyond the noise (at `alpha`) and materially, memory not materially more: the lowest p99
    median (then the fewest changes); None when there is none."""
    lower = [
        entry
        for entry in entries
        if entry.candidate.label != BASELINE_DEFAULT
        and entry.usable(slo)
        and ties_with(default, entry, objective, alpha)
        and _lower_tail(entry, default, alpha)
        and not _costs_memory(entry, default)
    ]
    if not lower:
        return None
    return min(
        lower,
        key=lambda e: (e.median(P99), settings_changed(e.candidate.settings, defaults)),
    )


def _lower_tail(entry: Confirmed, default: Confirmed, alpha: float) -> bool:
    mine, theirs = entry.spread(P99), default.spread(P99)
    if mine is None or theirs is None:
        return False
    return clearly_lower(mine, theirs, by=MATERIAL_TAIL, alpha=alpha)


def _costs_memory(entry: Confirmed, default: Confirmed) -> bool:
    """True when `entry` holds materially more memory than the default, beyond the noise."""
    mine, theirs = entry.spread(PSS), default.spread(PSS)
    if mine is None or theirs is None:
        return False
    return clearly_lower(theirs, mine, by=MATERIAL_MEMORY)
