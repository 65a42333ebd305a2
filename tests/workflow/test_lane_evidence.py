"""What the streams and the probe beside the load ruled out, as the written file's header says
it (pure logic: records and confirmed runs built here)."""

from __future__ import annotations

from dataclasses import replace

from tests.support.measurements import measurement
from tuner.metrics.lanes import ProbeFigures, StreamFigures
from tuner.search.records import TrialRecord
from tuner.workflow.confirm import Candidate, Confirmed
from tuner.workflow.lane_evidence import lane_decisions

CLEAN = StreamFigures("/stream", completed=4, cut=0, open_at_end=2)
CUT = StreamFigures("/stream", completed=2, cut=2, open_at_end=0, cut_causes={"closed early": 2})
HEALTHY = ProbeFigures("/healthz", 8, 0, 0, 1.0, 3)
RESTARTED = ProbeFigures("/healthz", 4, 4, 4, 1.0, 3, {"over 1 s": 4})


def trial(number: int, streams: StreamFigures, probe: ProbeFigures = HEALTHY, **settings: object):
    run = replace(measurement(1000), streams=streams, probe=probe)
    return TrialRecord(number, "COMPLETE", {"workers": 3, "timeout": 30, **settings}, run)


def test_a_setting_every_ruled_out_config_shares_is_named_against_the_pick() -> None:
    records = [trial(1, CLEAN), trial(2, CUT, timeout=1), trial(3, CUT, timeout=1, workers=4)]
    lines = lane_decisions(records, [], {"workers": 3, "timeout": 30})
    assert lines == [
        "timeout = 30: with streams, timeout = 1 cut 4 of 8 streams (4 closed early) in 2 configs"
    ]


def test_a_confirmed_trial_is_one_config_with_its_search_run_and_its_rounds() -> None:
    records = [trial(2, CLEAN, timeout=1)]
    rounds = [replace(measurement(900), streams=s) for s in (CLEAN, CUT)]
    again = Confirmed(Candidate("trial 2", 2, records[0].settings), rounds)
    lines = lane_decisions(records, [again], {"workers": 3, "timeout": 30})
    assert lines == [
        "timeout = 30: with streams, timeout = 1 cut 2 of 12 streams (2 closed early) in 1 config"
    ]


def test_without_a_shared_setting_the_configs_are_named_and_restarts_have_their_line() -> None:
    records = [
        trial(1, CUT, workers=2),
        trial(2, CUT, workers=4),
        trial(3, CLEAN, RESTARTED, workers=1),
    ]
    lines = lane_decisions(records, [], {"workers": 3, "timeout": 30})
    assert lines == [
        "with streams, 2 configs cut 4 of 8 streams (4 closed early) and could not win "
        "(trial 1, trial 2)",
        "workers = 3: with a health probe, workers = 1 would have been restarted in 1 config",
    ]


def test_nothing_ruled_out_says_nothing() -> None:
    assert lane_decisions([trial(1, CLEAN)], [], {"workers": 3}) == []
    assert lane_decisions([TrialRecord(1, "FAIL", {"workers": 3})], [], {"workers": 3}) == []
