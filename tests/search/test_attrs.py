"""The typed user attrs keep the keys that stored studies, and optuna-dashboard, read."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import fields
from pathlib import Path

import optuna

from tuner.search.attrs import StudyAttrs, TrialAttrs

FIXTURE = Path(__file__).resolve().parents[1] / "support" / "fixtures" / "study_v1.db"

# The stored keys are a file format: renaming one loses it in every existing study.
TRIAL_KEYS = {
    "settings", "host", "metrics", "context", "constraints", "fail_reason", "fail_detail",
    "baseline", "baseline_settings", "covers_for", "duplicate_of", "branch_start", "carried",
    "shape_of",
}  # fmt: skip
STUDY_KEYS = {"setup", "hardware", "created", "cpu_probe_ms", "result", "pick", "offered_rate"}


def test_the_stored_keys_are_the_fields() -> None:
    assert {f.name for f in fields(TrialAttrs)} == TRIAL_KEYS
    assert {f.name for f in fields(StudyAttrs)} == STUDY_KEYS


def _stored(table: str, owner: str) -> list[dict[str, object]]:
    with sqlite3.connect(FIXTURE) as db:
        rows = db.execute(f"SELECT {owner}, key, value_json FROM {table}").fetchall()
    by_owner: dict[int, dict[str, object]] = {}
    for number, key, value in rows:
        by_owner.setdefault(number, {})[key] = json.loads(value)
    return list(by_owner.values())


def test_a_version_1_study_reads_back_whole() -> None:
    trials = _stored("trial_user_attributes", "trial_id")
    studies = _stored("study_user_attributes", "study_id")
    assert trials and studies
    assert all(TrialAttrs.read(stored).stored() == stored for stored in trials)
    assert all(StudyAttrs.read(stored).stored() == stored for stored in studies)


def test_a_write_stores_only_the_fields_set() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study()
    trial = study.ask()
    TrialAttrs(settings={"workers": 3}, host={"pid": 1}).write(trial)
    TrialAttrs(fail_reason="pruned: behind").write(trial)
    StudyAttrs(created="2026-01-01T00:00:00+00:00").write(study)
    assert trial.user_attrs == {
        "settings": {"workers": 3},
        "host": {"pid": 1},
        "fail_reason": "pruned: behind",
    }
    read = TrialAttrs.read(trial.user_attrs)
    assert read.settings == {"workers": 3} and read.metrics is None
    assert study.user_attrs == {"created": "2026-01-01T00:00:00+00:00"}
