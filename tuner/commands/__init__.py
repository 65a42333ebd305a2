"""One module per `tuner` subcommand; each has `register(subparsers)` that sets `handler`."""

from __future__ import annotations

from tuner.commands import bench, compare, emit, load, report, show, studies, tune, workload

COMMANDS = (tune, compare, bench, load, emit, report, studies, show, workload)
