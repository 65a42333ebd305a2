"""What a study optimises: the objective (direction, ranking, pick, wording) and the SLOs.

Three objectives, one type (`Objective`, from `objective_named(name)`): `throughput`
(max req/s), `latency` (min p99 at a fixed offered load) and `multi` (the Pareto front of
req/s, p99 and memory; `pick_pareto_point` chooses the config that is emitted). Everything
that ranks configs asks the objective, so "best" means one thing everywhere. Constraints
follow Optuna's convention (<= 0 is satisfied); the error rate and fairness are always among
them. What each objective means for a user: docs/pages/commands/tune.md, "Objectives and SLOs".
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from tuner.errors import ConfigError, InvalidMeasurement
from tuner.metrics.measurement import Measurement
from tuner.metrics.paired import ALPHA, Pairs
from tuner.metrics.stats import Spread, clearly_better, pairs, ratio

# Optuna's names for the two ways a study's figure can go.
Direction = Literal["minimize", "maximize"]

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
        )


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

    @property
    def better(self) -> bool:
        """Better beyond the noise, as far as the figures show: a floor of the default's may
        hide a figure as good as mine, so it is never beaten; a floor of mine above it is."""
        if self.default_floor:
            return False
        return clearly_better(
            self.mine,
            self.default,
            higher_is_better=self.headline.higher_is_better,
            alpha=self.alpha,
        )

    @property
    def worse(self) -> bool:
        if self.mine_floor:
            return False
        return clearly_better(
            self.default,
            self.mine,
            higher_is_better=self.headline.higher_is_better,
            alpha=self.alpha,
        )

    @property
    def pairs(self) -> Pairs | None:
        """Mine against the default's, round by round; None when they were not paired."""
        paired = pairs(self.mine, self.default, higher_is_better=self.headline.higher_is_better)
        return paired if paired is not None and paired.count else None

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
            evidence = paired.text(figure.alpha) if paired else ranges
            return f"{label} beats the default beyond the noise ({h.name} {change}; {evidence})"
        why = (
            f"{paired.text(figure.alpha)}; {ranges}" if paired else f"the ranges overlap ({ranges})"
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
    """Several figures at once: Optuna keeps the front, `pick_pareto_point` picks one."""

    trade_off = True
    warns_of_tail = False
    default_wins = "the server's default config is the pick"

    def __init__(self, name: str, headlines: tuple[Headline, ...]) -> None:
        self.name = name
        self.headlines = headlines

    def pick(self, items: Sequence[T], figures: Callable[[T], Figures], slo: Slo) -> T:
        return items[pick_pareto_point([figures(item) for item in items], slo)]

    def shortlist(
        self, items: Sequence[T], figures: Callable[[T], Figures], on_front: Callable[[T], bool]
    ) -> list[T]:
        """The Pareto front only (fastest first), its pick rule's choice in front."""
        front = [item for item in items if on_front(item)]
        if not front:
            return []
        chosen = front[pick_pareto_point([figures(item) for item in front])]
        return [chosen] + [item for item in self.rank(front, figures) if item is not chosen]

    def summary(self, label: str, versus: Sequence[Versus], beats: bool) -> str:
        figures = []
        for figure in versus:
            verdict = "better" if figure.better else "worse" if figure.worse else "within noise"
            figures.append(f"{figure.headline.short} {figure.change} ({verdict})")
        return (
            f"{label} is the Pareto pick (fast within 5% of the fastest, then "
            f"leanest); vs the default: {', '.join(figures)}"
        )


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
MULTI = ParetoObjective("multi", (RPS, P99, PSS))
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
    if set]. A limited figure that was not measured counts as violated (+inf)."""
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
    return "; ".join(parts)


def _figure(value: float) -> str:
    return "not measured" if math.isnan(value) else f"{value:.1f}"


def pick_pareto_point(
    points: Sequence[Figures],
    slo: Slo | None = None,
    *,
    rps_tolerance: float = 0.05,
    p99_tolerance: float = 0.10,
) -> int:
    """Index of the config the `multi` objective emits: the leanest config that is nearly as
    fast as the fastest.

    1. Candidates: the points that meet `slo` (all points if none does, or if no slo).
    2. Keep those with rps >= (1 - rps_tolerance) * the best candidate rps (default 5%:
       differences below that are measurement noise, not a reason to spend memory).
    3. Of those, keep p99 <= (1 + p99_tolerance) * their best p99 (default 10%, p99 is noisier).
    4. Pick the lowest PSS memory; ties go to higher rps, then lower p99, then lower index.

    The pick is always Pareto-optimal among the candidates: anything dominating it would pass
    steps 2-3 too and win step 4. Passing all trials or only Optuna's `best_trials` gives the
    same answer. A point without a figure counts as worst on it.
    """
    if not points:
        raise ValueError("pick_pareto_point needs at least one point")
    slo = slo or Slo()
    indices = [i for i, f in enumerate(points) if feasible(slo, f)] or list(range(len(points)))
    rows = {i: _row(points[i]) for i in indices}  # i -> (rps, p99, pss)

    best_rps = max(r[0] for r in rows.values())
    fast = [i for i in indices if rows[i][0] >= (1 - rps_tolerance) * best_rps]
    best_p99 = min(rows[i][1] for i in fast)
    quick = [i for i in fast if rows[i][1] <= (1 + p99_tolerance) * best_p99]
    return min(quick, key=lambda i: (rows[i][2], -rows[i][0], rows[i][1], i))


def _row(figures: Figures) -> tuple[float, float, float]:
    def worst_if_nan(value: float, worst: float) -> float:
        return worst if math.isnan(value) else value

    return (
        worst_if_nan(figures.rps, -math.inf),
        worst_if_nan(figures.p99_ms, math.inf),
        worst_if_nan(figures.pss_mb, math.inf),
    )
