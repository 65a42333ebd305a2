"""One module per `tuner` subcommand; each has `register(subparsers)` that sets `handler`."""

from __future__ import annotations

from tuner.commands import bench, emit, load, report, show, studies, tune

COMMANDS = (tune, bench, load, emit, report, studies, show)
