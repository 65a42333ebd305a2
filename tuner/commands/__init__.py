"""One module per `tuner` subcommand; each has `register(subparsers)` that sets `handler`.
`options` and `setup` hold what several of them share (options, a study's setup).

`tuner --help` builds every command's parser, so a command module imports at its top only what
its options need (the standard library, tuner.errors, the server and objective names, CPU
lists). What a command runs with (optuna, rich, matplotlib, psutil, the load generator, the
server adapters) is imported inside the functions that use it: loading all of that took about
half a second before the help could print (tests/commands/test_cli_help.py keeps it out).
"""

from __future__ import annotations

from tuner.commands import bench, compare, emit, load, report, show, studies, tune, workload

COMMANDS = (tune, compare, bench, load, emit, report, studies, show, workload)
