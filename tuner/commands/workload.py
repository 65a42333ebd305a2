"""`tuner workload from-log ACCESS_LOG`: the traffic an access log records, as a workload file.

The TOML goes to stdout (or atomically to `--out FILE`); what was not replayed, and why, goes
to stderr as one line each, so `> workload.toml` captures only the file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tuner.errors import ConfigError
from tuner.files import atomic_write
from tuner.loadgen.spec import MAX_PATHS
from tuner.workload import AccessLog, LogWorkload, read_access_log, render_toml, workload_from_log
from tuner.workload.from_log import DEFAULT_MAX_VALUES

FORMATS = "the nginx combined or gunicorn access log format"


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("workload", help="make workload files")
    actions = parser.add_subparsers(dest="workload_command", required=True, metavar="{from-log}")
    from_log = actions.add_parser(
        "from-log",
        help="turn an nginx (combined) or gunicorn access log into a workload file",
        description="Turn an access log into a workload file for --workload: each method and "
        "path template (IDs folded) weighted by its requests, replaying the log's concrete "
        "paths. Only GET and OPTIONS by default; HEAD is never replayed.",
    )
    from_log.add_argument("access_log", type=Path, metavar="ACCESS_LOG")
    from_log.add_argument(
        "--sample", type=_count(None), metavar="N", help="keep the N most frequent templates"
    )
    from_log.add_argument(
        "--max-values",
        type=_count(MAX_PATHS),
        default=DEFAULT_MAX_VALUES,
        metavar="N",
        help=f"concrete paths kept per template, most frequent first "
        f"(default {DEFAULT_MAX_VALUES}, at most {MAX_PATHS})",
    )
    from_log.add_argument(
        "--drop-query", action="store_true", help="replay paths without their query strings"
    )
    from_log.add_argument(
        "--unsafe",
        action="store_true",
        help="also replay POST, PUT, PATCH and DELETE, with empty bodies (logs have none)",
    )
    from_log.add_argument("--out", type=Path, metavar="FILE", help="write here, not to stdout")
    from_log.set_defaults(handler=handle)


def _count(most: int | None) -> Callable[[str], int]:
    """An argparse type: an integer from 1 to `most`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1 or (most is not None and value > most):
            bound = f"1-{most}" if most is not None else ">= 1"
            raise argparse.ArgumentTypeError(f"{text!r}: expected an integer {bound}")
        return value

    return parse


def handle(args: argparse.Namespace) -> int:
    path: Path = args.access_log
    log = read_access_log(path, unsafe=args.unsafe, keep_query=not args.drop_query)
    _check_usable(path, log)
    result = workload_from_log(log, sample=args.sample, max_values=args.max_values)
    text = render_toml(result, str(path))
    if args.out is None:
        sys.stdout.write(text)
    else:
        try:
            atomic_write(args.out, text.encode("ascii"))
        except OSError as exc:
            raise ConfigError(f"--out {args.out}: cannot write it ({exc.strerror})") from None
    if log.malformed:
        _note(
            f"warning: {log.malformed} of {log.lines} lines of {path} are not in {FORMATS} "
            f"(first: line {log.first_malformed}); they were left out"
        )
    if log.skipped:
        _note(f"note: not replayed: {_skipped(log)}")
    _note(_summary(result, args.out))
    return 0


def _check_usable(path: Path, log: AccessLog) -> None:
    if log.lines == 0:
        raise ConfigError(f"access log {path}: no lines to read")
    if log.parsed == 0:
        raise ConfigError(
            f"access log {path}: none of its {log.lines} lines is in {FORMATS} "
            f"(first: line {log.first_malformed})"
        )
    if not log.counts:
        raise ConfigError(f"access log {path}: no request to replay; not replayed: {_skipped(log)}")


def _skipped(log: AccessLog) -> str:
    return ", ".join(f"{count} {reason}" for reason, count in log.skipped.most_common())


def _summary(result: LogWorkload, out: Path | None) -> str:
    requests = result.log.requests
    share = 100 * result.covered / requests
    where = f"wrote {out}: " if out is not None else ""
    return (
        f"{where}{len(result.templates)} of {result.found} templates, covering "
        f"{result.covered} of {requests} replayable requests ({share:.1f}%)"
    )


def _note(line: str) -> None:
    print(line, file=sys.stderr)
