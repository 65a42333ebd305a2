"""The `tuner` command: parses arguments, runs one command, and turns errors into exit codes.

This is the only place that maps exceptions to exit codes: a TunerError is one line on stderr
(exit 2 for bad input, 1 for a failed measurement), Ctrl-C is 130, and nothing shows a traceback
unless TUNER_DEBUG=1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from tuner import __version__
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
        prog="tuner", description="Find the best gunicorn / uWSGI config by measuring."
    )
    parser.add_argument("--version", action="version", version=f"tuner {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in COMMANDS:
        command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except TunerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if os.environ.get("TUNER_DEBUG") == "1":
            raise
        print(
            f"error: internal error: {type(exc).__name__}: {exc} (TUNER_DEBUG=1 shows the "
            "traceback; please report it)",
            file=sys.stderr,
        )
        return 1


def run() -> NoReturn:
    sys.exit(main())
