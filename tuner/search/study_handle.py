"""An open study as the layers above `search/` see it: its trials as TrialRecords, its stored
attrs, its Pareto front and its parameter importances, and the few things they write to it.

The one door to Optuna for `workflow/`, `report/` and `commands/`: they hold a StudyHandle and
never an Optuna object, so a change of sampler, storage or Optuna version stays in `search/`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.errors import ConfigError, InvalidMeasurement
from tuner.metrics.measurement import Measurement
from tuner.search import objectives
from tuner.search.attrs import StudyAttrs, TrialAttrs
from tuner.search.pruning import measured_noise
from tuner.search.records import TrialRecord, TrialStatus
from tuner.search.storage import fail_stale_trials, quiet_optuna, storage
from tuner.search.storage_url import redact


@dataclass(frozen=True)
class StudyHandle:
    """One study, opened (tuner.search.study.open_study) or loaded (`load`)."""

    # Read by tuner.search alone (and tests that poke Optuna): the layers above use the methods.
    optuna_study: optuna.Study

    @classmethod
    def load(cls, storage_url: str, name: str) -> StudyHandle:
        """An existing study (ConfigError naming the known ones if there is none such)."""
        quiet_optuna()
        store = storage(storage_url)
        names = [summary.study_name for summary in optuna.get_all_study_summaries(store)]
        if name not in names:
            known = ", ".join(names) or "none"
            raise ConfigError(
                f"--study {name!r}: no such study in {redact(storage_url)}; studies: {known}"
            )
        study = optuna.load_study(study_name=name, storage=store)
        fail_stale_trials(study)
        return cls(study)

    @property
    def name(self) -> str:
        return self.optuna_study.study_name

    def records(self, *, queued: bool = True) -> list[TrialRecord]:
        """Every trial, in order; without the `queued` ones not yet run (branch starts past a
        small --trials): those are the plan, not results."""
        records = [to_record(t) for t in self.optuna_study.get_trials(deepcopy=False)]
        return [r for r in records if queued or r.state is not TrialStatus.WAITING]

    def noise(self) -> float:
        """How much one run of a config can be off, as the study measured it (never less than
        the pruner's floor: tuner.search.pruning)."""
        return measured_noise(self.optuna_study)

    def attrs(self) -> StudyAttrs:
        """What the study keeps, as stored now (trials add CPU probes as they run)."""
        return StudyAttrs.read(self.optuna_study.user_attrs)

    def keep(self, attrs: StudyAttrs) -> None:
        """Store the fields of `attrs` that are set; the others stay as they were."""
        attrs.write(self.optuna_study)

    def queue(
        self,
        params: Mapping[str, Any],
        attrs: TrialAttrs | None = None,
        *,
        skip_if_exists: bool = False,
    ) -> None:
        """Queue a trial of `params` (as the space names them) before the sampler's next;
        `skip_if_exists`: not when a trial of the same params is queued or ran already."""
        self.optuna_study.enqueue_trial(
            dict(params),
            user_attrs=None if attrs is None else attrs.stored(),
            skip_if_exists=skip_if_exists,
        )

    def pareto_numbers(self) -> list[int]:
        """The trials on the Pareto front of a study with several directions ([] otherwise)."""
        if len(self.optuna_study.directions) < 2:
            return []
        return [t.number for t in self.optuna_study.best_trials]

    def importances(self, target: Callable[[TrialRecord], float]) -> dict[str, float]:
        """How much each parameter matters for low `target` values, by Optuna's default
        evaluator (PED-ANOVA, no scikit-learn); {} below two complete trials, or when no
        parameter took two values."""
        done = self.optuna_study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if len(done) < 2:
            return {}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found = optuna.importance.get_param_importances(
                    self.optuna_study, target=lambda t: target(to_record(t))
                )
        except (ValueError, RuntimeError):
            return {}
        return {name: float(value) for name, value in found.items()}

    def save_result(self, result: Mapping[str, Any]) -> None:
        """Keep a JSON-able result (confirmation rounds, noise) with the study for reports."""
        self.keep(StudyAttrs(result=json.loads(json.dumps(result))))

    def save_pick(
        self,
        settings: Mapping[str, Any],
        header: Sequence[str],
        sizing: Mapping[str, Any] | None = None,
    ) -> None:
        """Keep the chosen config and its file's header (and the rule of a file sized at boot,
        from tune --for-cpus), for `tuner emit --study` to write again."""
        pick = {"settings": dict(settings), "header": list(header)}
        if sizing is not None:
            pick["sizing"] = dict(sizing)
        self.keep(StudyAttrs(pick=json.loads(json.dumps(pick))))


@dataclass(frozen=True)
class StoredStudy:
    """One study of a storage, as `tuner studies` lists it."""

    name: str
    attrs: StudyAttrs
    records: list[TrialRecord]


def stored_studies(storage_url: str) -> list[StoredStudy]:
    """Every study in the storage, with its attrs and trials (without loading each study)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = storage(storage_url)
        summaries = optuna.get_all_study_summaries(store, include_best_trial=False)
    found = []
    for summary in summaries:
        study_id = store.get_study_id_from_name(summary.study_name)
        trials = store.get_all_trials(study_id, deepcopy=False)
        found.append(
            StoredStudy(
                summary.study_name,
                StudyAttrs.read(summary.user_attrs),
                [to_record(t) for t in trials],
            )
        )
    return found


def to_record(frozen: FrozenTrial) -> TrialRecord:
    """An Optuna trial as the tuner's record of it."""
    stored = TrialAttrs.read(frozen.user_attrs)
    fail_reason = "" if stored.fail_reason is None else str(stored.fail_reason)
    if frozen.state.name == "FAIL" and not fail_reason:
        # Only the heartbeat check fails a trial without a reason: its tuner died mid-trial.
        host = stored.host or {}
        where = f" on {host.get('host')} (pid {host.get('pid')})" if host else ""
        fail_reason = (
            f"abandoned: the tuner{where} stopped sending heartbeats during this trial "
            "(killed, or its host died)"
        )
    return TrialRecord(
        number=frozen.number,
        state=TrialStatus(frozen.state.name),
        settings=dict(stored.settings or {}),
        measurement=stored_measurement(stored.metrics),
        context=dict(stored.context or _old_context(stored.metrics)),
        values=tuple(frozen.values or ()),
        baseline="" if stored.baseline is None else str(stored.baseline),
        fail_reason=fail_reason,
        feasible=objectives.satisfied(stored.constraints or []),
        covers_for=stored.covers_for,
        duplicate_of=stored.duplicate_of,
        branch_start=bool(stored.branch_start),
        carried=stored.carried,
        shape_of=stored.shape_of,
    )


# Run context that trials of version-1 studies kept inside their metrics.
_CONTEXT_KEYS = ("server", "app", "server_cpus", "load_cpus", "versions", "machine")


def stored_measurement(metrics: object) -> Measurement | None:
    """A trial's figures, in whichever version they were stored (see Measurement)."""
    if not isinstance(metrics, Mapping) or not metrics:
        return None
    try:
        return Measurement.from_json(metrics)
    except InvalidMeasurement:
        return None  # a damaged record: shown as unmeasured, never ranked


def _old_context(metrics: object) -> dict[str, Any]:
    if not isinstance(metrics, Mapping):
        return {}
    return {key: metrics[key] for key in _CONTEXT_KEYS if key in metrics}
