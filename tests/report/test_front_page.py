"""The front's page as pure logic: a constructed `multi` study (confirmed front, search trials
with per-process memory), no server, no Optuna study. The figures are chosen so that a wrong
knee, mark, order, breakdown or command changes what is checked."""

from __future__ import annotations

from dataclasses import replace

from tests.support.measurements import measurement
from tuner.metrics.measurement import Measurement, Memory
from tuner.report.data import StudyData
from tuner.report.figures import FRONT_CHART, study_charts
from tuner.report.front_page import front_page, link_to_front
from tuner.report.front_view import (
    FRONT_PAGE,
    FrontRow,
    front_rows,
    front_summary,
    knee_number,
    memory_table,
    points_table,
)
from tuner.report.tables import confirmed_front
from tuner.search.attrs import StudyAttrs
from tuner.search.objectives import Slo
from tuner.search.records import TrialRecord
from tuner.workflow.confirm import Candidate, Confirmed
from tuner.workflow.pareto_front import decide_front

RATE = 400.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Three configs clearly apart on both figures: one worker is cheap and slow, four are dear
# and fast; two sit between, nearest the ideal corner once both axes are scaled: the knee.
CONFIGS = {
    "default": (0, {}, [40, 41, 39, 42, 40], [50, 50, 51, 50, 50]),
    "trial 2": (2, {"workers": 2}, [12, 13, 12, 13, 12], [80, 81, 80, 80, 81]),
    "trial 4": (4, {"workers": 4}, [10, 11, 10, 11, 10], [150, 150, 151, 150, 150]),
}


def _runs(p99: list[float], pss: list[float]) -> list[Measurement]:
    return [measurement(RATE, p99=a, pss=b, target_rps=RATE) for a, b in zip(p99, pss, strict=True)]


def _entries() -> list[Confirmed]:
    return [
        Confirmed(Candidate(label, trial, settings), runs=_runs(p99, pss))
        for label, (trial, settings, p99, pss) in CONFIGS.items()
    ]


def _trial(number: int, settings: dict, memory: Memory | None) -> TrialRecord:
    measured = replace(measurement(RATE, p99=20.0, pss=90.0, target_rps=RATE), memory=memory)
    return TrialRecord(number, "COMPLETE", settings, measured)


def _study(
    slo: Slo | None = None, storage: str = "sqlite:///studies/tuner.db", extra_rounds: str = ""
) -> StudyData:
    decided = decide_front(_entries(), slo or Slo(), rate_rps=RATE, rate_source="--rate")
    assert decided is not None
    front = replace(decided.front, extra_rounds=extra_rounds)
    records = [
        # The default's trial: one process, measured before the breakdown was kept.
        _trial(0, {}, Memory(50.0, 51.0, 40.0, 60.0, 4, 1)),
        # Two workers: a master of 20 MB, 60 MB of workers, 30 MB saved by sharing.
        _trial(2, {"workers": 2}, Memory(80.0, 81.0, 30.0, 140.0, 4, 3, None, 20.0, 30.0, 3)),
        _trial(4, {"workers": 4}, Memory(150.0, 151.0, 30.0, 300.0, 4, 5, None, 22.0, 80.0, 5)),
        _trial(5, {"workers": 3}, None),  # a trial off the front: part of the cloud only
    ]
    attrs = StudyAttrs(result={"front": front.to_json()})
    setup = {"server": "gunicorn", "app": "apps/hello.py", "objective": "multi"}
    return StudyData("s1", storage, setup, attrs, records)


def test_each_point_has_its_changes_marks_and_command_cheapest_first() -> None:
    data = _study()
    rows = front_rows(data)
    assert [row.point.summary.label for row in rows] == ["default", "trial 2", "trial 4"]
    assert [row.marks for row in rows] == ["", "knee, written", ""]
    assert [row.changes for row in rows] == ["(server defaults)", "workers=2", "workers=4"]
    assert rows[2].command == "tuner emit --study s1 --point 3 --out FILE"
    assert [(row.processes, row.threads) for row in rows] == [(1, 1), (2, 1), (4, 1)]
    table = points_table(data, rows)
    assert table.title == "Points of the confirmed front, cheapest first at 400 req/s"
    assert table.rows[1][4:7] == ("12.00 / 12.00 / 13.00", "80.0 / 80.0 / 81.0", "400 / 400 / 400")
    assert table.rows[1][-1] == "tuner emit --study s1 --point 2 --out FILE"
    assert "offered rate: --rate" in table.notes


def test_the_knee_is_marked_apart_from_the_point_a_limit_wrote() -> None:
    data = _study(Slo(max_memory_mb=200))  # the fastest within 200 MB: four workers
    assert data.result.front is not None and knee_number(data.result.front) == 2
    assert [row.marks for row in front_rows(data)] == ["", "knee", "written"]


def test_memory_is_broken_down_per_process_or_said_missing() -> None:
    rows = memory_table(front_rows(_study())).rows
    assert rows[0][3:] == ("50.0", "n/a", "n/a", "n/a", "n/a")  # not kept: none invented
    # 80 MB: a 20 MB master and 60 MB of workers, two of them; 30 MB saved by sharing.
    assert rows[1][2:] == ("2 x 1", "80.0", "20.0", "60.0", "30.0", "30.0")
    assert rows[2][5:] == ("128.0", "32.0", "80.0")


def test_the_chart_plots_the_front_over_the_cloud_and_both_pages_share_it() -> None:
    data = _study()
    charts = study_charts(data)
    front = [chart for chart in charts if chart.name == FRONT_CHART]
    assert len(front) == 1 and front[0].png.startswith(PNG_SIGNATURE)
    assert front[0].title == "Latency-memory front at 400 req/s offered"
    assert "pareto" not in [chart.name for chart in charts]  # req/s against p99 is gone
    page = front_page(data, charts)
    assert page is not None
    assert page.count("<img ") == 1 and 'src="data:image/png;base64,' in page
    for number in (1, 2, 3):
        assert f"tuner emit --study s1 --point {number} --out FILE" in page
    assert "knee, written" in page and "Memory per process" in page
    assert 'href="report.html"' in page and "http://" not in page and "https://" not in page
    assert link_to_front(data)[0][0] == FRONT_PAGE


def test_the_page_says_which_configs_had_more_rounds_before_the_front_was_decided() -> None:
    said = "after 4 more rounds of trial 2, trial 4 and the default: trial 2 stands"
    summary = front_summary(*_pages(_study(extra_rounds=said)))
    assert f"The front was decided again {said}." in summary
    assert not any("decided again" in line for line in front_summary(*_pages(_study())))
    table = confirmed_front(_study(extra_rounds=said), lambda settings: str(settings))
    assert f"the front was decided again {said}" in table.notes


def _pages(data: StudyData) -> tuple[StudyData, list[FrontRow]]:
    return data, front_rows(data)


def test_a_study_without_a_confirmed_front_has_no_front_page_but_its_chart() -> None:
    data = replace(_study(), attrs=StudyAttrs(result=None), pareto=[2, 4])
    assert front_rows(data) == [] and link_to_front(data) == []
    assert front_page(data, study_charts(data)) is None
    chart = next(c for c in study_charts(data) if c.name == FRONT_CHART)
    assert "no confirmed front" in chart.caption
    assert chart.title == "Latency-memory front at 400 req/s offered"  # the trials' rate
