"""`tuner show --study NAME`: a study's best trials and Pareto front in the terminal."""

from __future__ import annotations

import argparse

from tuner.commands.report import changed_settings
from tuner.search.storage_url import DEFAULT_STORAGE

SHOWN = 5


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("show", help="print a study's best trials and Pareto front")
    parser.add_argument("--study", required=True, help="study name (see `tuner studies`)")
    parser.add_argument("--storage", default=DEFAULT_STORAGE, help="Optuna storage URL")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from tuner.report.data import load_study_data
    from tuner.report.tables import (
        confirmation,
        confirmed_front,
        pareto_front,
        summary_lines,
        top_trials,
    )
    from tuner.report.terminal import console as stdout_console
    from tuner.report.terminal import print_tables

    data = load_study_data(args.storage, args.study, importances=False)
    settings_text = changed_settings(data)
    tables = [top_trials(data, settings_text, limit=SHOWN)]
    if data.result.front is not None:  # `multi`: the front as confirmed
        tables.append(confirmed_front(data, settings_text))
    elif data.pareto:
        tables.append(pareto_front(data, settings_text))
    if data.result.present:
        tables.append(confirmation(data))
    console = stdout_console()
    for line in summary_lines(data):
        console.print(line, highlight=False)
    print_tables(console, tables)
    return 0
