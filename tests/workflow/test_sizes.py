"""tune --for-cpus, the parts that need no server: the count-only space of the other sizes, the
scaled warm start, each size's point and the memory samples the rule is fitted from."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from tests.support.measurements import measurement
from tuner.cli import build_parser
from tuner.commands.setup import build_setup
from tuner.commands.tune_options import TuneOptions
from tuner.search.records import TrialRecord
from tuner.search.space import suggest
from tuner.search.study import StudySetup
from tuner.workflow.confirm import Confirmed, settle
from tuner.workflow.sizes import (
    NoPoint,
    count_space,
    decided_point,
    memory_samples,
    scaled_settings,
    scaled_start,
    size_candidates,
    size_setup,
)

REPO = Path(__file__).resolve().parents[2]
WINNER = {"worker_class": "gthread", "workers": 4, "threads": 8, "keepalive": 5}


def setup(tmp_path: Path, server: str = "gunicorn") -> StudySetup:
    args = build_parser().parse_args(
        ["tune", str(REPO / "apps/hello.py"), "--server", server]
        + ["--storage", f"sqlite:///{tmp_path}/s.db", "--study-name", "ref"]
    )
    return build_setup(TuneOptions.from_args(args))


def record(
    number: int, rps: float, pss: float, baseline: str = "", **settings: object
) -> TrialRecord:
    return TrialRecord(
        number, "COMPLETE", dict(settings), measurement(rps, pss=pss), baseline=baseline
    )


def test_the_other_sizes_search_the_counts_only(tmp_path: Path) -> None:
    ref = setup(tmp_path)
    winner = ref.adapter.resolve(WINNER)
    space = count_space(ref, winner)
    pinned = scaled_start(ref, winner, 1.0)  # every param of the space, as the winner has it
    drawn = [
        ref.adapter.resolve(suggest(space, optuna.trial.FixedTrial({**pinned, **counts}), 1))
        for counts in ({"workers": 2, "threads": 4}, {"workers": 1, "threads": 16})
    ]
    for values in drawn:
        others = {k: v for k, v in values.items() if k not in ("workers", "threads")}
        assert others == {k: v for k, v in winner.items() if k not in ("workers", "threads")}
    assert [(v["workers"], v["threads"]) for v in drawn] == [(2, 4), (1, 16)]
    sized = size_setup(ref, 0.5, winner)
    assert sized.name == "ref-0.5cpus" and sized.limits.cpus == 0.5
    assert not sized.branch_starts and sized.workdir.name == "0.5cpus"


def test_the_warm_start_scales_the_winner_s_processes(tmp_path: Path) -> None:
    ref = setup(tmp_path)
    winner = ref.adapter.resolve(WINNER)
    assert scaled_start(ref, winner, 0.5)["workers"] == 2
    assert scaled_start(ref, winner, 0.5)["threads"] == 8
    assert scaled_start(ref, winner, 0.1)["workers"] == 1


def test_a_one_process_server_s_warm_start_scales_its_threads(tmp_path: Path) -> None:
    ref = setup(tmp_path, "waitress")
    winner = ref.adapter.resolve({"threads": 16})
    assert scaled_start(ref, winner, 0.5)["threads"] == 8
    assert scaled_start(ref, winner, 0.01)["threads"] == 1


def test_a_size_s_candidates_are_the_scaled_counts_then_its_best_other_counts(
    tmp_path: Path,
) -> None:
    ref = setup(tmp_path)
    scaled = scaled_settings(ref, ref.adapter.resolve(WINNER), 0.5)  # 2 workers x 8 threads
    records = [
        record(0, 900.0, 50.0, baseline="2*cpus+1", workers=2),  # the defaults: not a point
        record(1, 650.0, 60.0, **{**WINNER, "workers": 2}),  # the scaled counts: there first
        record(2, 700.0, 70.0, **{**WINNER, "workers": 3, "threads": 4}),
        record(3, 690.0, 70.0, **{**WINNER, "workers": 3, "threads": 4, "keepalive": 2}),
        record(4, 500.0, 40.0, **{**WINNER, "workers": 1}),
        record(5, 400.0, 40.0, **{**WINNER, "workers": 1, "threads": 2}),
    ]
    picked = size_candidates(ref, 0.5, records, scaled)
    assert [c.label for c in picked] == ["default", "trial 2"]  # the scaled ones, its best
    assert (picked[0].settings["workers"], picked[0].settings["threads"]) == (2, 8)
    with pytest.raises(NoPoint, match="no config at 0.5 CPUs passed the SLOs"):
        size_candidates(ref, 0.5, records[:1], scaled)


def _runs(confirmed: list[Confirmed], rps: dict[str, list[float]]) -> list[Confirmed]:
    for entry in confirmed:
        entry.runs += [measurement(value, pss=50.0) for value in rps[entry.candidate.label]]
    return confirmed


def test_a_size_keeps_the_scaled_counts_unless_others_beat_them_beyond_the_noise(
    tmp_path: Path,
) -> None:
    """One run each had put trial 2 first; measured again beside the scaled counts, its 4%
    is inside the noise, so the scaled counts are the point. A config faster in every round
    is kept instead."""
    ref = setup(tmp_path)
    scaled = scaled_settings(ref, ref.adapter.resolve(WINNER), 0.5)
    records = [
        record(1, 650.0, 60.0, **{**WINNER, "workers": 2}),
        record(2, 700.0, 70.0, **{**WINNER, "workers": 3, "threads": 4}),
    ]
    asked: list[list[str]] = []

    def more(entries) -> bool:
        asked.append([e.candidate.label for e in entries])
        _runs(list(entries), {"default": [640, 660, 655, 650], "trial 2": [600, 700, 640, 690]})
        return True

    equal = _runs(
        [Confirmed(c) for c in size_candidates(ref, 0.5, records, scaled)],
        {"default": [650, 600, 700, 640, 660], "trial 2": [700, 590, 690, 660, 650]},
    )
    verdict = settle(equal, ref.objective, ref.slo, equal[0].candidate.settings, more)
    point = decided_point(ref, 0.5, verdict)
    assert (point.processes, point.threads) == (2, 8)
    assert point.decided == (
        "the counts scaled from the reference (2 x 8): no other counts beat them beyond the "
        "noise over 9 interleaved rounds"
    )
    assert asked == [["default", "trial 2"]]  # trial 2's better median: a close call, once
    faster = _runs(
        [Confirmed(c) for c in size_candidates(ref, 0.5, records, scaled)],
        {"default": [650, 600, 700, 640, 660], "trial 2": [760, 700, 800, 750, 770]},
    )
    verdict = settle(faster, ref.objective, ref.slo, faster[0].candidate.settings, more)
    point = decided_point(ref, 0.5, verdict)
    assert (point.processes, point.threads, point.rps) == (3, 4, 760.0)
    assert point.decided == (
        "trial 2 (3 x 4) beat the counts scaled from the reference beyond the noise over 5 "
        "interleaved rounds"
    )
    # Scaled counts whose requests failed cannot be the point: the other is, and it says why.
    failing = [Confirmed(c) for c in size_candidates(ref, 0.5, records, scaled)]
    failing[0].runs += [measurement(650.0, error_rate=0.5) for _ in range(5)]
    _runs(failing[1:], {"trial 2": [600, 590, 610, 600, 605]})
    verdict = settle(failing, ref.objective, ref.slo, failing[0].candidate.settings, more)
    point = decided_point(ref, 0.5, verdict)
    assert point.decided == (
        "trial 2 (3 x 4): the counts scaled from the reference could not be used (failed, or "
        "over an SLO) over 5 interleaved rounds"
    )


def test_memory_samples_come_from_the_winner_s_concurrency_model(tmp_path: Path) -> None:
    ref = setup(tmp_path)
    records = [
        record(0, 1.0, 55.0, workers=2),  # sync workers: another model
        record(1, 1.0, 60.0, **{**WINNER, "workers": 2}),
        record(2, 1.0, 80.0, **{**WINNER, "workers": 3}),
    ]
    assert memory_samples(ref, WINNER, records) == [(2, 60.0), (3, 80.0)]
