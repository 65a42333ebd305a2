"""Re-measure the best configs and the baselines side by side, in interleaved rounds.

One search trial is one noisy sample. Before anything is recommended, the top configs and the
baselines are measured again as A B C D, A B C D, ... so that drift of the machine hits all of
them alike, and the objective picks the winner by the medians. No Optuna here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from tuner import interrupts
from tuner.errors import TrialError
from tuner.loadgen.capacity import LoadNeed, load_need, need_text
from tuner.metrics.family import family_better
from tuner.metrics.measurement import Measurement
from tuner.metrics.paired import ALPHA, FIRST_LOOK_ALPHA, Level, Looks, second_look_alpha
from tuner.metrics.received import per_cpu_pair, per_cpu_spreads
from tuner.metrics.stats import Spread, clearly_better
from tuner.search import objectives
from tuner.search.objectives import (
    P99,
    PSS,
    RPS,
    Figures,
    Headline,
    Objective,
    Slo,
    Versus,
    versus_ranges,
)
from tuner.search.records import BASELINE_DEFAULT, BASELINE_RULE
from tuner.workflow.equals import cheapest_among_equals, settings_changed
from tuner.workflow.repeats import Repeat, RunAllowance, measured_cleanly, repeats_text

# A recommended config whose p99 is this many times the default's gets a warning.
TAIL_WARNING_FACTOR = 5.0
# Rounds more for the default and the best median when the best median is the better one but
# their pairs did not decide (tuner.metrics.paired: after five rounds only five wins of five
# decide, at the first look's share of the level; after 5 + 4, eight of nine can, at the
# rest): a real difference of 10% loses a round to the noise now and then, and gets a second
# look (the case that prompted it: docs/pages/commands/tune.md, "How a study runs").
EXTRA_ROUNDS = 4
# A config written among equals as the cheapest is worth those rounds too, with the best
# median and the other equals that trail it, when its median trails the best's by more than
# this share: a smaller gap would rarely decide in four more rounds, nor cost much if written.
EQUALS_GAP = 0.05
# At most this many configs in that call (each costs EXTRA_ROUNDS runs, as long as a trial's).
MAX_EQUALS_ENTRIES = 4
# Whether a baseline can be compared at all: measured, fair, any error rate.
_ANY_ERRORS = Slo(max_error_rate=1.0)
PERCENTILE_KEYS = ("p50", "p90", "p99", "p999")


@dataclass(frozen=True)
class Candidate:
    label: str  # "default", "2*cpus+1", "trial 17"
    trial_number: int | None
    settings: dict[str, Any]
    server: str = ""  # set when candidates of several servers are compared (`tuner compare`)


@dataclass
class Confirmed:
    """Every confirmation run of one candidate."""

    candidate: Candidate
    runs: list[Measurement] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    # The interleaved round of each run (what pairs it with another config's run of that
    # round); runs given without them are taken as rounds 0, 1, 2, ...
    rounds: list[int] = field(default_factory=list)
    # The rounds whose run was measured twice, its CPUs having lost too much (see repeats.py).
    repeats: list[Repeat] = field(default_factory=list)

    def run_rounds(self) -> list[int]:
        return self.rounds if len(self.rounds) == len(self.runs) else list(range(len(self.runs)))

    def spread(self, headline: Headline) -> Spread | None:
        """min / median / max of one figure over the runs, each with its round; None without
        a run."""
        good = [headline.value(Figures.of(run)) for run in self.runs]
        return Spread.of(good, self.run_rounds()) if good else None

    def median(self, headline: Headline) -> float:
        """The median of one figure over the runs; infinite without a run (sorts last)."""
        spread = self.spread(headline)
        return spread.median if spread is not None else math.inf

    @property
    def rps(self) -> Spread | None:
        return self.spread(RPS)

    @property
    def p99(self) -> Spread | None:
        return self.spread(P99)

    @property
    def pss(self) -> Spread | None:
        return self.spread(PSS)

    @property
    def cpu_busy(self) -> Spread | None:
        """CPUs the server tree kept busy per run; None when no run recorded it."""
        busy = [run.server_cpu.busy_cpus for run in self.runs if run.server_cpu]
        return Spread.of(busy) if busy else None

    @property
    def of_cpus(self) -> float | None:
        return next((run.server_cpu.of_cpus for run in self.runs if run.server_cpu), None)

    @property
    def cpu_bound_runs(self) -> int:
        return sum(run.cpu_bound for run in self.runs)

    @property
    def per_cpu(self) -> Spread | None:
        """Requests per CPU-second received, by round, when every run was CPU-bound
        (tuner.metrics.received); None otherwise."""
        figures = [run.rps_per_cpu_s if run.cpu_bound else None for run in self.runs]
        known = [figure for figure in figures if figure is not None]
        return Spread.of(known, self.run_rounds()) if known and len(known) == len(figures) else None

    @property
    def unfair_runs(self) -> int:
        return sum(run.unfair for run in self.runs)

    @property
    def unfair(self) -> bool:
        """Unfair in at least half of its runs. Judged like every other figure, by the middle
        of its runs: under overload a config near the fairness line (gunicorn's gevent worker
        on a tiny app) crosses it in some runs and not others, and an any-run rule would turn
        on how many rounds happened to be run (3 rounds passed a config that 5 rounds failed,
        so the tuner and a longer check disagreed). A config unfair in fewer runs can win once
        `EXTRA_ROUNDS` more have judged it again (see `fairness_call`), and the verdict says in
        how many runs it was unfair."""
        return mostly_unfair(self.unfair_runs, len(self.runs))

    @property
    def client_bound(self) -> bool:
        return any(run.client_bound for run in self.runs)

    def load_need(self) -> LoadNeed | None:
        """The load CPUs its client_bound runs would have needed (the medians of their
        figures); None when no run was client_bound or a figure was not recorded."""
        bound = [r for r in self.runs if r.client_bound and r.server_cpu and r.loadgen_busy_cpus]
        if not bound:
            return None
        return load_need(
            statistics.median(r.median_rps for r in bound),
            statistics.median(r.loadgen_busy_cpus or 0.0 for r in bound),
            statistics.median(r.server_cpu.utilisation if r.server_cpu else 0.0 for r in bound),
        )

    def median_figures(self) -> Figures:
        """The medians of the runs, as the objective judges them (worst when no run)."""
        rps, p99, pss = self.rps, self.p99, self.pss
        errors = sorted(run.error_rate for run in self.runs)
        # A stream cut or a restart in any round is an outage in production: the worst round.
        lanes = [objectives.lane_figures(run) for run in self.runs]
        return Figures(
            rps=rps.median if rps else 0.0,
            p99_ms=p99.median if p99 else math.inf,
            pss_mb=pss.median if pss else math.inf,
            error_rate=errors[len(errors) // 2] if errors else 1.0,
            streams_cut=max((cut for cut, _ in lanes), default=0.0),
            probe_excess=max((excess for _, excess in lanes), default=-1.0),
            offered_rps=next((run.target_rps for run in self.runs if run.target_rps), None),
        )

    def usable(self, slo: Slo) -> bool:
        return (
            bool(self.runs)
            and len(self.failures) < len(self.runs)
            and not self.unfair
            and objectives.feasible(slo, self.median_figures())
        )

    def latency_medians(self) -> dict[str, float]:
        """Median of each latency percentile over the runs, for the report's percentile curve."""
        if not self.runs:
            return {}
        per_run = [run.latency.to_json() for run in self.runs]
        return {key: statistics.median(p[key] for p in per_run) for key in PERCENTILE_KEYS}

    def summary(self) -> ConfirmedSummary:
        return ConfirmedSummary(
            label=self.candidate.label,
            trial=self.candidate.trial_number,
            settings=self.candidate.settings,
            rps=self.rps,
            p99_ms=self.p99,
            pss_mb=self.pss,
            failures=tuple(self.failures),
            unfair_runs=self.unfair_runs,
            runs=len(self.runs),
            client_bound=self.client_bound,
            server=self.candidate.server,
            latency_ms_median=self.latency_medians(),
            cpu_busy=self.cpu_busy,
            of_cpus=self.of_cpus,
            load_need=self.load_need(),
            per_cpu=self.per_cpu,
            cpu_bound_runs=self.cpu_bound_runs,
            repeats=tuple(self.repeats),
        )

    def repeats_text(self) -> str:
        return repeats_text(self.candidate.label, len(self.runs), self.repeats)


@dataclass(frozen=True)
class ConfirmedSummary:
    """What is kept of a confirmed candidate (in the study, `--json`, compare.json): its
    spreads, not its runs. Reports read it back with `from_json`."""

    label: str
    trial: int | None
    settings: dict[str, Any]
    rps: Spread | None  # of the median-of-windows req/s of each run
    p99_ms: Spread | None
    pss_mb: Spread | None
    failures: tuple[str, ...] = ()
    unfair_runs: int = 0
    runs: int = 0  # measured runs (failed ones are in `failures`)
    client_bound: bool = False
    server: str = ""
    latency_ms_median: dict[str, float] = field(default_factory=dict)
    cpu_busy: Spread | None = None  # CPUs the server tree kept busy (ServerCpu.busy_cpus)
    of_cpus: float | None = None  # of the CPUs it could use
    load_need: LoadNeed | None = None  # client_bound: the load CPUs it would have needed
    repeats: tuple[Repeat, ...] = ()  # runs measured twice, their CPUs having lost too much
    # Requests per CPU-second received, when every run was CPU-bound (else None), and
    # in how many runs it was.
    per_cpu: Spread | None = None
    cpu_bound_runs: int = 0

    @property
    def unfair(self) -> bool:
        """Unfair in at least half of its runs, as `Confirmed.unfair`."""
        return mostly_unfair(self.unfair_runs, self.runs)

    def repeats_text(self) -> str:
        return repeats_text(self.label, self.runs, self.repeats)

    def median_figures(self) -> Figures:
        """The medians, as an objective ranks them (the error rate is not kept: nan)."""

        def median(spread: Spread | None, missing: float) -> float:
            return spread.median if spread else missing

        return Figures(
            rps=median(self.rps, 0.0),
            p99_ms=median(self.p99_ms, math.inf),
            pss_mb=median(self.pss_mb, math.inf),
            error_rate=math.nan,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "trial": self.trial,
            "settings": self.settings,
            "rps": _spread_json(self.rps),
            "p99_ms": _spread_json(self.p99_ms),
            "pss_mb": _spread_json(self.pss_mb),
            "failures": list(self.failures),
            "unfair": self.unfair,
            "unfair_runs": self.unfair_runs,
            "runs": self.runs,
            "client_bound": self.client_bound,
            "server": self.server,
            "latency_ms_median": self.latency_ms_median,
            "cpu_busy": _spread_json(self.cpu_busy),
            "of_cpus": self.of_cpus,
            "load_need": self.load_need.to_json() if self.load_need else None,
            "repeats": [repeat.to_json() for repeat in self.repeats],
            "rps_per_cpu_s": _spread_json(self.per_cpu),
            "cpu_bound_runs": self.cpu_bound_runs,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConfirmedSummary:
        trial = data.get("trial")
        return cls(
            label=str(data.get("label", "?")),
            trial=None if trial is None else int(trial),
            settings=dict(data.get("settings") or {}),
            rps=_spread_from(data.get("rps")),
            p99_ms=_spread_from(data.get("p99_ms")),
            pss_mb=_spread_from(data.get("pss_mb")),
            failures=tuple(data.get("failures") or ()),
            # Studies from before the counts were kept: "unfair" meant unfair in some run, and
            # is read as unfair in all of them.
            unfair_runs=int(data.get("unfair_runs", bool(data.get("unfair")))),
            runs=int(data.get("runs", bool(data.get("unfair")))),
            client_bound=bool(data.get("client_bound")),
            server=str(data.get("server") or ""),
            latency_ms_median=dict(data.get("latency_ms_median") or {}),
            cpu_busy=_spread_from(data.get("cpu_busy")),
            of_cpus=None if data.get("of_cpus") is None else float(data["of_cpus"]),
            load_need=LoadNeed.from_json(data.get("load_need")),
            repeats=tuple(Repeat.from_json(r) for r in data.get("repeats") or ()),
            per_cpu=_spread_from(data.get("rps_per_cpu_s")),
            cpu_bound_runs=int(data.get("cpu_bound_runs") or 0),
        )


def _spread_json(spread: Spread | None) -> dict[str, Any] | None:
    """min / median / max, and each run's figure with its round: what pairs it with another
    config's in a report read back later (compare's ties)."""
    if spread is None:
        return None
    return {
        "min": spread.low,
        "median": spread.median,
        "max": spread.high,
        "samples": list(spread.samples),
        "rounds": list(spread.rounds),
    }


def _spread_from(data: object) -> Spread | None:
    """A stored spread; one stored before its samples were kept is min / median / max alone,
    unpaired (judged by its range)."""
    if not isinstance(data, Mapping):
        return None
    samples, rounds = data.get("samples"), data.get("rounds")
    if samples and rounds and len(samples) == len(rounds):
        return Spread.of([float(v) for v in samples], [int(r) for r in rounds])
    low, median, high = (float(data[key]) for key in ("min", "median", "max"))
    return Spread(low, median, high, (low, median, high))


# Told of each round's run of a candidate: the run kept (None: it failed), and when it was
# measured twice, why and which was kept.
OnRun = Callable[[Candidate, int, Measurement | None, Repeat | None], None]
Measure = Callable[[Candidate, int], Measurement]


def confirm(
    candidates: Sequence[Candidate],
    rounds: int,
    measure: Measure,
    on_run: OnRun | None = None,
    allowance: RunAllowance | None = None,
) -> list[Confirmed]:
    """Measure every candidate once per round, in the same order each round."""
    confirmed = [Confirmed(candidate) for candidate in candidates]
    more_rounds(confirmed, range(rounds), measure, on_run, allowance)
    return confirmed


def more_rounds(
    entries: Sequence[Confirmed],
    round_indexes: Iterable[int],
    measure: Measure,
    on_run: OnRun | None = None,
    allowance: RunAllowance | None = None,
) -> None:
    """Measure each of `entries` once per round, adding to the runs they have; odd rounds in
    the reverse order (A B C, C B A, ...), so that a place in the round (first after a quiet
    spell, last after a busy one) favours no config in the pairs the rounds make. A run whose
    CPUs lost too much is measured again at once, in its place, and the cleaner of the two
    kept (tuner.workflow.repeats): one run per round still, so the pairs are as before. With
    an `allowance` (a budget's), only as many runs are measured again as it holds."""
    for round_index in round_indexes:
        for entry in round_order(entries, round_index):
            attempt = partial(_attempt, entry, round_index, measure)
            spare = allowance.for_runs_of(entry.candidate.server) if allowance is not None else None
            run, repeat = measured_cleanly(attempt, round_index, spare)
            if repeat is not None:
                entry.repeats.append(repeat)
            if run is not None:
                entry.rounds[:] = entry.run_rounds()
                entry.runs.append(run)
                entry.rounds.append(round_index)
            if on_run:
                on_run(entry.candidate, round_index, run, repeat)


# Measures the configs given `EXTRA_ROUNDS` more for a verdict's second look; False when it
# could not (a budget with no time left for their runs), and the first look then stands.
MoreRounds = Callable[[Sequence[Confirmed]], bool]


def measured_more(
    measure: Measure,
    rounds: int,
    on_run: OnRun | None = None,
    allowance: RunAllowance | None = None,
) -> MoreRounds:
    """A verdict's `more`: `EXTRA_ROUNDS` more rounds of the entries given, after the first
    `rounds`; with an `allowance` (a budget's), only when it holds all their runs, taken
    before they run (the repeats among them draw on what is left)."""

    def more(entries: Sequence[Confirmed]) -> bool:
        if allowance is not None and not allowance.take_all(len(entries) * EXTRA_ROUNDS):
            return False
        more_rounds(entries, extra_rounds(entries, rounds), measure, on_run, allowance)
        return True

    return more


def not_looked_again(verdict: Verdict, of: str) -> Verdict:
    """The first look's verdict, saying that the second look it called for was not made."""
    return replace(
        verdict,
        summary=f"{verdict.summary} (no second look: the budget held no more runs for "
        f"{EXTRA_ROUNDS} more rounds of {of})",
    )


def extra_rounds(entries: Sequence[Confirmed], first: int) -> range:
    """The indexes of `EXTRA_ROUNDS` more rounds of `entries`: from `first` (the confirmation's
    round count), or after the last round any of them was measured in, if later. A verdict
    can ask for more rounds twice (a close call, then the lower tail: the default both times),
    and a round index must pair each config's runs of one stretch of time, never two."""
    start = max([first, *(index + 1 for entry in entries for index in entry.run_rounds())])
    return range(start, start + EXTRA_ROUNDS)


def _attempt(entry: Confirmed, round_index: int, measure: Measure) -> Measurement | None:
    """One run of `entry`'s config; None when it failed (why is added to its failures)."""
    interrupts.raise_if_requested()  # a stop signal whose exception was lost
    try:
        return measure(entry.candidate, round_index)
    except TrialError as exc:
        entry.failures.append(f"{exc.reason}: {str(exc).splitlines()[0]}")
        return None


def round_order(entries: Sequence[Confirmed], round_index: int) -> list[Confirmed]:
    """The order of one round: as given in even rounds, reversed in odd ones."""
    return list(entries) if round_index % 2 == 0 else list(reversed(entries))


@dataclass(frozen=True)
class Verdict:
    """The recommendation, its baselines, and whether it is better beyond the noise."""

    winner: Confirmed
    default: Confirmed | None
    rule: Confirmed | None
    beats_default: bool
    summary: str
    # The configs the noise could not separate from the winner (labels), when it was chosen
    # among equals as the cheapest.
    tied_with: tuple[str, ...] = ()
    # Of the configs the verdict weighed (the best median, the default), those measured
    # client_bound: their req/s are floors (labels).
    client_bound: tuple[str, ...] = ()
    # Configs that won their pairs with the default but not the family's test
    # (tuner.metrics.family), and the rivals that test weighed: more rounds of them all can
    # decide it.
    lucky: tuple[str, ...] = ()
    family: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "winner": self.winner.candidate.label,
            "winner_trial": self.winner.candidate.trial_number,
            "beats_default_beyond_noise": self.beats_default,
            "summary": self.summary,
            "tied_with": list(self.tied_with),
            "client_bound": list(self.client_bound),
        }


def decide(
    confirmed: Sequence[Confirmed],
    objective: Objective,
    slo: Slo,
    defaults: Mapping[str, Any] | None = None,
    alpha: float = FIRST_LOOK_ALPHA,
    tie_level: Level = ALPHA,
) -> Verdict | None:
    """Pick the config to write, and say whether it beats the default beyond the noise (by
    the pairs of their interleaved rounds, at `alpha`: tuner.metrics.paired, on a figure the
    objective is about). Configs tie with the best median unless their pairs tell them apart
    at `tie_level` (after an equals call, each pair at its own look's level).

    The objective ranks the usable candidates by their medians. A difference inside the noise
    is no difference: when the best median does not beat the default beyond the noise, the
    default is written; when it does, the cheapest of the configs that tie with it is (see
    `tuner.workflow.equals`; `defaults` are the server's defaults, to count changes).
    """
    by_label = {entry.candidate.label: entry for entry in confirmed}
    default, rule = by_label.get(BASELINE_DEFAULT), by_label.get(BASELINE_RULE)
    usable = [entry for entry in confirmed if entry.usable(slo)]
    if not usable:
        return None
    best = objective.pick(usable, Confirmed.median_figures, slo)
    if best is default:
        bound: tuple[str, ...] = (best.candidate.label,) if best.client_bound else ()
        return Verdict(best, default, rule, False, objective.default_wins, client_bound=bound)
    if default is None or not default.usable(_ANY_ERRORS):
        best, tied, why = _among_equals(best, usable, objective, defaults, tie_level)
        label = best.candidate.label
        summary = f"{label} is the best usable config (the default could not be used)" + why
        summary += _fairness_note(best)
        return Verdict(best, default, rule, True, summary, tied)
    passed_over = ""
    bound = tuple(e.candidate.label for e in (best, default) if e.client_bound)
    if default.usable(slo):
        # What is written must beat the default beyond the noise, and so must a cheaper
        # config written instead of the best median.
        rivals = [e for e in usable if e is not default]
        beaters = [e for e in rivals if _beats(e, default, objective, alpha)]
        beaters, lucky, family = _family_kept(default, rivals, beaters, objective, alpha)
        if not beaters:
            if bound:
                summary = floors_summary(best, default)
            else:
                summary = (
                    objective.summary(
                        best.candidate.label, _versus(best, default, objective, alpha), False
                    )
                    + _family_text(lucky, len(rivals), alpha)
                    + "; a difference inside the noise is no difference, so the default is "
                    "written"
                )
            held = tuple(e.candidate.label for e in lucky)
            return Verdict(
                default, default, rule, False, summary, client_bound=bound, lucky=held,
                family=family if held else (),
            )  # fmt: skip
        if best not in beaters:
            # The best median overlaps the default, yet another config is better than the
            # default in every run (its runs spread less): write that one.
            passed_over = (
                f"; the best median, {best.candidate.label}, was not measurably better than "
                "the default"
            )
            best = objective.pick(beaters, Confirmed.median_figures, slo)
        usable = beaters
    best, tied, why = _among_equals(best, usable, objective, defaults, tie_level)
    label = best.candidate.label
    versus = _versus(best, default, objective, alpha)
    if not default.usable(slo):  # the default breaks an SLO: anything usable beats it
        summary = objective.summary(label, versus, True) + why + _fairness_note(best)
        return Verdict(best, default, rule, True, summary, tied)
    beats = _beats(best, default, objective, alpha)
    summary = objective.summary(label, versus, beats) + passed_over + why
    if objective.warns_of_tail:
        summary += _tail_warning(best, default)
    bound = tuple(e.candidate.label for e in (best, default) if e.client_bound)
    summary += _fairness_note(best)
    return Verdict(best, default, rule, beats, summary, tied, client_bound=bound)


def settle(
    confirmed: Sequence[Confirmed],
    objective: Objective,
    slo: Slo,
    defaults: Mapping[str, Any] | None,
    more: MoreRounds,
) -> Verdict | None:
    """`decide`; when the verdict is in doubt, `more(entries)` measures them `EXTRA_ROUNDS`
    more, once, and the verdict is decided again over all the runs and says why: a close call
    (see `close_call`), a winner unfair in some of its runs (see `fairness_call`), or a cheaper
    config written among equals that trails the best median by more than `EQUALS_GAP` (see
    `equals_call`). The first two cannot both apply: one needs the default written, the other
    another config; an equals call is made only when neither is. When `more` cannot measure
    them (a budget spent), the first look's verdict stands and says so."""
    verdict = decide(confirmed, objective, slo, defaults, FIRST_LOOK_ALPHA)
    pair = close_call(confirmed, verdict, objective, slo)
    doubted = fairness_call(verdict)
    if verdict is None or (not pair and not doubted):
        equals = equals_call(confirmed, verdict, objective, slo)
        return _settle_equals(confirmed, objective, slo, defaults, more, equals, verdict)
    entries = pair or doubted
    suspect = entries[-1]
    family = bool(pair and verdict.lucky)  # the family's test undecided: all configs again
    of = suspect.candidate.label + (" and the default" if len(entries) > 1 else "")
    if family:
        of = f"all {len(entries)} configs"
    before = (suspect.unfair_runs, len(suspect.runs))
    first_look = min(len(entry.runs) for entry in entries)
    if not more(entries):
        return not_looked_again(verdict, of)
    # A close call looks again at the level the first look left (tuner.metrics.paired); a
    # fairness call only follows a first look that decided, so it spends nothing more.
    alpha = second_look_alpha(first_look) if pair else FIRST_LOOK_ALPHA
    again = decide(confirmed, objective, slo, defaults, alpha)
    if again is None:
        return None
    if family:
        why = f"{', '.join(verdict.lucky)} won the pairs, but the family's test had not decided"
    elif pair:
        why = "its median was the better one, but their pairs had not decided"
    else:
        why = _fairness_rounds_text(suspect, *before, again, entries)
    return _after_more_rounds(again, of, why)


def _after_more_rounds(again: Verdict, of: str, why: str) -> Verdict:
    """The verdict decided again, saying which configs had the extra rounds and why."""
    return replace(
        again, summary=again.summary + f" (after {EXTRA_ROUNDS} more rounds of {of}: {why})"
    )


@dataclass(frozen=True)
class EqualsCall:
    """The best median and the cheaper configs written or writable in its place whose medians
    trail it by more than `EQUALS_GAP` (the one written first), and the words that say so."""

    entries: tuple[Confirmed, ...]
    why: str


def equals_call(
    confirmed: Sequence[Confirmed], verdict: Verdict | None, objective: Objective, slo: Slo
) -> EqualsCall | None:
    """When the verdict wrote a config chosen among equals as the cheapest, and its median
    trails the best median's by more than `EQUALS_GAP`: the best median and the tied configs
    that trail it so far (the written one first, then the widest gaps; at most
    `MAX_EQUALS_ENTRIES` configs), worth `EXTRA_ROUNDS` more. Five rounds decide only five wins
    of five, so a 10% gap between equals is often left undecided and the cheaper written; more
    rounds can tell it. Configs within `EQUALS_GAP` stay equals as they are."""
    if verdict is None or not verdict.tied_with or verdict.winner is verdict.default:
        return None
    by_label = {entry.candidate.label: entry for entry in confirmed}
    pool = [verdict.winner, *(by_label[label] for label in verdict.tied_with)]
    top = objective.pick(pool, Confirmed.median_figures, slo)
    if top is verdict.winner:
        return None
    gaps = {id(entry): _median_gap(entry, top, objective) for entry in pool}
    if gaps[id(verdict.winner)] <= EQUALS_GAP:
        return None
    others = sorted(
        (e for e in pool if e is not top and e is not verdict.winner and gaps[id(e)] > EQUALS_GAP),
        key=lambda e: -gaps[id(e)],
    )
    entries = (top, verdict.winner, *others)[:MAX_EQUALS_ENTRIES]
    why = (
        f"{verdict.winner.candidate.label}, the cheapest of the configs the noise could not "
        f"separate, trailed the best median, {top.candidate.label}, by "
        f"{gaps[id(verdict.winner)]:.0%}, but their pairs had not decided"
    )
    return EqualsCall(entries, why)


def _settle_equals(
    confirmed: Sequence[Confirmed],
    objective: Objective,
    slo: Slo,
    defaults: Mapping[str, Any] | None,
    more: MoreRounds,
    call: EqualsCall | None,
    verdict: Verdict | None,
) -> Verdict | None:
    """The verdict decided again after `call`'s configs had `EXTRA_ROUNDS` more; `verdict`
    when there is no call, or (saying so) when `more` could not measure them. The default is
    not measured again, so its pairs keep the first look's level; the pairs among the equals
    are judged at their own look's (tuner.metrics.paired)."""
    if call is None or verdict is None:
        return verdict
    labels = ", ".join(entry.candidate.label for entry in call.entries)
    looks = Looks(frozenset(index for entry in confirmed for index in entry.run_rounds()))
    if not more(call.entries):
        return not_looked_again(verdict, labels)
    again = decide(confirmed, objective, slo, defaults, FIRST_LOOK_ALPHA, tie_level=looks)
    if again is None:
        return verdict
    return _after_more_rounds(again, labels, call.why)


def _median_gap(entry: Confirmed, top: Confirmed, objective: Objective) -> float:
    """How far `entry`'s median trails `top`'s on the objective's figures, as a share of the
    better of the two (the widest figure); 0 when it does not trail or a figure is missing."""
    gap = 0.0
    for headline in objective.headlines:
        mine, theirs = entry.spread(headline), top.spread(headline)
        if mine is None or theirs is None or mine.median <= 0 or theirs.median <= 0:
            continue
        if headline.higher_is_better:
            gap = max(gap, 1.0 - mine.median / theirs.median)
        else:
            gap = max(gap, 1.0 - theirs.median / mine.median)
    return gap


def fairness_call(verdict: Verdict | None) -> list[Confirmed]:
    """The default (when there is one) and the winner, when the winner is another config that
    was unfair in some of its runs but fewer than half: the pair worth `EXTRA_ROUNDS` more
    before it is written: under overload a config near the fairness line (gunicorn's gevent
    worker) can pass the majority of 3 runs and fail most runs of a longer check. Over all its
    runs it is then judged by the same rule (`mostly_unfair`). The default written changes
    nothing, so it is not measured again for its fairness."""
    if verdict is None or verdict.winner is verdict.default:
        return []
    winner = verdict.winner
    if not winner.unfair_runs or winner.unfair:
        return []
    return [verdict.default, winner] if verdict.default is not None else [winner]


def _fairness_rounds_text(
    suspect: Confirmed,
    unfair_before: int,
    runs_before: int,
    again: Verdict,
    measured: Sequence[Confirmed],
) -> str:
    """Why the extra rounds were run for fairness and what they showed."""
    label = suspect.candidate.label
    said = (
        f"{label} was unfair in {unfair_before} of its {runs_before} runs; over all its "
        f"{len(suspect.runs)} runs it was unfair in {suspect.unfair_runs}, "
    )
    if suspect.unfair:
        said += "at least half, so it cannot be written"
    else:
        said += "fewer than half, so its fairness does not rule it out"
    chosen = again.winner
    if chosen.unfair_runs and all(chosen is not entry for entry in measured):
        said += (
            f"; {chosen.candidate.label}, written instead, was not measured again (the extra "
            "rounds are run once)"
        )
    return said


def client_bound_line(entries: Sequence[Confirmed], load_cpus: int, spare: int) -> str:
    """One line for the confirmation rounds that reached the load generator's limit: which
    configs, what their req/s are, and the load CPUs the hungriest would have needed
    (`load_cpus`: the load CPUs the rounds had; `spare`: this machine's CPUs in neither set);
    "" when none did."""
    bound = [entry for entry in entries if entry.client_bound]
    if not bound:
        return ""
    labels = ", ".join(entry.candidate.label for entry in bound)
    needs = [need for entry in bound if (need := entry.load_need()) is not None]
    need = max(needs, key=lambda n: n.load_cpus, default=None)
    line = (
        f"client_bound (the load generator was the bottleneck) in the confirmation rounds of "
        f"{labels}: {'its' if len(bound) == 1 else 'their'} req/s "
        f"{'is a floor' if len(bound) == 1 else 'are floors'} for the server, not "
        f"{'its result' if len(bound) == 1 else 'results'}; more load CPUs (--load-cpus) would "
        "settle it"
    )
    estimate = need_text(need, load_cpus, spare)
    return f"{line}; {estimate}" if estimate else line


def close_call(
    confirmed: Sequence[Confirmed], verdict: Verdict | None, objective: Objective, slo: Slo
) -> list[Confirmed]:
    """The default and the best median, when the default is to be written only because their
    runs overlap (the best median is the better one): the pair worth `EXTRA_ROUNDS` more."""
    if verdict is None or verdict.default is None or verdict.winner is not verdict.default:
        return []
    usable = [entry for entry in confirmed if entry.usable(slo)]
    best = objective.pick(usable, Confirmed.median_figures, slo)
    if best is verdict.default or verdict.default.client_bound:
        # More rounds cannot turn the default's floor into a result: more load CPUs can.
        return []
    if verdict.lucky:
        # The family's test weighs every rival it kept: only rounds of all of them can decide
        # it (a rival clearly worse than the default is not among them, nor measured again).
        return [verdict.default, *(e for e in usable if e.candidate.label in verdict.family)]
    return [verdict.default, best]


def _among_equals(
    best: Confirmed,
    usable: Sequence[Confirmed],
    objective: Objective,
    defaults: Mapping[str, Any] | None,
    level: Level = ALPHA,
) -> tuple[Confirmed, tuple[str, ...], str]:
    """The cheapest config that ties with `best` (its pairs undecided at `level`), the labels
    it tied with, and the words that say so (empty when `best` stays). A trade-off objective
    already weighs memory and p99 in its pick, so it keeps its pick."""
    if objective.trade_off or defaults is None:
        return best, (), ""
    choice = cheapest_among_equals(
        best,
        [entry for entry in usable if entry.candidate.label != BASELINE_DEFAULT],
        objective,
        lambda entry: settings_changed(entry.candidate.settings, defaults),
        lambda entry: entry.candidate.label,
        level,
    )
    tied = tuple(entry.candidate.label for entry in choice.tied)
    if choice.chosen is best:
        return best, tied, ""
    why = (
        f"; chosen among {len(tied) + 1} configs the noise cannot separate on "
        f"{'/'.join(h.short for h in objective.headlines)} ({', '.join(tied)}), as the "
        f"cheapest: {choice.why}"
    )
    return choice.chosen, tied, why


def _versus(
    best: Confirmed, default: Confirmed, objective: Objective, alpha: float = ALPHA
) -> list[Versus]:
    out = []
    for headline in objective.headlines:
        if (figure := _one_versus(headline, best, default, alpha)) is not None:
            out.append(figure)
    return out


def _one_versus(
    headline: Headline, best: Confirmed, default: Confirmed, alpha: float = ALPHA
) -> Versus | None:
    """One figure of `best` against the default's; req/s measured client_bound is a floor."""
    mine, theirs = best.spread(headline), default.spread(headline)
    if mine is None or theirs is None:
        return None
    floors = headline is RPS
    return Versus(
        headline,
        mine,
        theirs,
        floors and best.client_bound,
        floors and default.client_bound,
        alpha,
        per_cpu_pair(best, default) if headline is RPS else None,
    )


def _family_kept(
    default: Confirmed,
    rivals: Sequence[Confirmed],
    beaters: Sequence[Confirmed],
    objective: Objective,
    alpha: float,
) -> tuple[list[Confirmed], list[Confirmed], tuple[str, ...]]:
    """The beaters that stay better with the whole family of rivals counted
    (tuner.metrics.family: the best of several equal configs wins its pairs by luck more often
    than one does), those that do not, and the family's labels. An objective of several
    figures keeps its beaters."""
    if len(objective.headlines) != 1 or len(rivals) < 2 or not beaters:
        return list(beaters), [], ()
    (headline,) = objective.headlines
    # Judged on the figure the pairs with the default were: per CPU-second where all of them
    # were CPU-bound throughout.
    per_cpu = per_cpu_spreads([default, *rivals]) if headline is RPS else None
    judged = dict(zip(map(id, [default, *rivals]), per_cpu, strict=True)) if per_cpu else None

    def spread(entry: Confirmed) -> Spread | None:
        return judged[id(entry)] if judged else entry.spread(headline)

    reference = spread(default)
    if reference is None:
        return list(beaters), [], ()
    # A rival clearly worse than the default cannot be the one that luck makes look better,
    # and in a group its runs would hide a better member's (shuffled into the default's place,
    # they make any config look better): it is left out of the family.
    spreads = {
        e.candidate.label: s
        for e in rivals
        if (s := spread(e)) is not None
        and not clearly_better(reference, s, higher_is_better=headline.higher_is_better)
    }
    labels = {e.candidate.label for e in beaters}
    kept = family_better(
        reference,
        spreads,
        lambda label: label in labels,
        higher_is_better=headline.higher_is_better,
        alpha=alpha,
    )
    return (
        [e for e in beaters if e.candidate.label in kept or e.candidate.label not in spreads],
        [e for e in beaters if e.candidate.label in spreads and e.candidate.label not in kept],
        tuple(spreads),
    )


def _family_text(lucky: Sequence[Confirmed], rivals: int, alpha: float) -> str:
    """Why a config that won its pairs is still not written: the family's luck."""
    if not lucky:
        return ""
    names = ", ".join(e.candidate.label for e in lucky)
    return (
        f"; {names} won {'its' if len(lucky) == 1 else 'their'} pairs, but not beyond the "
        f"family's luck: of {rivals} configs confirmed against the default, the best is likelier "
        f"than one alone to win its rounds by chance, and a group of them holding it did not "
        f"beat the default at {alpha:.1%} (closed test)"
    )


def _beats(entry: Confirmed, default: Confirmed, objective: Objective, alpha: float) -> bool:
    """Better than the default beyond the noise on a figure the objective is about, as far as
    the figures show it: two configs that both reached the load generator's limit measured
    it, not themselves, so neither beats the other on any figure."""
    if entry.client_bound and default.client_bound:
        return False
    return any(figure.better for figure in _versus(entry, default, objective, alpha))


def floors_summary(best: Confirmed, default: Confirmed) -> str:
    """The verdict when the best median is not shown to beat the default because a req/s is a
    floor (client_bound, the load generator's limit): no claim either way, the default (the
    cheaper) is written, and what would settle it. Worded as `compare` words its floors."""
    label = best.candidate.label
    rps = _one_versus(RPS, best, default)
    figures = f" ({versus_ranges(label, rps)})" if rps else ""
    change = f"req/s {rps.change} the default's" if rps else "its figures"
    if best.client_bound and default.client_bound:
        said = (
            f"{label} and the default both reached the load generator's limit (client_bound): "
            f"their req/s are floors, not results{figures}, so neither is shown to beat the "
            "other"
        )
    elif default.client_bound:
        said = (
            f"the default reached the load generator's limit (client_bound): its req/s is a "
            f"floor, not a result{figures}, so {label} ({change}) is not shown to beat it"
        )
    else:
        said = (
            f"{label} reached the load generator's limit (client_bound): its req/s is a floor, "
            f"not a result{figures}, {change}, not beyond the noise, so it is not shown to "
            "beat the default"
        )
    return (
        said + "; a difference we cannot measure is no difference, so the default (the "
        "cheaper) is written; more load CPUs (--load-cpus) or a bigger split would settle it"
    )


def _tail_warning(winner: Confirmed, default: Confirmed) -> str:
    """Say so when more throughput was bought with a much worse tail (e.g. gevent under
    overload serves most requests fast and leaves a few waiting for seconds)."""
    if winner is default or not winner.p99 or not default.p99 or not default.p99.median:
        return ""
    worse = winner.p99.median / default.p99.median
    if worse < TAIL_WARNING_FACTOR:
        return ""
    return (
        f"; note: its p99 is x{worse:.1f} the default's ({winner.p99.median:,.1f} ms): "
        "if tail latency matters, set --slo-p99 or use --objective multi"
    )


def unfair_text(unfair_runs: int, runs: int) -> str:
    """A table's note: "unfair" (in at least half its runs), "unfair 1/3" (crossed the line in
    fewer runs, still usable), or "" (fair in every run)."""
    if not unfair_runs:
        return ""
    return "unfair" if mostly_unfair(unfair_runs, runs) else f"unfair {unfair_runs}/{runs}"


def mostly_unfair(unfair_runs: int, runs: int) -> bool:
    """The fairness rule over several runs: unfair in at least half of them (and in one)."""
    return unfair_runs > 0 and 2 * unfair_runs >= runs


def _fairness_note(winner: Confirmed) -> str:
    """Say so when the recommended config was unfair in some (fewer than half) of its runs: it
    sits near the fairness line under this load, which an operator should know."""
    if not winner.unfair_runs:
        return ""
    return (
        f"; note: it was unfair in {winner.unfair_runs} of its {len(winner.runs)} runs (some "
        "connections were served less than others under this load); judged by the majority of "
        "its runs, like its other figures"
    )
