"""The deployable file of a server configured only on its command line: a shell launcher.

waitress, uvicorn and daphne read no config file, so the file a user deploys is the command
the tuner measured, `exec`ed by `sh FILE`. The launchers share one shape, built here: the
evidence header and how to run it, every setting with its value and what it does, what a user
edits, the app's own environment, a `cd` into the app's folder (each of these servers imports
the app from its working folder), then the command. An adapter brings only what is its own:
its command line, its install line and its notes.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from tuner.apps import AppRef
from tuner.servers.base import Artifact, ServerAdapter, comment_block, shell_env_lines
from tuner.settings import Value


def command_launcher(
    adapter: ServerAdapter,
    app: AppRef,
    argv: Sequence[str],
    resolved: Mapping[str, Value],
    *,
    header: str,
    env: Mapping[str, str] | None,
    install: str,
    intro: Sequence[str],
    notes: Sequence[str],
    one_line: bool = False,
) -> Artifact:
    """`adapter`'s artifact, run as `sh FILE`: `header` as comments, the run line (with
    `install`, the pip command), the comment lines `intro`, every setting of the adapter's
    table at its `resolved` value with its doc, the comment lines `notes`, `env` exported,
    `cd` into the app's folder, and `exec argv` (argv[0] is the command as a user's PATH
    finds it), one word per line unless `one_line`."""
    lines = ["#!/bin/sh", *comment_block(header, "#")]
    lines.append(f"# Run: sh {adapter.artifact_filename}  (with {install}).")
    lines += [f"# {line}" for line in intro]
    for setting in adapter.table.settings:
        lines.append(f"#   {setting.name} = {resolved[setting.name]}: {setting.doc}")
    lines += [f"# {line}" for line in notes]
    lines += shell_env_lines(env)
    lines.append(f"cd {shlex.quote(app.pythonpath)} || exit 1")
    separator = " " if one_line else " \\\n    "
    lines.append("exec " + separator.join(shlex.quote(arg) for arg in argv))
    return adapter.shell_launcher(lines)
