"""The latency-memory front, confirmed: its points re-measured, the ones the noise cannot
separate merged, and the point to write picked by what the user asked for.

A `multi` study keeps a Pareto front of single trials, and one trial is one noisy sample: a
point can be on the front by luck. Its points are re-measured with the baselines in the
interleaved rounds the single pick's candidates get (tuner.workflow.confirm); then a point
that is neither clearly faster (p99) nor clearly cheaper (PSS) than another is no point of its
own, and joins the cheapest such one (`merge_front`), which is written as the config with the
fewest settings changed from the server's default among those the noise cannot separate from
it either way. What is shown, stored and written is the confirmed front with each point's
ranges (`ConfirmedFront`). Pure logic (a header's date aside).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from tuner.errors import ConfigError
from tuner.metrics.material import MATERIAL_MEMORY, MATERIAL_TAIL
from tuner.metrics.paired import ALPHA, Level
from tuner.metrics.stats import Spread, clearly_lower, pair_alpha
from tuner.search.objectives import (
    MULTI,
    P99,
    PSS,
    Headline,
    Slo,
    Versus,
    pick_pareto_point,
    pick_rule,
)
from tuner.search.records import BASELINE_DEFAULT, BASELINE_RULE
from tuner.search.storage_url import DEFAULT_STORAGE, redact
from tuner.workflow.confirm import Confirmed, ConfirmedSummary, Verdict
from tuner.workflow.equals import settings_changed


@dataclass
class FrontPoint:
    """One point of the confirmed front: the config it is written as, and the configs merged
    into it (the noise could not tell them from it, or it was as fast for less memory)."""

    entry: Confirmed
    merged: list[Confirmed] = field(default_factory=list)


def material(headline: Headline) -> float:
    """The least share of the reference a front's figure must gain by to count."""
    return MATERIAL_MEMORY if headline is PSS else MATERIAL_TAIL


def covers(keeper: Confirmed, other: Confirmed, alpha: Level = ALPHA) -> bool:
    """True when `other` gives nothing `keeper` does not: it is neither clearly faster (p99, by
    at least MATERIAL_TAIL) nor clearly cheaper (PSS, by at least MATERIAL_MEMORY) than
    `keeper`, beyond the noise of their paired rounds. Open loop below capacity, a wait-bound
    app's p99 is its wait, steady to a fraction of a percent from round to round, so the pairs
    separate tails no one would pay memory for (51.39 against 51.52 ms)."""
    for headline in (P99, PSS):
        mine, theirs = other.spread(headline), keeper.spread(headline)
        if mine is None:
            continue
        if theirs is None:
            return False
        if clearly_lower(mine, theirs, by=material(headline), alpha=alpha):
            return False
    return True


def merge_front(
    entries: Sequence[Confirmed],
    alpha: Level = ALPHA,
    defaults: Mapping[str, Any] | None = None,
) -> list[FrontPoint]:
    """The confirmed front of `entries` (each measured in the same rounds), cheapest first.

    Walked from the least memory up (medians; ties: the lower p99), a config that a point
    already kept covers (`covers`) joins the cheapest such point: when they cover each other
    the noise cannot separate them; when only the point covers it, it is dominated beyond the
    noise. Then a kept point that a later one covers, without covering it back (as cheap
    within the noise and clearly faster), joins that one. What remains are points each
    clearly faster or clearly cheaper than every other; each is written as the config with
    the fewest changes from the server's `defaults` among those it cannot be told from
    (`_fewest_changes_stand`)."""
    order = sorted(entries, key=lambda e: (e.median(PSS), e.median(P99)))
    kept: list[FrontPoint] = []
    for entry in order:
        home = next((point for point in kept if covers(point.entry, entry, alpha)), None)
        if home is None:
            kept.append(FrontPoint(entry))
        else:
            home.merged.append(entry)
    changed = True
    while changed:
        changed = False
        for point in kept:
            over = next(
                (
                    other
                    for other in kept
                    if other is not point
                    and covers(other.entry, point.entry, alpha)
                    and not covers(point.entry, other.entry, alpha)
                ),
                None,
            )
            if over is not None:
                over.merged += [point.entry, *point.merged]
                kept.remove(point)
                changed = True
                break
    for point in kept:
        others = [other.entry for other in kept if other is not point]
        _fewest_changes_stand(point, others, alpha, defaults)
    return kept


def _fewest_changes_stand(
    point: FrontPoint,
    others: Sequence[Confirmed],
    alpha: Level,
    defaults: Mapping[str, Any] | None,
) -> None:
    """Of the point and the configs merged into it that the noise cannot separate from it
    either way, the one with the fewest settings changed from `defaults` stands for them (the
    default itself first): equal within the noise, a change buys nothing, and a cheapest
    median among equals is luck; written, it would change settings for nothing. A search
    moves settings that do nothing (granian's `workers_lifetime`, its runtime mode), and the
    point's lean variant, measured beside it, is then the one written. Without `defaults`,
    only the default is preferred. Ties keep the cheapest median.

    "Cannot be told from" is not transitive: a config equal to the point within the noise
    can be equal to another point too, or lose to it beyond the noise. So a config stands
    only where it stays apart from every other point of the front (`others`), as the point
    itself is: neither covers the other."""

    def changes(entry: Confirmed) -> float:
        if entry.candidate.label == BASELINE_DEFAULT:
            return 0
        if defaults is None:
            return math.inf
        return settings_changed(entry.candidate.settings, defaults)

    def apart(entry: Confirmed) -> bool:
        return not any(
            covers(other, entry, alpha) or covers(entry, other, alpha) for other in others
        )

    equals = [
        entry
        for entry in point.merged
        if covers(entry, point.entry, alpha) and covers(point.entry, entry, alpha) and apart(entry)
    ]
    standing = min([point.entry, *equals], key=changes)
    if standing is point.entry:
        return
    point.merged.remove(standing)
    point.merged.insert(0, point.entry)
    point.entry = standing


@dataclass(frozen=True)
class StoredPoint:
    """A point of the confirmed front as kept with the study: its config and ranges, the
    configs merged into it, and whether it is the knee or the pick."""

    summary: ConfirmedSummary
    merged: tuple[str, ...] = ()
    picked: bool = False

    def to_json(self) -> dict[str, Any]:
        return {**self.summary.to_json(), "merged": list(self.merged), "picked": self.picked}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StoredPoint:
        return cls(
            ConfirmedSummary.from_json(data),
            tuple(str(label) for label in data.get("merged") or ()),
            bool(data.get("picked")),
        )


@dataclass(frozen=True)
class ConfirmedFront:
    """The confirmed front at one offered rate, cheapest first, and the rule that picked the
    point written (`pick_rule`)."""

    rate_rps: float | None
    rate_source: str
    rule: str
    points: tuple[StoredPoint, ...]
    # Which configs had more rounds before the front was decided again, and why ("after 4
    # more rounds of trial 7 and the default: ..."; tuner.workflow.front_close); "" when none.
    extra_rounds: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "rate_rps": self.rate_rps,
            "rate_source": self.rate_source,
            "rule": self.rule,
            "points": [point.to_json() for point in self.points],
            "extra_rounds": self.extra_rounds,
        }

    @classmethod
    def from_json(cls, data: object) -> ConfirmedFront | None:
        """The front kept in a study's result; None when it has none."""
        if not isinstance(data, Mapping) or not data.get("points"):
            return None
        rate = data.get("rate_rps")
        return cls(
            None if rate is None else float(rate),
            str(data.get("rate_source") or ""),
            str(data.get("rule") or ""),
            tuple(StoredPoint.from_json(point) for point in data["points"]),
            str(data.get("extra_rounds") or ""),
        )

    def decided_again(self) -> str:
        """ "the front was decided again after 4 more rounds of ..."; "" when it was not."""
        return f"the front was decided again {self.extra_rounds}" if self.extra_rounds else ""

    def lines(self) -> list[str]:
        """One line per point: its config's label, p99 and PSS ranges, what merged into it."""
        out = []
        for number, point in enumerate(self.points, start=1):
            out.append(f"{number}. {point_text(point, self.rate_rps)}")
        return out

    def heading(self) -> str:
        """ "at 500 req/s offered (--rate); written: the knee of the front"."""
        at = f"at {self.rate_rps:g} req/s offered ({self.rate_source})" if self.rate_rps else ""
        return f"{at or 'closed loop'}; written: {self.rule}"

    def listing(self, study: str, storage_url: str) -> list[str]:
        """The heading, then each point with the `tuner emit` command that writes it."""
        out = [f"confirmed front {self.heading()}"]
        if self.extra_rounds:
            out.append(f"({self.extra_rounds})")
        for number, line in enumerate(self.lines(), start=1):
            out += [line, f"   {emit_command(study, number, storage_url)}"]
        return out

    def point_header(self, number: int, study: str, setup: Mapping[str, Any]) -> list[str]:
        """The header of a file written from point `number` (`tuner emit --point`)."""
        point = self.points[number - 1]
        summary = point.summary
        when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        lines = [
            f"Written by tuner emit on {when}",
            f"study {study!r}, point {number} of {len(self.points)} of its confirmed "
            f"latency-memory front ({summary.label}), {self.heading().split('; written')[0]}",
            f"app {setup.get('app', '?')}; server {setup.get('server', '?')} pinned to "
            f"{len(setup.get('server_cpus', []))} CPU(s); machine {setup.get('cpu_model', '?')}",
            f"re-measured in {summary.runs} interleaved rounds with the default: p99 "
            f"{_range(summary.p99_ms, 'ms')}, PSS {_range(summary.pss_mb, 'MB')}",
        ]
        if point.merged:
            lines.append(
                "the noise could not separate it from (merged into it: the cheapest, or of equals "
                "the fewest changes from the default): " + ", ".join(point.merged)
            )
        if point.picked:
            lines.append(f"`tuner tune` wrote this point: {self.rule}")
        if again := self.decided_again():
            lines.append(again)
        return lines

    def settings_of(self, number: int) -> dict[str, Any]:
        """Point `number`'s settings (1-based; ConfigError naming the points otherwise)."""
        if not 1 <= number <= len(self.points):
            raise ConfigError(
                f"--point {number}: the confirmed front has points 1-{len(self.points)}"
            )
        return dict(self.points[number - 1].summary.settings)


def point_text(point: StoredPoint, rate_rps: float | None) -> str:
    """ "trial 7: p99 3.1-3.4 ms, PSS 80.2-80.9 MB at 500 req/s (merged: trial 9)"."""
    summary = point.summary
    at = f" at {rate_rps:g} req/s" if rate_rps else ""
    merged = f" (merged: {', '.join(point.merged)})" if point.merged else ""
    mark = " [written]" if point.picked else ""
    return (
        f"{summary.label}{mark}: p99 {_range(summary.p99_ms, 'ms')}, PSS "
        f"{_range(summary.pss_mb, 'MB')}{at}{merged}"
    )


def _range(spread: Spread | None, unit: str) -> str:
    if spread is None:
        return "not measured"
    return f"{spread.low:,.1f}-{spread.high:,.1f} {unit}"


def emit_command(study: str, point: int, storage_url: str, out: str = "FILE") -> str:
    """The `tuner emit` command that writes point `point` (1-based) of a study's front."""
    words = ["tuner", "emit", "--study", study, "--point", str(point), "--out", out]
    if storage_url != DEFAULT_STORAGE:
        words += ["--storage", redact(storage_url)]
    return shlex.join(words)


@dataclass(frozen=True)
class FrontVerdict:
    """The confirmed front and the verdict on the point it writes; `points`, the front's
    configs and what merged into each, as `front` lists them."""

    front: ConfirmedFront
    verdict: Verdict
    points: tuple[FrontPoint, ...] = ()


def decide_front(
    confirmed: Sequence[Confirmed],
    slo: Slo,
    *,
    rate_rps: float | None,
    rate_source: str,
    alpha: Level = ALPHA,
    defaults: Mapping[str, Any] | None = None,
) -> FrontVerdict | None:
    """The confirmed front of the usable configs (the rate carried, within the SLOs, fair in
    most runs), and the point written, by `pick_pareto_point`; None when no config is usable.
    The verdict says how the pick compares with the default on both figures and why it was
    picked; `beats_default` when it is better on one beyond the noise and worse on neither.
    Pairs are judged at `alpha`, or at the level of their own look (`Looks`); `defaults` (the
    server's resolved defaults) let a point be written with the fewest changes among equals."""
    usable = [entry for entry in confirmed if entry.usable(slo)]
    if not usable:
        return None
    points = merge_front(usable, alpha, defaults)
    chosen = pick_pareto_point([point.entry for point in points], slo, alpha=alpha)
    winner = points[chosen].entry
    by_label = {entry.candidate.label: entry for entry in confirmed}
    default, rule = by_label.get(BASELINE_DEFAULT), by_label.get(BASELINE_RULE)
    how = pick_rule(slo)
    stored = tuple(
        StoredPoint(
            point.entry.summary(),
            tuple(entry.candidate.label for entry in point.merged),
            index == chosen,
        )
        for index, point in enumerate(points)
    )
    front = ConfirmedFront(rate_rps, rate_source, how, stored)
    size = f"{len(points)} point{'s' if len(points) != 1 else ''}"
    at = f" at {rate_rps:g} req/s offered" if rate_rps else ""
    label = winner.candidate.label
    head = f"{label} is {how} (confirmed front of {size}{at})"
    kept = tuple(points)
    if winner is default:
        verdict = Verdict(winner, default, rule, False, head + "; the default")
        return FrontVerdict(front, verdict, kept)
    if default is None or not default.usable(slo):
        said = "the default could not be used" if default is None or not default.runs else ""
        said = said or "the default breaks the SLOs"
        return FrontVerdict(front, Verdict(winner, default, rule, True, f"{head}; {said}"), kept)
    versus = versus_default(winner, default, alpha)
    beats = any(v.better for v in versus) and not any(v.worse for v in versus)
    figures = ", ".join(
        f"{v.headline.short} {v.change} "
        f"({'better' if v.better else 'worse' if v.worse else 'within noise'})"
        for v in versus
    )
    summary = f"{head}; vs the default: {figures}"
    return FrontVerdict(front, Verdict(winner, default, rule, beats, summary), kept)


def versus_default(entry: Confirmed, default: Confirmed, alpha: Level = ALPHA) -> list[Versus]:
    """`entry`'s p99 and PSS against the default's (those both measured), each judged at the
    level of their pairs."""
    return [
        Versus(headline, mine, theirs, alpha=pair_alpha(alpha, mine, theirs))
        for headline in MULTI.headlines
        if (mine := entry.spread(headline)) is not None
        and (theirs := default.spread(headline)) is not None
    ]
