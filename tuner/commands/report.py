"""`tuner report --study NAME`: an offline HTML report with PNG charts, and a terminal summary."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.search.storage_url import DEFAULT_STORAGE, study_workdir

if TYPE_CHECKING:
    from tuner.report.data import StudyData
    from tuner.report.tables import SettingsText


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("report", help="write an HTML report (and PNGs) of a study")
    parser.add_argument("--study", required=True, help="study name (see `tuner studies`)")
    parser.add_argument("--storage", default=DEFAULT_STORAGE, help="Optuna storage URL")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for report.html and the PNGs (default studies/STUDY/report)",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tuner.report.data import load_study_data
    from tuner.report.figures import study_charts
    from tuner.report.front_page import REPORT_PAGE, front_page, link_to_front
    from tuner.report.front_view import FRONT_PAGE
    from tuner.report.html import check_out_dir, render_page, write_report
    from tuner.report.tables import study_tables, summary_lines
    from tuner.report.terminal import console as stdout_console
    from tuner.report.terminal import print_tables

    out = check_out_dir(args.out or study_workdir(args.storage, args.study) / "report")
    data = load_study_data(args.storage, args.study)
    charts = study_charts(data)
    title = f"tuner report: study {data.name}"
    front = front_page(data, charts)
    links = link_to_front(data) if front else []
    page = render_page(title, summary_lines(data), charts, study_tables(data), links)
    linked = [(FRONT_PAGE, front)] if front else []
    path = write_report(out, REPORT_PAGE, page, charts, linked)
    console = stdout_console()
    for line in summary_lines(data):
        console.print(line, highlight=False)
    print_tables(console, study_tables(data, changed_settings(data)))
    also = f", {FRONT_PAGE}" if front else ""
    Console(stderr=True).print(
        f"wrote {path}{also} and {len(charts)} PNG(s) beside it", highlight=False
    )
    return 0


def changed_settings(data: StudyData) -> SettingsText:
    """In the terminal only what differs from the server's defaults; the HTML has them all."""
    from tuner.report.study_view import describe

    defaults = data.adapter().table.defaults()
    return lambda settings: describe(settings, defaults)
