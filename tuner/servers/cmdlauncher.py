"""The deployable file of a server configured only on its command line: a shell launcher.

waitress, uvicorn and daphne read no config file, so the file a user deploys is the command
the tuner measured, `exec`ed by `sh FILE`. The launchers share one shape, built here: the
evidence header and how to run it, every setting with its value and what it does, what a user
edits, the app's own environment, a `cd` into the app's folder (each of these servers imports
the app from its working folder), then the command. An adapter brings only what is its own:
its command line, its install line and its notes.

A file sized at boot (`sized_command_files`) is that launcher with its counts read from
variables, the measured ones as their defaults, and beside it a small Python launcher that
reads the box's limits, sets the variables from the sizing rule and runs the shell launcher:
one implementation for every server configured on its command line, in the style of uWSGI's
launcher beside its ini.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from tuner.servers.base import (
    Artifact,
    ArtifactRequest,
    ServerAdapter,
    SizedRequest,
    comment_block,
    shell_env_lines,
    sizing_code,
)
from tuner.settings import Setting, Value

# A count no setting is tuned to: rendered in its place, it shows where the count's digits are
# in the setting's command-line words.
_PROBE = 7770001


def command_launcher(
    adapter: ServerAdapter,
    request: ArtifactRequest,
    argv: Sequence[str],
    resolved: Mapping[str, Value],
    *,
    install: str,
    intro: Sequence[str],
    notes: Sequence[str],
    one_line: bool = False,
    from_env: Mapping[str, str] | None = None,
) -> Artifact:
    """`adapter`'s artifact, run as `sh FILE`: the request's header as comments, the run line
    (with `install`, the pip command), the comment lines `intro`, every setting of the
    adapter's table at its `resolved` value with its doc, the comment lines `notes`, the
    request's env exported, `cd` into the app's folder, and `exec argv` (argv[0] is the
    command as a user's PATH finds it, the last word the app), one flag with its value per
    line unless `one_line`. `from_env` maps settings (the counts of a sized file) to the
    variable each reads its value from, its resolved value the default."""
    lines = ["#!/bin/sh", *comment_block(request.header, "#")]
    lines.append(f"# Run: sh {adapter.artifact_filename}  (with {install}).")
    lines += [f"# {line}" for line in intro]
    for setting in adapter.table.settings:
        lines.append(f"#   {setting.name} = {resolved[setting.name]}: {setting.doc}")
    lines += [f"# {line}" for line in notes]
    lines += shell_env_lines(request.env)
    lines.append(f"cd {shlex.quote(request.app.pythonpath)} || exit 1")
    words = [shlex.quote(arg) for arg in argv]
    for name, variable in (from_env or {}).items():
        setting = adapter.table.by_name[name]
        plain = setting.argv(resolved[name])
        at = _find(list(argv), plain, name)
        words[at : at + len(plain)] = _reading(setting, resolved[name], variable)
    groups = [words] if one_line else _flag_lines(argv, words)
    lines.append("exec " + " \\\n    ".join(" ".join(group) for group in groups))
    return adapter.shell_launcher(lines)


def _flag_lines(argv: Sequence[str], words: Sequence[str]) -> list[list[str]]:
    """The shell `words` of `argv` in lines as people write a command: the command alone,
    then each flag with its value (`--host 127.0.0.1`), and the last word (the app) alone.
    A word is a flag's value when it follows a lone `--flag` and does not begin with `-`."""
    groups = [[words[0]]]
    last = len(argv) - 1
    for i in range(1, len(argv)):
        previous = argv[i - 1]
        lone_flag = previous.startswith("-") and "=" not in previous and len(groups[-1]) == 1
        is_value = 1 < i < last and lone_flag and not argv[i].startswith("-")
        if is_value:
            groups[-1].append(words[i])
        else:
            groups.append([words[i]])
    return groups


def _find(argv: list[str], part: list[str], name: str) -> int:
    """Where the words `part` of setting `name` are in `argv` (exactly once)."""
    found = [
        i for i in range(len(argv) - len(part) + 1) if part and argv[i : i + len(part)] == part
    ]
    if len(found) != 1:
        raise ValueError(f"{name}'s words {part} are not once in the command {argv}")
    return found[0]


def _reading(setting: Setting, value: Value, variable: str) -> list[str]:
    """`setting`'s shell words at `value`, with its count read from `variable` instead
    (`--threads="${WAITRESS_THREADS:-4}"`), `value` where it is unset or empty."""
    plain, probe = setting.argv(value), setting.argv(_PROBE)
    if len(plain) != len(probe):
        raise ValueError(f"{setting.name}: its words at {value} and {_PROBE} differ in number")
    words = []
    for word, probed in zip(plain, probe, strict=True):
        before, found, after = probed.partition(str(_PROBE))
        if word == probed:
            words.append(shlex.quote(word))
            continue
        if not found or word != f"{before}{value}{after}":
            raise ValueError(f"{setting.name}: its word {word!r} holds no plain count")
        read = f'"${{{variable}:-{value}}}"'
        words.append(
            (shlex.quote(before) if before else "") + read + (shlex.quote(after) if after else "")
        )
    return words


def sized_check_argv(path: Path) -> list[str]:
    """The check of the Python launcher at `path` (the shell file's `sh -n` does not read
    Python): it compiles; booting it is the rest of the check."""
    return [sys.executable, "-m", "py_compile", str(path)]


def sized_launcher_name(adapter: ServerAdapter) -> str:
    """The Python launcher beside a sized shell launcher: uwsgi_sized.py's style."""
    return f"{adapter.name}_sized.py"


# The Python launcher's program, after the sizing code: the counts go into the variables the
# shell launcher beside it reads, and it becomes that launcher (same PID, same signals).
_SIZED_RUN = """{announce}
{exports}
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), {script!r})
os.execvp("sh", ["sh", script])
"""


def sized_command_files(
    adapter: ServerAdapter,
    request: SizedRequest,
    variables: Mapping[str, str],
    render: Callable[[ArtifactRequest, Mapping[str, str]], Artifact],
    line_variable: str | None = None,
) -> tuple[Artifact, ...]:
    """(the Python launcher, the shell launcher it runs, named `request.filename`): the
    launcher reads the box's limits, prints the `sizing:` line and runs `sh FILENAME` with each
    count in its variable (`variables`: "processes" / "threads" -> the variable the shell
    launcher reads it from, the measured count when unset). `render(request, from_env)` is the
    adapter's shell launcher for `request` with the count settings of `from_env` read from
    their variables. The override variable `request.rule.env` is one of them: set by hand,
    the sizing code takes it as the count, and the shell launcher alone reads it too.
    `line_variable`: the line is handed on in that variable, for the server's own start to
    log, instead of printed here (a server that empties a log file on its stderr as it
    starts would erase it)."""
    model = adapter.process_model
    setting = {"processes": model.processes, "threads": model.threads}
    from_env = {str(setting[count]): variable for count, variable in variables.items()}
    name = sized_launcher_name(adapter)
    read = ", ".join(f"{count} from {variable}" for count, variable in variables.items())
    note = (
        f"Counts: {read}; {name}, beside this file, sets them from this box's limits "
        "(unset, the counts below are the measured ones)."
    )
    header, filename = request.header, request.filename
    script = render(replace(request, header=f"{header}\n{note}" if header else note), from_env)
    script = replace(script, filename=filename, run_hint=f"sh {filename}")
    exports = [
        f"os.environ[{variable!r}] = str(SIZED[{count!r}])" for count, variable in variables.items()
    ]
    lines = [
        "#!/usr/bin/env python3",
        *comment_block(header, "#"),
        f"# Run: python3 {name}  (it runs sh {filename}, beside it, with the counts it",
        "# computes for this box).",
        *sizing_code(request.rule),
        *_SIZED_RUN.format(
            announce=(
                f'os.environ[{line_variable!r}] = SIZED["line"]'
                if line_variable
                else 'import sys\n\nprint(SIZED["line"], file=sys.stderr, flush=True)'
            ),
            exports="\n".join(exports),
            script=filename,
        ).splitlines(),
    ]
    launcher = Artifact(name, "\n".join(lines) + "\n", run_hint=f"python3 {name}", mode=0o755)
    return (launcher, script)
