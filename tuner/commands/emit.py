"""`tuner emit --study NAME [--trial N | --point N] --out FILE`: write the config file of any
trial, of a point of a `multi` study's confirmed front, or of the config the study's `tuner tune`
picked (again, e.g. once a file kept as FILE.unproven has its requirements named).
`tuner emit --study NAME --front` lists the confirmed front's points with the command that
writes each."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.apps import check_app_imports, parse_app
from tuner.commands.tune_options import add_requirement_options
from tuner.errors import ConfigError
from tuner.search.storage_url import DEFAULT_STORAGE
from tuner.servers.appenv import adapter_for_app

if TYPE_CHECKING:
    from tuner.workflow.pareto_front import ConfirmedFront


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("emit", help="write the config file of a study's trial")
    parser.add_argument("--study", required=True, help="study name")
    parser.add_argument(
        "--trial",
        type=int,
        default=None,
        help="trial number (default: the config `tuner tune` picked for the study, with its "
        "header)",
    )
    parser.add_argument(
        "--point",
        type=int,
        default=None,
        metavar="N",
        help="point N of a `multi` study's confirmed front (see --front)",
    )
    parser.add_argument(
        "--front",
        action="store_true",
        help="list the points of a `multi` study's confirmed front (config, p99 and PSS ranges, "
        "rate) with the command that writes each; writes nothing",
    )
    parser.add_argument("--out", type=Path, help="file to write (required unless --front)")
    parser.add_argument("--storage", default=DEFAULT_STORAGE, help="Optuna storage URL")
    add_requirement_options(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tuner.search.study import load_records
    from tuner.workflow.apprequirements import find_app_requirements
    from tuner.workflow.proven_file import BootCheck, Requirements, ServerConfig, write_artifact
    from tuner.workflow.provenance import trial_header

    attrs, records = load_records(args.storage, args.study)
    setup = attrs.setup or {}
    front = _stored_front(args, attrs.result)
    if args.front:
        assert front is not None  # refused by _stored_front otherwise
        for line in front.listing(args.study, args.storage):
            print(line)
        return 0
    if args.out is None:
        raise ConfigError("--out FILE: the file to write (or --front to list the front's points)")
    record = None
    if args.trial is not None:
        record = next((r for r in records if r.number == args.trial), None)
        if record is None or not record.settings:
            numbers = ", ".join(str(r.number) for r in records if r.settings) or "none"
            raise ConfigError(
                f"--trial {args.trial}: study {args.study!r} has no such trial with "
                f"settings; trials: {numbers}"
            )
    pick = attrs.pick
    if record is None and args.point is None and not isinstance(pick, dict):
        raise ConfigError(
            f"--study {args.study!r}: `tuner tune` has not picked a config for it yet (its "
            "confirmation rounds did not finish); give --trial N"
        )
    from tuner.front import behind, front_of

    app = check_app_imports(parse_app(setup["app"]))
    # A study measured behind a front (--front nginx) emits the server file bound as the
    # front reached it, and the front's block beside it.
    adapter = behind(adapter_for_app(setup["server"], app, args.app_settings), setup.get("front"))
    if args.point is not None:
        assert front is not None  # refused by _stored_front otherwise
        settings = adapter.resolve(front.settings_of(args.point))
        header = front.point_header(args.point, args.study, setup)
    elif record is not None:
        settings = adapter.resolve(record.settings)
        header = trial_header(record, setup, study_name=args.study)
    else:
        assert pick is not None  # refused above: no trial asked for and none picked
        settings = adapter.resolve(pick["settings"])
        header = [str(line) for line in pick["header"]]
    # tune --for-cpus kept its rule with the pick: the file is sized at boot again.
    sizing = None
    if record is None and args.point is None and isinstance(pick, dict) and pick.get("sizing"):
        from tuner.machine.sizing import SizingRule

        sizing = SizingRule.from_dict(pick["sizing"])
    found = find_app_requirements(
        app,
        args.app_requirements,
        server_requirements=adapter.requirements(settings),
        check_imports=args.clean_venv_check,
    )
    path = write_artifact(
        ServerConfig(adapter, app, settings),
        header,
        args.out,
        boot=BootCheck(tuple(setup["server_cpus"])),
        requirements=Requirements(
            app_lines=found.lines,
            source=found.describe(),
            check_clean_venv=args.clean_venv_check,
        ),
        sizing=sizing,
    )
    fronted = front_of(adapter)
    if fronted is not None:
        from tuner.front.block import write_front_block

        block = write_front_block(
            fronted, app, settings, path, header, server_cpus=tuple(setup["server_cpus"])
        )
    console = Console(stderr=True)
    # Written on request, but the reader must know why it never won.
    if record is not None and record.fail_reason:
        console.print(f"warning: trial {record.number}: {record.fail_reason}", highlight=False)
    console.print(f"wrote {path}", highlight=False)
    if fronted is not None:
        console.print(f"wrote {block}", highlight=False)
    return 0


def _stored_front(
    args: argparse.Namespace, result: Mapping[str, Any] | None
) -> ConfirmedFront | None:
    """The study's confirmed front when --front or --point asks for it (ConfigError saying why
    there is none); None when neither does."""
    from tuner.workflow.pareto_front import ConfirmedFront

    if not args.front and args.point is None:
        return None
    if args.front and (args.point is not None or args.trial is not None):
        raise ConfigError("--front lists the points and writes nothing: give it alone")
    if args.point is not None and args.trial is not None:
        raise ConfigError("--trial and --point: give one")
    option = "--front" if args.front else f"--point {args.point}"
    front = ConfirmedFront.from_json((result or {}).get("front"))
    if front is None:
        raise ConfigError(
            f"{option}: study {args.study!r} has no confirmed front (only `tuner tune "
            "--objective multi` confirms one, once its confirmation rounds finish); give "
            "--trial N"
        )
    return front
