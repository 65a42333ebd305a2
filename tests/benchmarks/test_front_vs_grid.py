"""benchmarks/front_vs_grid.py without a server: the grid of each server's levers as its
space ranges them, and the plan a dry run prints."""

from __future__ import annotations

import pytest

from benchmarks.front_vs_grid import (
    compare_fronts,
    dominated_both_looks,
    main,
    plan_pair,
    round_ratios,
)
from tests.support.measurements import measurement
from tuner.workflow.confirm import Candidate, Confirmed


def test_gunicorn_grid_is_every_worker_count_sync_and_by_each_thread_doubling() -> None:
    pair = plan_pair("fib", "gunicorn", cpus=2)
    assert pair.levers == {"workers": list(range(1, 10)), "threads": [2, 4, 8, 16, 32]}
    assert len(pair.grid) == 9 * 6  # sync, then gthread with each thread step
    assert {"workers": 3} in pair.grid
    assert {"workers": 3, "worker_class": "gthread", "threads": 16} in pair.grid


def test_configs_the_server_runs_the_same_way_are_one_grid_point() -> None:
    # uWSGI's one thread is its default: "processes alone" and "one thread" are one config.
    pair = plan_pair("iowait", "uwsgi", cpus=1)
    assert pair.levers["threads"] == [1, 2, 4, 8, 16, 32]
    assert len(pair.grid) == 5 * 6
    granian = plan_pair("iowait", "granian", cpus=1)
    assert granian.levers["blocking_threads"] == [0, 1, 2, 4, 8, 32, 128]  # its choices


def test_the_dry_run_prints_the_plan_and_runs_nothing(capsys: pytest.CaptureFixture) -> None:
    assert main(["--dry-run", "--apps", "fib,db", "--servers", "granian", "--rate", "300"]) == 0
    out = capsys.readouterr().out
    assert "rate: 300 req/s (--rate)" in out and "PostgreSQL for apps/db.py" in out
    assert "== fib (apps/fib.py GET /9000) on granian" in out and "== db (" in out
    assert "--objective multi --rate R --trials 30" in out


def test_unknown_apps_and_servers_are_refused_by_name(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["--dry-run", "--apps", "fib,nope"])
    assert "--apps nope: expected some of fib, iowait, db" in capsys.readouterr().err


def _point(label: str, p99: list[float], pss: float) -> Confirmed:
    runs = [measurement(100.0, p99=value, pss=pss) for value in p99]
    return Confirmed(Candidate(label, None, {}), runs, rounds=list(range(len(p99))))


def _more(extra: dict[str, list[float]], asked: list[list[str]]):
    def more(entries) -> None:
        asked.append(sorted(e.candidate.label for e in entries))
        for e in entries:
            pss = e.runs[0].pss_mean_mb
            start = max(e.rounds) + 1
            for index, value in enumerate(extra[e.candidate.label]):
                e.runs.append(measurement(100.0, p99=value, pss=pss))
                e.rounds.append(start + index)

    return more


def test_a_point_dominated_at_the_first_look_only_is_not_called_dominated() -> None:
    # As cheap, and slower in each of the five rounds; over four more, as fast.
    tuner = [_point("tuner 1", [1.6, 1.7, 1.5, 1.8, 1.6], pss=40.0)]
    grid = [_point("grid 1", [0.9, 1.0, 0.8, 1.1, 0.9], pss=40.0)]
    asked: list[list[str]] = []
    more = _more({"tuner 1": [1.0, 0.9, 1.1, 0.8], "grid 1": [1.2, 1.1, 1.0, 1.3]}, asked)
    assert dominated_both_looks(tuner, grid, more) == ([], [])
    assert asked == [["grid 1", "tuner 1"]]


def test_a_point_dominated_at_both_looks_is_named_and_so_is_a_grid_point() -> None:
    tuner = [
        _point("tuner 1", [1.6, 1.7, 1.5, 1.8, 1.6], pss=40.0),
        _point("tuner 2", [0.5, 0.6, 0.5, 0.6, 0.5], pss=80.0),
    ]
    grid = [
        _point("grid 1", [0.9, 1.0, 0.8, 1.1, 0.9], pss=40.0),
        _point("grid 2", [0.9, 1.0, 0.8, 1.1, 0.9], pss=80.0),  # tuner 2 as cheap and faster
    ]
    more = _more(
        {
            "tuner 1": [1.7, 1.6, 1.8, 1.5],
            "tuner 2": [0.6, 0.5, 0.5, 0.6],
            "grid 1": [1.0, 0.9, 1.1, 0.8],
            "grid 2": [1.0, 0.9, 1.1, 0.8],
        },
        [],
    )
    dominated, grid_dominated = dominated_both_looks(tuner, grid, more)
    assert dominated == ["tuner 1 by grid 1"]
    assert grid_dominated == ["grid 2 by tuner 2"]


def test_nothing_is_measured_again_when_no_point_is_dominated() -> None:
    tuner = [_point("tuner 1", [0.9, 1.0, 0.8, 1.1, 0.9], pss=40.0)]
    grid = [_point("grid 1", [1.0, 0.9, 1.1, 0.8, 1.0], pss=40.0)]

    def more(entries) -> None:
        raise AssertionError("measured again for nothing")

    assert dominated_both_looks(tuner, grid, more) == ([], [])


def test_the_ratio_is_also_taken_round_by_round_against_the_medians_reference() -> None:
    # One point each, as heavy; the tuner's tail lower in round 0, higher in rounds 1 and 2.
    tuner = [_point("tuner 1", [1.0, 3.0, 2.0], pss=40.0)]
    grid = [_point("grid 1", [2.0, 2.0, 1.0], pss=40.0)]
    reference = (44.0, 4.0)
    ratios = round_ratios({"tuner": tuner, "grid": grid}, reference)
    assert ratios == pytest.approx([3.0 / 2.0, 1.0 / 2.0, 2.0 / 3.0])
    # A round one point missed is left out.
    tuner[0].runs.pop()
    tuner[0].rounds.pop()
    assert len(round_ratios({"tuner": tuner, "grid": grid}, reference)) == 2


def test_the_ratio_is_taken_against_the_reference_given_and_the_tight_one_beside_it() -> None:
    # One point a front, as heavy, the tuner's tail 10% longer in every round: against the
    # grid's sweep (worst 40 MB at 20 ms, x1.1) that gap is a sliver of the area; against the
    # worst of the two fronts x1.1 it is most of it.
    tuner = [_point("tuner 1", [2.2, 2.2, 2.2], pss=40.0)]
    grid = [_point("grid 1", [2.0, 2.0, 2.0], pss=40.0)]

    def more(entries) -> None:
        raise AssertionError("no pair is dominated beyond the noise here")

    row = compare_fronts({"tuner": tuner, "grid": grid}, {}, more, (44.0, 22.0))
    assert row["reference"] == (44.0, 22.0)
    assert row["ratio"] == pytest.approx((22.0 - 2.2) / (22.0 - 2.0))
    assert row["round_ratios"] == pytest.approx([row["ratio"]] * 3)
    assert row["tight_reference"] == pytest.approx((44.0, 2.42))
    assert row["tight_ratio"] == pytest.approx((2.42 - 2.2) / (2.42 - 2.0))
    assert row["tight_round_ratios"] == pytest.approx([row["tight_ratio"]] * 3)
