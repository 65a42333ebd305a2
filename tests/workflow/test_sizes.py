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
from tuner.workflow.sizes import (
    NoPoint,
    best_point,
    count_space,
    memory_samples,
    scaled_start,
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


def test_a_size_s_point_is_its_best_searched_trial(tmp_path: Path) -> None:
    ref = setup(tmp_path)
    records = [
        record(0, 900.0, 50.0, baseline="2*cpus+1", workers=2),  # the defaults: not a point
        record(1, 500.0, 60.0, **{**WINNER, "workers": 2}),
        record(2, 700.0, 70.0, **{**WINNER, "workers": 3, "threads": 4}),
    ]
    point = best_point(ref, 0.5, records)
    assert (point.cpus, point.processes, point.threads, point.rps) == (0.5, 3, 4, 700.0)
    with pytest.raises(NoPoint, match="no config at 0.5 CPUs passed the SLOs"):
        best_point(ref, 0.5, records[:1])


def test_memory_samples_come_from_the_winner_s_concurrency_model(tmp_path: Path) -> None:
    ref = setup(tmp_path)
    records = [
        record(0, 1.0, 55.0, workers=2),  # sync workers: another model
        record(1, 1.0, 60.0, **{**WINNER, "workers": 2}),
        record(2, 1.0, 80.0, **{**WINNER, "workers": 3}),
    ]
    assert memory_samples(ref, WINNER, records) == [(2, 60.0), (3, 80.0)]
