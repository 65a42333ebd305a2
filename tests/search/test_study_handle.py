"""The StudyHandle is what the layers above search/ know of a study: its trials as records,
its attrs, its front and importances, and what they write to it (no Optuna object)."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from tuner.errors import ConfigError
from tuner.search.attrs import StudyAttrs, TrialAttrs
from tuner.search.records import TrialRecord, TrialStatus
from tuner.search.study_handle import StudyHandle, stored_studies

optuna.logging.set_verbosity(optuna.logging.ERROR)


def _handle(*directions: str) -> StudyHandle:
    return StudyHandle(optuna.create_study(directions=list(directions or ["maximize"])))


def test_records_keep_the_state_and_leave_queued_trials_out_when_asked() -> None:
    study = _handle()
    done = study.optuna_study.ask()
    TrialAttrs(settings={"workers": 2}).write(done)
    study.optuna_study.tell(done, 10.0)
    failed = study.optuna_study.ask()
    TrialAttrs(fail_reason="server_start: boom").write(failed)
    study.optuna_study.tell(failed, state=optuna.trial.TrialState.FAIL)
    study.queue({"workers": 3}, TrialAttrs(baseline="default"))

    records = study.records()
    assert [r.state for r in records] == [
        TrialStatus.COMPLETE,
        TrialStatus.FAIL,
        TrialStatus.WAITING,
    ]
    assert records[0].settings == {"workers": 2} and records[0].values == (10.0,)
    assert records[1].fail_reason == "server_start: boom"
    assert records[2].baseline == "default"
    assert [r.number for r in study.records(queued=False)] == [0, 1]


def test_a_failed_trial_without_a_reason_was_abandoned_by_its_tuner() -> None:
    study = _handle()
    trial = study.optuna_study.ask()
    TrialAttrs(host={"host": "box", "pid": 7}).write(trial)
    study.optuna_study.tell(trial, state=optuna.trial.TrialState.FAIL)
    reason = study.records()[0].fail_reason
    assert reason.startswith("abandoned: the tuner on box (pid 7) stopped sending heartbeats")


def test_queue_skips_params_queued_already_only_when_told() -> None:
    study = _handle()
    study.queue({"workers": 3})
    study.queue({"workers": 3}, skip_if_exists=True)
    assert len(study.records()) == 1
    study.queue({"workers": 3})
    assert len(study.records()) == 2
    queued = study.optuna_study.get_trials(deepcopy=False)[0]
    assert queued.system_attrs["fixed_params"] == {"workers": 3}
    assert queued.user_attrs == {}


def test_the_front_is_empty_for_one_direction_and_the_pareto_set_for_several() -> None:
    single = _handle("maximize")
    single.optuna_study.add_trial(optuna.trial.create_trial(values=[1.0]))
    assert single.pareto_numbers() == []

    several = _handle("maximize", "minimize")
    assert several.pareto_numbers() == []  # nothing measured yet
    for values in ([100.0, 5.0], [90.0, 1.0], [80.0, 6.0]):  # the last is beaten by both
        several.optuna_study.add_trial(optuna.trial.create_trial(values=values))
    assert several.pareto_numbers() == [0, 1]


def test_attrs_kept_read_back_and_the_fields_left_none_stay() -> None:
    study = _handle()
    study.keep(StudyAttrs(created="2026-01-01T00:00:00+00:00", cpu_probe_ms=[[0, 1.5]]))
    study.keep(StudyAttrs(cpu_probe_ms=[[0, 1.5], [5, 1.6]]))
    attrs = study.attrs()
    assert attrs.created == "2026-01-01T00:00:00+00:00"
    assert attrs.cpu_probe_ms == [[0, 1.5], [5, 1.6]]


def test_the_pick_and_the_result_are_stored_as_json() -> None:
    study = _handle()
    study.save_pick({"workers": 3}, ("# line",), {"processes": [1.0, 2.0]})
    study.save_result({"verdict": None, "rounds": (1, 2)})
    attrs = study.attrs()
    assert attrs.pick == {
        "settings": {"workers": 3},
        "header": ["# line"],
        "sizing": {"processes": [1.0, 2.0]},
    }
    assert attrs.result == {"verdict": None, "rounds": [1, 2]}
    study.save_pick({"workers": 4}, ())
    assert study.attrs().pick == {"settings": {"workers": 4}, "header": []}


def test_importances_rank_the_parameter_the_target_follows() -> None:
    study = _handle("minimize")
    assert study.importances(lambda r: float(r.settings["x"])) == {}  # fewer than two trials
    sampler = optuna.samplers.RandomSampler(seed=1)
    study.optuna_study.sampler = sampler
    for _ in range(20):
        trial = study.optuna_study.ask()
        x, y = trial.suggest_float("x", 0, 1), trial.suggest_float("y", 0, 1)
        TrialAttrs(settings={"x": x, "y": y}).write(trial)
        study.optuna_study.tell(trial, x)
    found = study.importances(lambda r: float(r.settings["x"]))
    assert set(found) == {"x", "y"} and found["x"] > found["y"]


def test_load_names_the_studies_there_are(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    made = optuna.create_study(study_name="mine", storage=url)
    StudyAttrs(created="today").write(made)
    made.enqueue_trial({"workers": 1})
    with pytest.raises(ConfigError, match="no such study .*; studies: mine"):
        StudyHandle.load(url, "theirs")
    loaded = StudyHandle.load(url, "mine")
    assert loaded.name == "mine" and loaded.attrs().created == "today"
    [listed] = stored_studies(url)
    assert (listed.name, listed.attrs.created) == ("mine", "today")
    assert [r.state for r in listed.records] == [TrialStatus.WAITING]


def test_a_record_reads_a_state_name_as_its_status() -> None:
    record = TrialRecord(4, "PRUNED", {})  # type: ignore[arg-type]
    assert record.state is TrialStatus.PRUNED
    assert record.state == "PRUNED" and record.state.lower() == "pruned"
    assert f"{record.state}" == "PRUNED" and json.dumps(record.state) == '"PRUNED"'
    with pytest.raises(ValueError):
        TrialRecord(4, "DONE", {})  # type: ignore[arg-type]
