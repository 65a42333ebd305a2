"""The evidence lines written at the top of a config file: pure logic, no servers."""

from __future__ import annotations

from tests.support.measurements import measurement
from tuner.search.records import TrialRecord
from tuner.workflow.provenance import trial_header

SETUP = {"app": "apps/hello.py:app", "server": "gunicorn", "server_cpus": [0], "cpu_model": "x"}
METRICS = measurement(7000.0, p99=0.7, pss=30.0)


def test_a_usable_trial_has_its_single_measurement_and_no_warning() -> None:
    record = TrialRecord(number=4, state="COMPLETE", settings={"workers": 2}, measurement=METRICS)
    lines = trial_header(record, SETUP, study_name="s")
    assert "study 's', trial 4 (complete)" in lines
    assert any("7,000 req/s, p99 0.70 ms, PSS 30.0 MB" in line for line in lines)
    assert not any("WARNING" in line for line in lines)


def test_an_unfair_trial_says_why_it_cannot_be_recommended() -> None:
    reason = "unfair: starved: 48 of 64 connections got no response"
    record = TrialRecord(
        number=5,
        state="COMPLETE",
        settings={},
        measurement=METRICS,
        fail_reason=reason,
        feasible=False,
    )
    lines = trial_header(record, SETUP, study_name="s")
    assert lines[-1] == f"WARNING: this trial cannot be recommended: {reason}"
