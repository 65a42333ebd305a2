"""The `tuner` command: parses arguments, runs one command, and turns errors into exit codes.

This is the only place that maps exceptions to exit codes: a TunerError is one line on stderr
(exit 2 for bad input, 1 for a failed measurement), Ctrl-C is 130, and nothing shows a traceback
unless TUNER_DEBUG=1. `tune` and `compare` also exit 3 when the study finished but its file did
not boot in a clean virtual environment (kept as FILE.unproven:
`tuner.workflow.proven_file.Unproven`).

SIGTERM (and SIGHUP) behave exactly like Ctrl-C: they raise KeyboardInterrupt in the main thread,
so the running server is stopped on the way out, the running trial is recorded as failed, and
the exit code is 128 + the signal number.

SIGUSR2 prints every thread's stack to stderr and the tuner goes on: for a tuner that seems stuck.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from tuner import __version__, interrupts
from tuner.commands import COMMANDS
from tuner.errors import TunerError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem, like every other error."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tuner",
        description="Tunes a Python web server's config (WSGI and ASGI: gunicorn, uWSGI, uvicorn, "
        "granian and 10 more) on your hardware by measuring it under load.",
    )
    parser.add_argument("--version", action="version", version=f"tuner {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in COMMANDS:
        command.register(commands)
    return parser


def first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "unknown error"


def _has_file_descriptor(stream: object) -> bool:
    """faulthandler writes to a file descriptor: not there when stderr is captured in-process."""
    fileno = getattr(stream, "fileno", None)
    try:
        return callable(fileno) and fileno() >= 0
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return False


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    in_main_thread = threading.current_thread() is threading.main_thread()
    if in_main_thread and _has_file_descriptor(sys.stderr):
        faulthandler.register(signal.SIGUSR2, all_threads=True, chain=False)
    with interrupts.stop_signals_interrupt():
        return _handled(args)


def _handled(args: argparse.Namespace) -> int:
    """The command's exit code, every error turned into one line and its code."""
    try:
        return int(args.handler(args))
    except TunerError as exc:
        # One line; the details that follow it (a server's log tail) only with TUNER_DEBUG=1,
        # since the line names the log file.
        text = str(exc) if os.environ.get("TUNER_DEBUG") == "1" else first_line(str(exc))
        print(f"error: {text}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        sig = signal.Signals.__members__.get(str(exc), signal.SIGINT)
        print(f"interrupted ({sig.name})", file=sys.stderr)
        return 128 + sig.value
    except Exception as exc:
        if os.environ.get("TUNER_DEBUG") == "1":
            raise
        print(
            f"error: internal error: {type(exc).__name__}: {first_line(str(exc))} "
            "(TUNER_DEBUG=1 shows the traceback; please report it)",
            file=sys.stderr,
        )
        return 1


def run() -> NoReturn:
    sys.exit(main())
