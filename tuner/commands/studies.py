"""`tuner studies`: the studies in a storage, with server, app, trials done and best req/s."""

from __future__ import annotations

import argparse

from tuner.search.storage_url import DEFAULT_STORAGE


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("studies", help="list the studies in a storage")
    parser.add_argument("--storage", default=DEFAULT_STORAGE, help="Optuna storage URL")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from tuner.report.data import list_studies
    from tuner.report.tables import studies_table
    from tuner.report.terminal import console as stdout_console
    from tuner.report.terminal import print_tables

    print_tables(stdout_console(), [studies_table(list_studies(args.storage))])
    return 0
