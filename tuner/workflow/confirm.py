"""Re-measure the best configs and the baselines side by side, in interleaved rounds.

One search trial is one noisy sample. Before anything is recommended, the top configs and the
baselines are measured again as A B C D, A B C D, ... so that drift of the machine hits all of
them alike, and the winner is chosen by its median. No Optuna here.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.errors import TrialError
from tuner.metrics.stats import Spread, clearly_better, ratio
from tuner.search import objectives
from tuner.search.objectives import Slo
from tuner.search.records import BASELINE_DEFAULT, BASELINE_RULE

# A recommended config whose p99 is this many times the default's gets a warning.
TAIL_WARNING_FACTOR = 5.0


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
    runs: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def spread(self, figure: Callable[[dict[str, Any]], float]) -> Spread | None:
        good = [figure(run) for run in self.runs]
        return Spread.of(good) if good else None

    @property
    def rps(self) -> Spread | None:
        return self.spread(lambda run: run["rps"])

    @property
    def p99(self) -> Spread | None:
        return self.spread(lambda run: run["latency_ms"]["p99"])

    @property
    def pss(self) -> Spread | None:
        return self.spread(lambda run: run["memory_mb"]["pss_mean"])

    @property
    def unfair(self) -> bool:
        return any(run.get("unfair") for run in self.runs)

    @property
    def client_bound(self) -> bool:
        return any(run.get("client_bound") for run in self.runs)

    def median_metrics(self) -> dict[str, Any]:
        """A metrics dict of medians, the shape objectives.* expect."""
        rps, p99, pss = self.rps, self.p99, self.pss
        errors = sorted(run.get("error_rate", 0.0) for run in self.runs)
        return {
            "rps": rps.median if rps else 0.0,
            "latency_ms": {"p99": p99.median if p99 else float("inf")},
            "memory_mb": {"pss_mean": pss.median if pss else float("inf")},
            "error_rate": errors[len(errors) // 2] if errors else 1.0,
        }

    def usable(self, slo: Slo) -> bool:
        return (
            bool(self.runs)
            and len(self.failures) < len(self.runs)
            and not self.unfair
            and objectives.feasible(slo, self.median_metrics())
        )

    def to_dict(self) -> dict[str, Any]:
        def spread(s: Spread | None) -> dict[str, float] | None:
            return None if s is None else {"min": s.low, "median": s.median, "max": s.high}

        return {
            "label": self.candidate.label,
            "trial": self.candidate.trial_number,
            "settings": self.candidate.settings,
            "rps": spread(self.rps),
            "p99_ms": spread(self.p99),
            "pss_mb": spread(self.pss),
            "failures": self.failures,
            "unfair": self.unfair,
            "client_bound": self.client_bound,
            "server": self.candidate.server,
            "latency_ms_median": self.latency_medians(),
        }

    def latency_medians(self) -> dict[str, float]:
        """Median of each latency percentile over the runs, for the report's percentile curve."""
        keys = ("p50", "p90", "p99", "p999")
        return {
            key: statistics.median(run["latency_ms"][key] for run in self.runs)
            for key in keys
            if self.runs and all(key in run.get("latency_ms", {}) for run in self.runs)
        }


def confirm(
    candidates: Sequence[Candidate],
    rounds: int,
    measure: Callable[[Candidate, int], dict[str, Any]],
    on_run: Callable[[Candidate, int, dict[str, Any] | None], None] | None = None,
) -> list[Confirmed]:
    """Measure every candidate once per round, in the same order each round."""
    confirmed = [Confirmed(candidate) for candidate in candidates]
    for round_index in range(rounds):
        for entry in confirmed:
            try:
                run = measure(entry.candidate, round_index)
            except TrialError as exc:
                entry.failures.append(f"{exc.reason}: {str(exc).splitlines()[0]}")
                run = None
            else:
                entry.runs.append(run)
            if on_run:
                on_run(entry.candidate, round_index, run)
    return confirmed


@dataclass(frozen=True)
class Verdict:
    """The recommendation, its baselines, and whether it is better beyond the noise."""

    winner: Confirmed
    default: Confirmed | None
    rule: Confirmed | None
    beats_default: bool
    summary: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "winner": self.winner.candidate.label,
            "winner_trial": self.winner.candidate.trial_number,
            "beats_default_beyond_noise": self.beats_default,
            "summary": self.summary,
        }


def decide(confirmed: Sequence[Confirmed], objective: str, slo: Slo) -> Verdict | None:
    """Pick the usable candidate with the best median, and say whether it beats the default
    beyond the noise (every one of its runs better than every run of the default).

    The median is the best estimate there is, so it picks; the noise verdict tells the reader
    how much to trust the difference (and goes into the emitted file's header).
    """
    by_label = {entry.candidate.label: entry for entry in confirmed}
    default, rule = by_label.get(BASELINE_DEFAULT), by_label.get(BASELINE_RULE)
    usable = [entry for entry in confirmed if entry.usable(slo)]
    if not usable:
        return None
    if objective == "multi":
        return _decide_multi(usable, default, rule, slo)
    higher = objective != "latency"
    key = _ranking_key(objective)
    best = max(usable, key=key) if higher else min(usable, key=key)
    if default is None or not default.usable(slo) or best is default:
        beats = best is not default
        return Verdict(best, default, rule, beats, _summary(best, default, beats, objective))
    best_spread, default_spread = _headline(best, objective), _headline(default, objective)
    assert best_spread is not None and default_spread is not None
    beats = clearly_better(best_spread, default_spread, higher_is_better=higher)
    summary = _summary(best, default, beats, objective) + _tail_warning(best, default)
    return Verdict(best, default, rule, beats, summary)


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


def _decide_multi(
    usable: Sequence[Confirmed], default: Confirmed | None, rule: Confirmed | None, slo: Slo
) -> Verdict:
    """Multi-objective: the documented Pareto pick over the re-measured medians (baselines
    included, so a default that is as fast and leaner wins), with each figure vs the default."""
    best = usable[objectives.pick_pareto_point([e.median_metrics() for e in usable], slo)]
    if default is None or best is default or not default.rps or not best.rps:
        return Verdict(best, default, rule, False, "the server's default config is the pick")
    figures = []
    beats = False
    for name, mine, theirs, higher in (
        ("req/s", best.rps, default.rps, True),
        ("p99", best.p99, default.p99, False),
        ("PSS", best.pss, default.pss, False),
    ):
        if mine is None or theirs is None:
            continue
        better = clearly_better(mine, theirs, higher_is_better=higher)
        worse = clearly_better(theirs, mine, higher_is_better=higher)
        beats = beats or better
        verdict = "better" if better else "worse" if worse else "within noise"
        figures.append(f"{name} x{ratio(mine.median, theirs.median):.2f} ({verdict})")
    summary = (
        f"{best.candidate.label} is the Pareto pick (fast within 5% of the fastest, then "
        f"leanest); vs the default: {', '.join(figures)}"
    )
    return Verdict(best, default, rule, beats, summary)


def _ranking_key(objective: str) -> Callable[[Confirmed], float]:
    if objective == "latency":
        return lambda entry: entry.p99.median if entry.p99 else float("inf")
    return lambda entry: entry.rps.median if entry.rps else 0.0


def _headline(entry: Confirmed, objective: str) -> Spread | None:
    return entry.p99 if objective == "latency" else entry.rps


def _summary(best: Confirmed, default: Confirmed | None, beats: bool, objective: str) -> str:
    unit, name = ("ms", "p99") if objective == "latency" else ("req/s", "throughput")
    if default is None or not default.usable(Slo(max_error_rate=1.0)):
        return f"{best.candidate.label} is the best usable config (the default could not be used)"
    if best is default:
        return "the server's default config measured best; keep it"
    b, d = _headline(best, objective), _headline(default, objective)
    assert b is not None and d is not None
    change = ratio(b.median, d.median)
    ranges = (
        f"{best.candidate.label} {b.low:,.1f}-{b.high:,.1f} {unit} vs default "
        f"{d.low:,.1f}-{d.high:,.1f} {unit} over {len(b.samples)} interleaved rounds"
    )
    if beats:
        label = best.candidate.label
        return f"{label} beats the default beyond the noise ({name} x{change:.2f}; {ranges})"
    return (
        f"{best.candidate.label} has the best median ({name} x{change:.2f} the default's) but "
        f"is not measurably better than the default: the ranges overlap ({ranges}); expect "
        "about the default's figures"
    )
