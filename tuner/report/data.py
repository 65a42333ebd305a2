"""A stored study as plain data for reports: setup, trials, Pareto front, importances, result.

Reports read studies the way Optuna's own tools do (load_study, param importances); this module
turns them into TrialRecords and dicts so the figure, table and HTML modules need no Optuna.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import optuna

from tuner.errors import ConfigError
from tuner.search.records import BASELINE_DEFAULT, BASELINE_RULE, TrialRecord
from tuner.search.storage_url import sqlite_path
from tuner.search.study import load_existing, storage, to_record
from tuner.servers import get_adapter

# The setting that counts worker processes, per server (the x axis of the workers figure).


@dataclass(frozen=True)
class Contender:
    """One config of the winner-vs-baselines figures: confirmation medians, or one trial."""

    label: str
    trial: int | None
    rps: tuple[float, float, float] | None  # min, median, max
    p99_ms: tuple[float, float, float] | None
    pss_mb: tuple[float, float, float] | None
    latency_ms: dict[str, float]  # p50, p90, p99, p999
    source: str  # "interleaved re-measurement" or "one search trial"


@dataclass(frozen=True)
class StudyData:
    name: str
    storage_url: str
    setup: dict[str, Any]
    attrs: dict[str, Any]
    records: list[TrialRecord]
    pareto: list[int] = field(default_factory=list)
    importances: dict[str, float] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return str(self.setup.get("server", "?"))

    @property
    def objective(self) -> str:
        return str(self.setup.get("objective", "throughput"))

    @property
    def result(self) -> dict[str, Any]:
        return dict(self.attrs.get("result") or {})

    @property
    def complete(self) -> list[TrialRecord]:
        return [r for r in self.records if r.state == "COMPLETE" and r.metrics]

    def ranked(self) -> list[TrialRecord]:
        """Complete trials, best first by the study's objective; SLO violators last."""
        if self.objective == "latency":
            return sorted(self.complete, key=lambda r: (not r.feasible, r.p99_ms))
        return sorted(self.complete, key=lambda r: (not r.feasible, -r.rps))

    def winner_trial(self) -> int | None:
        verdict = self.result.get("verdict") or {}
        if verdict.get("winner_trial") is not None:
            return int(verdict["winner_trial"])
        best = [r for r in self.ranked() if r.feasible]
        return best[0].number if best else None

    def context(self) -> dict[str, Any]:
        """Versions, machine and load of the most recent measured trial."""
        for record in reversed(self.complete):
            return record.metrics
        return {}


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
    study = load_existing(storage_url, name)
    attrs = dict(study.user_attrs)
    setup = dict(attrs.get("setup") or {})
    if not setup:
        raise ConfigError(f"--study {name!r} was not created by `tuner tune` (no setup stored)")
    records = [to_record(t) for t in study.get_trials(deepcopy=False)]
    pareto = []
    if len(study.directions) > 1 and any(r.state == "COMPLETE" for r in records):
        pareto = [t.number for t in study.best_trials]
    found = _importances(study) if importances else {}
    return StudyData(name, storage_url, setup, attrs, records, pareto, found)


def _importances(study: optuna.Study) -> dict[str, float]:
    """Importances for high req/s, by Optuna's default evaluator (PED-ANOVA, no scikit-learn).
    It ranks parameters by how much they matter for *low* target values, hence -req/s."""
    done = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    if len(done) < 2:
        return {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = optuna.importance.get_param_importances(
                study,
                target=lambda t: -float(t.user_attrs.get("metrics", {}).get("rps", 0.0)),
            )
    except (ValueError, RuntimeError):  # e.g. no parameter took two values
        return {}
    return {name: float(value) for name, value in found.items()}


def contenders(data: StudyData) -> list[Contender]:
    """The winner and both baselines: confirmation medians if the study got that far."""
    confirmation = data.result.get("confirmation") or []
    winner = (data.result.get("verdict") or {}).get("winner")
    baselines = (BASELINE_DEFAULT, BASELINE_RULE)
    if confirmation:
        chosen = [c for c in confirmation if c["label"] in baselines or c["label"] == winner]
        searched = [c for c in confirmation if c["label"] not in baselines and c.get("rps")]
        if winner in (None, *baselines) and searched:  # show the best searched config too
            chosen.append(max(searched, key=lambda c: c["rps"]["median"]))
        return [_from_confirmation(c, data) for c in chosen]
    wanted = [r for r in data.complete if r.baseline]
    best = data.winner_trial()
    wanted += [r for r in data.complete if r.number == best and not r.baseline]
    return [_from_trial(r) for r in wanted]


def _from_confirmation(entry: dict[str, Any], data: StudyData) -> Contender:
    def spread(key: str) -> tuple[float, float, float] | None:
        s = entry.get(key)
        return (s["min"], s["median"], s["max"]) if s else None

    latency = dict(entry.get("latency_ms_median") or {})
    if not latency:  # studies made before confirmation kept percentiles: use the trial's
        trial = next((r for r in data.complete if r.number == entry.get("trial")), None)
        latency = _percentiles(trial.metrics) if trial else {}
    return Contender(
        entry["label"],
        entry.get("trial"),
        spread("rps"),
        spread("p99_ms"),
        spread("pss_mb"),
        latency,
        "interleaved re-measurement",
    )


def _from_trial(record: TrialRecord) -> Contender:
    def one(value: float) -> tuple[float, float, float]:
        return (value, value, value)

    return Contender(
        record.label,
        record.number,
        one(record.rps),
        one(record.p99_ms),
        one(record.pss_mb),
        _percentiles(record.metrics),
        "one search trial",
    )


def _percentiles(metrics: dict[str, Any]) -> dict[str, float]:
    latency = metrics.get("latency_ms", {})
    return {key: float(latency[key]) for key in ("p50", "p90", "p99", "p999") if key in latency}


def list_studies(storage_url: str) -> list[dict[str, Any]]:
    """One row per study: server, app, objective, trials done, best feasible req/s."""
    check_storage(storage_url)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = storage(storage_url)
        summaries = optuna.get_all_study_summaries(store, include_best_trial=False)
    rows = []
    for summary in summaries:
        setup = summary.user_attrs.get("setup") or {}
        study_id = store.get_study_id_from_name(summary.study_name)
        records = [to_record(t) for t in store.get_all_trials(study_id, deepcopy=False)]
        done = [r for r in records if r.state == "COMPLETE" and r.metrics]
        best = max((r.rps for r in done if r.feasible), default=None)
        rows.append(
            {
                "study": summary.study_name,
                "server": setup.get("server", "?"),
                "app": setup.get("app", "?"),
                "objective": setup.get("objective", "?"),
                "trials": len(records),
                "completed": len(done),
                "best_rps": best,
                "created": summary.user_attrs.get("created", ""),
            }
        )
    return rows


def worker_axes(server: str, settings: dict[str, Any]) -> tuple[int, str]:
    """(worker processes, concurrency model) of a config, for the workers figure."""
    adapter = get_adapter(server)
    values = {**adapter.table.defaults(), **settings}  # older records may lack new settings
    return int(values[adapter.worker_setting] or 1), adapter.concurrency_model(values)
