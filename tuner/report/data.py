"""A stored study as plain data for reports: setup, trials, Pareto front, importances, result.

Reports read studies through tuner.search's StudyHandle (trials, attrs, front, importances);
this module turns them into the values reports show (the StoredResult of the confirmation
round, a row per stored study), so the figure, table and HTML modules need no string keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tuner.apps import Interface
from tuner.errors import ConfigError
from tuner.search.attrs import StudyAttrs
from tuner.search.objectives import Figures, Objective, objective_named
from tuner.search.records import BASELINE_DEFAULT, BASELINE_RULE, TrialRecord
from tuner.search.storage_url import sqlite_path
from tuner.search.study_handle import StudyHandle, stored_studies
from tuner.servers import ServerAdapter, adapter_serving
from tuner.workflow.confirm import PERCENTILE_KEYS, ConfirmedSummary
from tuner.workflow.pareto_front import ConfirmedFront

Triple = tuple[float, float, float]  # min, median, max


@dataclass(frozen=True)
class Contender:
    """One config of the winner-vs-baselines figures: confirmation medians, or one trial."""

    label: str
    trial: int | None
    rps: Triple | None
    p99_ms: Triple | None
    pss_mb: Triple | None
    latency_ms: dict[str, float]  # p50, p90, p99, p999
    source: str  # "interleaved re-measurement" or "one search trial"


@dataclass(frozen=True)
class StoredVerdict:
    winner: str
    winner_trial: int | None
    beats_default: bool
    summary: str


@dataclass(frozen=True)
class StoredResult:
    """What `tune` kept of its confirmation round and verdict (the study's `result`, written
    by TuneOutcome.to_json), read back."""

    confirmation: list[ConfirmedSummary] = field(default_factory=list)
    verdict: StoredVerdict | None = None
    noise: str = ""
    config_file: str | None = None
    present: bool = False  # False: the study never reached its confirmation round
    front: ConfirmedFront | None = None  # `multi`: the confirmed front

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> StoredResult:
        if not data:
            return cls()
        verdict = data.get("verdict")
        trial = verdict.get("winner_trial") if verdict else None
        return cls(
            confirmation=[ConfirmedSummary.from_json(c) for c in data.get("confirmation") or []],
            verdict=StoredVerdict(
                str(verdict.get("winner")),
                None if trial is None else int(trial),
                bool(verdict.get("beats_default_beyond_noise")),
                str(verdict.get("summary", "")),
            )
            if verdict
            else None,
            noise=str(data.get("noise") or ""),
            config_file=data.get("config_file"),
            present=True,
            front=ConfirmedFront.from_json(data.get("front")),
        )


@dataclass(frozen=True)
class StudyData:
    name: str
    storage_url: str
    setup: dict[str, Any]
    attrs: StudyAttrs
    records: list[TrialRecord]
    pareto: list[int] = field(default_factory=list)
    importances: dict[str, float] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return str(self.setup.get("server", "?"))

    @property
    def interface(self) -> Interface:
        """What the app speaks; a study stored before interfaces were recorded served WSGI."""
        return Interface(str(self.setup.get("interface", Interface.WSGI.value)))

    def adapter(self) -> ServerAdapter:
        """The server's adapter as the study ran it: set up for the app's interface."""
        return adapter_serving(self.server, self.interface)

    @property
    def objective(self) -> Objective:
        return objective_named(str(self.setup.get("objective", "throughput")))

    @cached_property
    def result(self) -> StoredResult:
        return StoredResult.from_json(self.attrs.result)

    @property
    def complete(self) -> list[TrialRecord]:
        return [r for r in self.records if r.measured]

    def ranked(self) -> list[TrialRecord]:
        """Complete trials, best first by the study's objective; unfair and SLO violators last."""
        rank = self.objective.rank
        complete = self.complete
        return rank([r for r in complete if r.feasible], _figures) + rank(
            [r for r in complete if not r.feasible], _figures
        )

    def winner_trial(self) -> int | None:
        verdict = self.result.verdict
        if verdict is not None and verdict.winner_trial is not None:
            return verdict.winner_trial
        best = [r for r in self.ranked() if r.feasible]
        return best[0].number if best else None

    def latest(self) -> TrialRecord | None:
        """The most recent measured trial: its context and load describe the study."""
        complete = self.complete
        return complete[-1] if complete else None


def _figures(record: TrialRecord) -> Figures:
    return record.figures


def check_storage(storage_url: str) -> None:
    """A report must not create an empty database where the user mistyped a path."""
    path = sqlite_path(storage_url)
    if path is not None and not path.is_file():
        raise ConfigError(
            f"--storage {storage_url!r}: no such file {str(path)!r}; "
            "studies are created by `tuner tune`"
        )


def load_study_data(storage_url: str, name: str, *, importances: bool = True) -> StudyData:
    check_storage(storage_url)
    study = StudyHandle.load(storage_url, name)
    attrs = study.attrs()
    setup = dict(attrs.setup or {})
    if not setup:
        raise ConfigError(f"--study {name!r} was not created by `tuner tune` (no setup stored)")
    records = study.records()
    # Importances for high req/s: Optuna's evaluator ranks parameters for *low* values.
    found = study.importances(lambda record: -record.rps) if importances else {}
    return StudyData(name, storage_url, setup, attrs, records, study.pareto_numbers(), found)


def contenders(data: StudyData) -> list[Contender]:
    """The winner and both baselines: confirmation medians if the study got that far."""
    result = data.result
    winner = result.verdict.winner if result.verdict else None
    baselines = (BASELINE_DEFAULT, BASELINE_RULE)
    if result.confirmation:
        chosen = [c for c in result.confirmation if c.label in baselines or c.label == winner]
        searched = [c for c in result.confirmation if c.label not in baselines and c.rps]
        if winner in (None, *baselines) and searched:  # show the best searched config too
            chosen.append(data.objective.rank(searched, ConfirmedSummary.median_figures)[0])
        return [_from_confirmation(c, data) for c in chosen]
    wanted = [r for r in data.complete if r.baseline]
    best = data.winner_trial()
    wanted += [r for r in data.complete if r.number == best and not r.baseline]
    return [_from_trial(r) for r in wanted]


def _from_confirmation(entry: ConfirmedSummary, data: StudyData) -> Contender:
    def triple(spread: Any) -> Triple | None:
        return (spread.low, spread.median, spread.high) if spread else None

    latency = dict(entry.latency_ms_median)
    if not latency:  # studies made before confirmation kept percentiles: use the trial's
        trial = next((r for r in data.complete if r.number == entry.trial), None)
        latency = _percentiles(trial) if trial else {}
    return Contender(
        entry.label,
        entry.trial,
        triple(entry.rps),
        triple(entry.p99_ms),
        triple(entry.pss_mb),
        latency,
        "interleaved re-measurement",
    )


def _from_trial(record: TrialRecord) -> Contender:
    def one(value: float) -> Triple:
        return (value, value, value)

    return Contender(
        record.label,
        record.number,
        one(record.rps),
        one(record.p99_ms),
        one(record.pss_mb),
        _percentiles(record),
        "one search trial",
    )


def _percentiles(record: TrialRecord) -> dict[str, float]:
    if record.measurement is None:
        return {}
    latency = record.measurement.latency.to_json()
    return {key: latency[key] for key in PERCENTILE_KEYS if latency[key] == latency[key]}  # not nan


@dataclass(frozen=True)
class StudyRow:
    """One line of `tuner studies`."""

    study: str
    server: str
    app: str
    objective: str
    trials: int
    completed: int
    best_rps: float | None  # the highest req/s of a trial that could win
    created: str


def list_studies(storage_url: str) -> list[StudyRow]:
    """One row per study: server, app, objective, trials done, best feasible req/s."""
    check_storage(storage_url)
    rows = []
    for stored in stored_studies(storage_url):
        attrs, records = stored.attrs, stored.records
        setup = attrs.setup or {}
        done = [r for r in records if r.measured]
        rows.append(
            StudyRow(
                study=stored.name,
                server=str(setup.get("server", "?")),
                app=str(setup.get("app", "?")),
                objective=str(setup.get("objective", "?")),
                trials=len(records),
                completed=len(done),
                best_rps=max((r.rps for r in done if r.feasible), default=None),
                created="" if attrs.created is None else str(attrs.created),
            )
        )
    return rows


def worker_axes(
    server: str, settings: dict[str, Any], interface: Interface = Interface.WSGI
) -> tuple[int, str]:
    """(worker processes, concurrency model) of a config, for the workers figure."""
    adapter = adapter_serving(server, interface)
    values = {**adapter.table.defaults(), **settings}  # older records may lack new settings
    return adapter.processes(values), adapter.concurrency_model(values)
