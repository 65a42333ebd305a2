"""What a study optimises: the objective (direction, ranking, pick, wording) and the SLOs.

Three objectives, one type (`Objective`, from `objective_named(name)`): `throughput`
(max req/s), `latency` (min p99 at a fixed offered load) and `multi` (the Pareto front of p99
at a fixed offered rate against PSS memory, both minimised, with carrying the rate as a
constraint; `pick_pareto_point` chooses the point that is written, by the measured noise).
Everything that ranks configs asks the objective, so "best" means one thing everywhere.
Constraints follow Optuna's convention (<= 0 is satisfied); the error rate and fairness are
always among them. What each objective means for a user: docs/pages/commands/tune.md,
"Objectives and SLOs".
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from tuner.errors import ConfigError, InvalidMeasurement
from tuner.metrics.measurement import Measurement
from tuner.metrics.paired import ALPHA, Level, Pairs
from tuner.metrics.stats import Spread, clearly_better, pairs, ratio

# Optuna's names for the two ways a study's figure can go.
Direction = Literal["minimize", "maximize"]

# At a fixed offered rate, a config whose achieved rate (the median of its one-second windows)
# falls short of it by more than this share cannot carry the rate. An open-loop run that keeps
# up completes the schedule's requests within a few percent per window (a window's edge splits
# a batch); a config that cannot keep up falls short by its missing capacity, far beyond that.
RATE_TOLERANCE = 0.05
# The front's points re-measured after a `multi` study, at most (`--top-k` when larger): spread
# along the front from the cheapest to the fastest, so the confirmation costs about what a
# single pick's does and still shows the whole trade-off.
FRONT_POINTS = 6

T = TypeVar("T")


@dataclass(frozen=True)
class Slo:
    """Limits a config must meet to count: p99 latency, error rate, mean PSS memory; and with
    streams or a probe beside the load, no stream cut and no restart by the orchestrator."""

    p99_ms: float | None = None
    max_error_rate: float = 0.01
    max_memory_mb: float | None = None
    streams: bool = False  # the study holds streams: a cut stream breaks the SLO
    probe: bool = False  # the study probes: a restart the probes would cause breaks it
    # The offered rate is a constraint (`multi`): a config that falls short of it by more
    # than RATE_TOLERANCE cannot carry it, and breaks the SLO.
    carry_rate: bool = False


@dataclass(frozen=True)
class Figures:
    """What objectives and SLOs judge of one config: one measurement, or the medians of a
    config's confirmation runs. A figure that was not measured is nan (worst everywhere)."""

    rps: float  # median of the one-second windows
    p99_ms: float
    pss_mb: float  # mean PSS of the server tree
    error_rate: float
    unfairness: float = 0.0  # 0 fair, up to 1 (see Measurement.unfairness)
    streams_cut: float = 0.0  # the share of the streams that ended cut (0: none, or no streams)
    # How far the probes came to a restart: failed in a row, less the threshold, plus one, as
    # a share of the threshold (> 0: the orchestrator would restart the server; -1: no probe).
    probe_excess: float = -1.0
    offered_rps: float | None = None  # the open loop's rate; None: a closed loop

    @classmethod
    def of(cls, measurement: Measurement) -> Figures:
        streams_cut, probe_excess = lane_figures(measurement)
        return cls(
            measurement.median_rps,
            measurement.latency.p99_ms,
            measurement.pss_mean_mb,
            measurement.error_rate,
            measurement.unfairness,
            streams_cut,
            probe_excess,
            measurement.target_rps,
        )

    @property
    def shortfall(self) -> float:
        """How far the achieved rate fell below the offered one, as a share of it: 0 when it
        kept up (or in a closed loop, which offers no rate), 1 when not measured."""
        if not self.offered_rps:
            return 0.0
        if math.isnan(self.rps):
            return 1.0
        return max(0.0, 1.0 - self.rps / self.offered_rps)


def lane_figures(measurement: Measurement) -> tuple[float, float]:
    """(streams_cut, probe_excess) of one measurement, as `Figures` holds them."""
    streams, probe = measurement.streams, measurement.probe
    cut = streams.cut_share if streams is not None else 0.0
    excess = -1.0
    if probe is not None:
        excess = (probe.longest_failed_run - probe.failures + 1) / probe.failures
    return cut, excess


class WindowLike(Protocol):
    """A one-second window of a running measurement (tuner.loadgen.WindowStats)."""

    @property
    def rps(self) -> float: ...
    @property
    def p99_ms(self) -> float: ...


@dataclass(frozen=True)
class Headline:
    """A figure an objective is about, with its direction and how a reader names it."""

    name: str  # "throughput", "p99", "PSS"
    short: str  # "req/s", "p99", "PSS": in ratios like "req/s x1.20"
    unit: str
    higher_is_better: bool
    value: Callable[[Figures], float]
    # The same figure of a running one-second window, for the pruner (None: not seen live).
    window: Callable[[WindowLike], float] | None = None

    def sort_value(self, figures: Figures) -> float:
        """Smaller is better; an unmeasured figure sorts last."""
        value = self.value(figures)
        if math.isnan(value):
            return math.inf
        return -value if self.higher_is_better else value


RPS = Headline("throughput", "req/s", "req/s", True, lambda f: f.rps, lambda w: w.rps)
P99 = Headline("p99", "p99", "ms", False, lambda f: f.p99_ms, lambda w: w.p99_ms)
PSS = Headline("PSS", "PSS", "MB", False, lambda f: f.pss_mb)


@dataclass(frozen=True)
class Versus:
    """One headline figure of a config against the same figure of the server's default."""

    headline: Headline
    mine: Spread
    default: Spread
    # The figure is a floor (req/s measured client_bound: the load generator's limit, the
    # server's is at least it), mine or the default's.
    mine_floor: bool = False
    default_floor: bool = False
    # The level "better" is decided at (tuner.metrics.paired: a second look gets less).
    alpha: float = ALPHA
    # req/s where both servers were CPU-bound in every run on as many CPUs: mine and the
    # default's requests per CPU-second, which the pairs judge instead (tuner.metrics.received).
    per_cpu: tuple[Spread, Spread] | None = None

    @property
    def judged(self) -> tuple[Spread, Spread]:
        """The figures the pairs judge: requests per CPU-second where set, else the headline's."""
        return self.per_cpu or (self.mine, self.default)

    @property
    def better(self) -> bool:
        """Better beyond the noise, as far as the figures show: a floor of the default's may
        hide a figure as good as mine, so it is never beaten; a floor of mine above it is."""
        if self.default_floor:
            return False
        mine, default = self.judged
        return clearly_better(
            mine, default, higher_is_better=self.headline.higher_is_better, alpha=self.alpha
        )

    @property
    def worse(self) -> bool:
        if self.mine_floor:
            return False
        mine, default = self.judged
        return clearly_better(
            default, mine, higher_is_better=self.headline.higher_is_better, alpha=self.alpha
        )

    @property
    def pairs(self) -> Pairs | None:
        """Mine against the default's, round by round, on the figure judged; None when they
        were not paired."""
        mine, default = self.judged
        paired = pairs(mine, default, higher_is_better=self.headline.higher_is_better)
        return paired if paired is not None and paired.count else None

    @property
    def judged_text(self) -> str:
        """What the pairs judged, when not the headline: "judged per CPU-second received
        (both CPU-bound in every run), x1.32 on medians; "."""
        if self.per_cpu is None:
            return ""
        mine, default = self.per_cpu
        return (
            f"judged per CPU-second received (both CPU-bound in every run, so CPU time "
            f"lost to steal or other processes is not counted against either), "
            f"x{ratio(mine.median, default.median):.2f} on medians; "
        )

    @property
    def change(self) -> str:
        """The ratio to the default: "x1.20", "at least x1.20" (mine a floor), "at most x1.20"
        (the default's a floor), "no ratio (both floors)"."""
        if self.mine_floor and self.default_floor:
            return "no ratio (both floors)"
        times = f"x{ratio(self.mine.median, self.default.median):.2f}"
        if self.mine_floor == self.default_floor:
            return times
        # A floor of a higher-is-better figure: the true ratio is at least (mine) or at most
        # (the default's) the measured one.
        return ("at least " if self.mine_floor else "at most ") + times


class Objective(ABC):
    """What "best" means for a study: its figures and their directions (Optuna's study
    directions), how configs rank, which one is recommended, whether a running trial can be
    pruned, and how the verdict reads. Subclasses: one figure, or a Pareto trade-off."""

    name: str
    headlines: tuple[Headline, ...]
    default_wins: str  # the verdict when the server's default config is the pick
    # True when the study keeps a Pareto front (several figures at once).
    trade_off: bool = False
    # A winner with a much worse tail than the default gets a warning (not for the trade-off
    # objective, whose pick already weighs p99).
    warns_of_tail: bool = True

    @property
    def directions(self) -> list[Direction]:
        """Optuna study directions, in the order of `values`."""
        return ["maximize" if h.higher_is_better else "minimize" for h in self.headlines]

    def values(self, figures: Figures) -> list[float]:
        """The trial's objective values; InvalidMeasurement if one was not measured."""
        out = []
        for headline in self.headlines:
            value = headline.value(figures)
            if math.isnan(value):
                raise InvalidMeasurement(f"{headline.name} was not measured")
            out.append(value)
        return out

    @property
    def order_text(self) -> str:
        """How `rank` orders, for a table title."""
        first = self.headlines[0]
        return f"{'highest' if first.higher_is_better else 'lowest'} {first.short}"

    def window_value(self, window: WindowLike) -> float | None:
        """The running figure the pruner compares each second; None: cannot be pruned."""
        return None

    def rank(self, items: Iterable[T], figures: Callable[[T], Figures]) -> list[T]:
        """Best first, by the first headline (ties keep their order)."""
        first = self.headlines[0]
        return sorted(items, key=lambda item: first.sort_value(figures(item)))

    def pick(self, items: Sequence[T], figures: Callable[[T], Figures], slo: Slo) -> T:
        """The one config to recommend among `items` (all usable)."""
        return self.rank(items, figures)[0]

    def shortlist(
        self, items: Sequence[T], figures: Callable[[T], Figures], on_front: Callable[[T], bool]
    ) -> list[T]:
        """The configs worth re-measuring, best first."""
        return self.rank(items, figures)

    def confirm_count(self, top_k: int) -> int:
        """How many configs of the shortlist are re-measured (`--top-k`)."""
        return top_k

    @abstractmethod
    def summary(self, label: str, versus: Sequence[Versus], beats: bool) -> str:
        """The verdict of `label` against the default (`versus`: one entry per headline that
        both have), in words; `beats` says whether it is better beyond the noise."""


class SingleObjective(Objective):
    """One figure: the best config is the one with the best value of it."""

    default_wins = "the server's default config measured best; keep it"

    def __init__(self, name: str, headline: Headline) -> None:
        self.name = name
        self.headlines = (headline,)

    def summary(self, label: str, versus: Sequence[Versus], beats: bool) -> str:
        (figure,) = versus
        h, change = figure.headline, figure.change
        ranges = versus_ranges(label, figure)
        paired = figure.pairs
        if beats:
            evidence = figure.judged_text + (paired.text(figure.alpha) if paired else ranges)
            if figure.per_cpu and paired:  # req/s is shown beside the figure judged
                evidence += f"; {ranges}"
            return f"{label} beats the default beyond the noise ({h.name} {change}; {evidence})"
        why = (
            f"{figure.judged_text}{paired.text(figure.alpha)}; {ranges}"
            if paired
            else f"the ranges overlap ({ranges})"
        )
        return (
            f"{label} has the best median ({h.name} {change} the default's) but "
            f"is not measurably better than the default: {why}; expect about the default's "
            "figures"
        )

    def window_value(self, window: WindowLike) -> float | None:
        live = self.headlines[0].window
        return None if live is None else live(window)


class ParetoObjective(Objective):
    """Two figures at once, p99 at the offered rate and PSS memory: Optuna keeps the front,
    the confirmation re-measures it (tuner.workflow.pareto_front), `pick_pareto_point` picks
    the point that is written."""

    trade_off = True
    warns_of_tail = False
    default_wins = "the server's default config is the pick"

    def __init__(self, name: str, headlines: tuple[Headline, ...]) -> None:
        self.name = name
        self.headlines = headlines

    def pick(self, items: Sequence[T], figures: Callable[[T], Figures], slo: Slo) -> T:
        """The pick rule over one measurement each (no noise to weigh: any difference counts)."""
        return items[pick_pareto_point([Once(figures(item)) for item in items], slo)]

    def shortlist(
        self, items: Sequence[T], figures: Callable[[T], Figures], on_front: Callable[[T], bool]
    ) -> list[T]:
        """The front only: `FRONT_POINTS` of it spread from the cheapest to the fastest, then
        the rest of it (taking the place of a point that turns out to be a baseline)."""
        front = sorted(
            (item for item in items if on_front(item)),
            key=lambda item: (PSS.sort_value(figures(item)), P99.sort_value(figures(item))),
        )
        chosen = spread_along(front, FRONT_POINTS)
        return chosen + [item for item in front if item not in chosen]

    def confirm_count(self, top_k: int) -> int:
        return max(top_k, FRONT_POINTS)

    def summary(self, label: str, versus: Sequence[Versus], beats: bool) -> str:
        figures = []
        for figure in versus:
            verdict = "better" if figure.better else "worse" if figure.worse else "within noise"
            figures.append(f"{figure.headline.short} {figure.change} ({verdict})")
        return f"{label} is the pick of the front; vs the default: {', '.join(figures)}"


def spread_along(front: Sequence[T], count: int) -> list[T]:
    """`count` items of `front` (in its order) evenly spaced from its first to its last."""
    if len(front) <= count:
        return list(front)
    if count == 1:
        return [front[0]]
    indexes = sorted({round(i * (len(front) - 1) / (count - 1)) for i in range(count)})
    return [front[i] for i in indexes]


def versus_ranges(label: str, figure: Versus) -> str:
    """ "LABEL 1.0-2.0 req/s vs default 1.0-2.0 req/s over 3 interleaved rounds", a floor's
    range marked (">= ", as `compare` marks it)."""
    unit, mine, theirs = figure.headline.unit, figure.mine, figure.default

    def span(spread: Spread, floor: bool) -> str:
        return f"{'>= ' if floor else ''}{spread.low:,.1f}-{spread.high:,.1f} {unit}"

    return (
        f"{label} {span(mine, figure.mine_floor)} vs default "
        f"{span(theirs, figure.default_floor)} over {len(mine.samples)} interleaved rounds"
    )


THROUGHPUT = SingleObjective("throughput", RPS)
LATENCY = SingleObjective("latency", P99)
MULTI = ParetoObjective("multi", (P99, PSS))
_ALL = (THROUGHPUT, LATENCY, MULTI)
OBJECTIVES = tuple(o.name for o in _ALL)


def objective_named(name: str) -> Objective:
    for objective in _ALL:
        if objective.name == name:
            return objective
    raise ConfigError(f"unknown objective {name!r}; valid objectives: " + ", ".join(OBJECTIVES))


def constraints(slo: Slo, figures: Figures) -> list[float]:
    """Optuna-style constraint values (<= 0 is satisfied), always the same length for a Slo:
    [error_rate - max_error_rate, unfairness] + [p99 - p99_ms if set] + [pss - max_memory_mb
    if set] + the lanes' + [shortfall - RATE_TOLERANCE if the rate must be carried]. A limited
    figure that was not measured counts as violated (+inf)."""
    return list(named_constraints(slo, figures).values())


def named_constraints(slo: Slo, figures: Figures) -> dict[str, float]:
    """The same values as `constraints`, by name (for Optuna's `Trial.set_constraint`)."""
    out = {
        "error_rate": _excess(figures.error_rate, slo.max_error_rate),
        "fair": figures.unfairness,
    }
    if slo.p99_ms is not None:
        out["p99_ms"] = _excess(figures.p99_ms, slo.p99_ms)
    if slo.max_memory_mb is not None:
        out["pss_mb"] = _excess(figures.pss_mb, slo.max_memory_mb)
    if slo.streams:
        out["streams_cut"] = figures.streams_cut
    if slo.probe:
        out["probe"] = figures.probe_excess
    if slo.carry_rate:
        out["rate"] = figures.shortfall - RATE_TOLERANCE
    return out


def _excess(value: float, limit: float) -> float:
    return math.inf if math.isnan(value) else value - limit


def satisfied(values: Iterable[float]) -> bool:
    """Optuna's rule: every constraint value <= 0."""
    return all(value <= 0 for value in values)


def feasible(slo: Slo, figures: Figures) -> bool:
    return satisfied(constraints(slo, figures))


def infeasible_reason(slo: Slo, measurement: Measurement) -> str:
    """Why a measured trial cannot win, as one line ("" when it can): unfair first (its
    figures describe only the clients the server chose to serve), then the SLOs it breaks."""
    # The server's own log lines about falling behind often say why (waitress: every thread
    # busy), so they follow the reason.
    said = "".join(f"; server log: {line}" for line in measurement.server_log)
    if measurement.unfair:
        return "unfair: " + "; ".join(measurement.unfair_reasons) + said
    # The lanes' own lines say more than their figures: the causes, the probes' latency.
    streams, probe = measurement.streams, measurement.probe
    violations = slo_violations(
        slo,
        Figures.of(measurement),
        measurement.errors.detail(),
        streams_seen=streams.describe().removeprefix("streams: ") if streams else "",
        probe_seen=probe.restart_text() if probe else "",
    )
    return f"violates SLO: {violations}{said}" if violations else ""


def slo_violations(
    slo: Slo,
    figures: Figures,
    error_detail: str = "",
    *,
    streams_seen: str = "",
    probe_seen: str = "",
) -> str:
    """The SLOs a measurement breaks, as one line a user reads ("" when none); the lanes'
    breaches say what the run saw where it is given (`streams_seen`, `probe_seen`)."""
    parts = []
    errors = figures.error_rate
    if math.isnan(errors):
        parts.append("error rate not measured")
    elif errors > slo.max_error_rate:
        parts.append(
            f"{errors:.1%} of requests failed ({error_detail or 'no detail'}) > --max-error-rate "
            f"{slo.max_error_rate:g}"
        )
    p99 = figures.p99_ms
    if slo.p99_ms is not None and not p99 <= slo.p99_ms:  # nan: not measured, also a breach
        parts.append(f"p99 {_figure(p99)} ms > --slo-p99 {slo.p99_ms:g}")
    pss, limit = figures.pss_mb, slo.max_memory_mb
    if limit is not None and not pss <= limit:
        parts.append(f"memory (PSS) {_figure(pss)} MB > --max-memory {limit:g}")
    if slo.streams and figures.streams_cut > 0:
        seen = f" ({streams_seen})" if streams_seen else ""
        parts.append(f"{figures.streams_cut:.0%} of the streams cut{seen}")
    if slo.probe and figures.probe_excess > 0:
        parts.append(probe_seen or "the orchestrator would restart the server (health probe)")
    if slo.carry_rate and figures.offered_rps and figures.shortfall > RATE_TOLERANCE:
        parts.append(
            f"carried {_figure(figures.rps)} req/s of the {figures.offered_rps:g} offered "
            f"({figures.shortfall:.0%} short, more than {RATE_TOLERANCE:.0%}): it cannot carry "
            "the rate"
        )
    return "; ".join(parts)


def _figure(value: float) -> str:
    return "not measured" if math.isnan(value) else f"{value:.1f}"


class Remeasured(Protocol):
    """A config with the spread of each figure over its runs (`Confirmed` is one)."""

    def spread(self, headline: Headline) -> Spread | None: ...


@dataclass(frozen=True)
class Once:
    """One measurement's figures as a spread of one sample each: judged without noise, any
    difference is clear (a search trial, ranked before it is re-measured)."""

    figures: Figures

    def spread(self, headline: Headline) -> Spread | None:
        value = headline.value(self.figures)
        if math.isnan(value):  # not measured: the worst
            value = -math.inf if headline.higher_is_better else math.inf
        return Spread.of([value])


def pick_rule(slo: Slo | None) -> str:
    """Which point `pick_pareto_point` picks under `slo`, in words."""
    if slo is not None and slo.max_memory_mb is not None:
        return f"the fastest p99 within --max-memory {slo.max_memory_mb:g} MB"
    if slo is not None and slo.p99_ms is not None:
        return f"the least memory meeting --slo-p99 {slo.p99_ms:g} ms"
    return "the knee of the front"


def pick_pareto_point(
    points: Sequence[Remeasured], slo: Slo | None = None, *, alpha: Level = ALPHA
) -> int:
    """Index of the point the `multi` objective writes, by what the user asked for, the noise
    of the repeated runs deciding what is a difference (`clearly_better` at `alpha`, or at
    each pair's look):

    - `--max-memory MB`: the fastest p99 among the points within it; of the points the noise
      cannot tell from the fastest on p99, the least memory.
    - `--slo-p99 MS` (without --max-memory): the least memory among the points meeting it; of
      the points the noise cannot tell from the cheapest on memory, the fastest p99.
    - neither: the knee of the front (`knee_index`).

    A limit is judged on the medians; when no point meets the limits, every point counts
    (the caller says the limits were not met). A figure not measured is the worst.
    """
    if not points:
        raise ValueError("pick_pareto_point needs at least one point")
    slo = slo or Slo()
    indexes = [i for i, point in enumerate(points) if _within(point, slo)]
    indexes = indexes or list(range(len(points)))
    if slo.max_memory_mb is not None:
        return _best_then(points, indexes, P99, PSS, alpha)
    if slo.p99_ms is not None:
        return _best_then(points, indexes, PSS, P99, alpha)
    return indexes[knee_index([points[i] for i in indexes])]


def knee_index(points: Sequence[Remeasured]) -> int:
    """The knee of a front: the point nearest the ideal one (the front's lowest p99 and its
    least memory at once), each axis scaled to the front's range so that neither unit
    weighs more. Every point of a front trades one figure for the other; the knee is where
    a step either way costs more than it buys: cheaper points lose much p99 for little
    memory, faster ones spend much memory for little p99. On medians; a tie goes to the
    less memory, then the earlier point."""
    if not points:
        raise ValueError("knee_index needs at least one point")
    p99 = [_median(point, P99) for point in points]
    pss = [_median(point, PSS) for point in points]

    def scaled(values: list[float], value: float) -> float:
        finite = [v for v in values if math.isfinite(v)]
        if not math.isfinite(value):
            return math.inf
        low, high = min(finite), max(finite)
        return (value - low) / (high - low) if high > low else 0.0

    def distance(i: int) -> float:
        return math.hypot(scaled(p99, p99[i]), scaled(pss, pss[i]))

    return min(range(len(points)), key=lambda i: (distance(i), pss[i], i))


def _within(point: Remeasured, slo: Slo) -> bool:
    p99_ok = slo.p99_ms is None or _median(point, P99) <= slo.p99_ms
    return p99_ok and (slo.max_memory_mb is None or _median(point, PSS) <= slo.max_memory_mb)


def _best_then(
    points: Sequence[Remeasured], indexes: list[int], first: Headline, then: Headline, alpha: Level
) -> int:
    """The best median of `first`; among the points the noise cannot tell from it on
    `first`, the best median of `then` (ties: the earlier point)."""
    best = min(indexes, key=lambda i: (_median(points[i], first), _median(points[i], then), i))
    mine = points[best].spread(first)
    tied = [i for i in indexes if not _clearly_beats(mine, points[i].spread(first), first, alpha)]
    return min(tied, key=lambda i: (_median(points[i], then), _median(points[i], first), i))


def _clearly_beats(
    mine: Spread | None, theirs: Spread | None, headline: Headline, alpha: Level
) -> bool:
    if theirs is None:
        return mine is not None
    if mine is None:
        return False
    return clearly_better(mine, theirs, higher_is_better=headline.higher_is_better, alpha=alpha)


def _median(point: Remeasured, headline: Headline) -> float:
    """The median of a figure, a missing one the worst."""
    spread = point.spread(headline)
    return math.inf if spread is None else _median_of(spread, headline)


def _median_of(spread: Spread, headline: Headline) -> float:
    if math.isnan(spread.median):
        return -math.inf if headline.higher_is_better else math.inf
    return spread.median
