"""The front's page (front.html) beside a `multi` study's report, and the report's link to it.

Its chart is the report's own front chart (one PNG for both pages), so the page adds no file
a reader could miss; the two pages link to each other by relative names and open offline.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.report.data import StudyData
from tuner.report.figures import FRONT_CHART, Chart
from tuner.report.front_view import (
    FRONT_PAGE,
    front_rows,
    front_summary,
    memory_table,
    points_table,
)
from tuner.report.html import render_page

REPORT_PAGE = "report.html"


def front_page(data: StudyData, charts: Sequence[Chart]) -> str | None:
    """front.html for the study, or None when it has no confirmed front."""
    rows = front_rows(data)
    if not rows:
        return None
    return render_page(
        f"tuner report: study {data.name}, its latency-memory front",
        front_summary(data, rows),
        [chart for chart in charts if chart.name == FRONT_CHART],
        [points_table(data, rows), memory_table(rows)],
        links=[(REPORT_PAGE, f"Back to the report of study {data.name}")],
    )


def link_to_front(data: StudyData) -> list[tuple[str, str]]:
    """The report's link to front.html, where the study has a confirmed front."""
    front = data.result.front
    if front is None:
        return []
    size = len(front.points)
    return [
        (
            FRONT_PAGE,
            f"The confirmed front, {size} point{'s' if size != 1 else ''} to explore: each "
            "point's config, ranges, memory per process and the command that writes it",
        )
    ]
