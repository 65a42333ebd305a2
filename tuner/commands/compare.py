"""`tuner compare APP --servers A,B`: tune each server, then measure them side by side.

Each server gets its own study (named COMPARE-SERVER) with exactly the options of `tuner tune`;
the config files, compare.html, compare.png and compare.json go to one folder.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.apps import Interface, check_app_imports, parse_app
from tuner.commands.setup import STUDY_NAME, build_setup
from tuner.commands.tune import add_tune_options, run_tune
from tuner.errors import ConfigError, TunerError
from tuner.search.storage_url import study_workdir
from tuner.servers import SERVERS, get_adapter, server_names

if TYPE_CHECKING:
    from tuner.search.study import StudySetup
    from tuner.workflow.compare import ServerRow
    from tuner.workflow.tune import TuneOutcome


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "compare", help="tune several servers for an app and measure them side by side"
    )
    parser.add_argument(
        "app", help="WSGI app: module:callable (apps.fib:app) or path (apps/fib.py)"
    )
    parser.add_argument(
        "--servers",
        required=True,
        metavar="LIST",
        help="comma-separated, e.g. " + ",".join(SERVERS) + "; all = every installed one",
    )
    parser.add_argument("--name", default=None, help="default: APP-compare-OBJECTIVE")
    parser.add_argument(
        "--compare-rounds",
        type=int,
        default=3,
        help="interleaved side-by-side rounds of all servers (default 3)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the config files and compare.html (default studies/NAME)",
    )
    add_tune_options(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tuner.report.compare import compare_table
    from tuner.report.html import check_out_dir
    from tuner.report.study_view import PlainListener, print_json
    from tuner.report.terminal import console as stdout_console
    from tuner.report.terminal import print_tables
    from tuner.workflow import compare

    # `all` means every server that can serve the app: its interface decides.
    interface = check_app_imports(parse_app(args.app)).interface
    servers = parse_servers(args.servers, args.front, interface)
    if not args.json:  # on stdout: stderr keeps an error to one line
        print(f"app {args.app}: {interface.describe()}; servers: {', '.join(servers)}", flush=True)
    if args.compare_rounds < 1:
        raise ConfigError(f"--compare-rounds {args.compare_rounds}: expected a whole number >= 1")
    name = args.name or f"{parse_app(args.app).module.rsplit('.', 1)[-1]}-compare-{args.objective}"
    if not STUDY_NAME.match(name):
        raise ConfigError(f"--name {name!r}: use letters, digits, '.', '_' and '-'")
    out = check_out_dir(args.out or study_workdir(args.storage, name))
    # Every server's options are checked before the first one is tuned.
    per_server = {
        s: argparse.Namespace(**{**vars(args), "server": s, "study_name": f"{name}-{s}"})
        for s in servers
    }
    setups = [build_setup(per_server[s]) for s in servers]
    outcomes: dict[str, TuneOutcome] = {}
    for setup in setups:
        server = setup.adapter.name
        artifact = out / setup.adapter.artifact_filename
        outcomes[server] = run_tune(setup, per_server[server], artifact)
    listener = PlainListener({}, quiet=args.json)
    confirmed = compare.side_by_side(
        setups, outcomes, args.compare_rounds, out / "confirm", listener.on_confirm_run
    )
    rows = compare.rows(setups, outcomes, confirmed)
    _write(out, name, setups, rows)
    if args.json:
        print_json({"compare": name, "folder": str(out), "servers": [r.to_json() for r in rows]})
    else:
        print_tables(stdout_console(), [compare_table(rows)])
        Console(stderr=True).print(f"wrote {out / 'compare.html'}", highlight=False)
    unproven = [o.unproven for o in outcomes.values() if o.unproven is not None]
    for kept in unproven:  # its study finished: the file is kept, marked (exit 3)
        Console(stderr=True).print(
            str(kept), style="red", markup=False, highlight=False, soft_wrap=True
        )
    return unproven[0].exit_code if unproven else 0


def parse_servers(
    text: str, front: str | None = None, interface: Interface = Interface.WSGI
) -> list[str]:
    """`a,b,c`, or `all`: every registered server that is installed here and serves apps of
    `interface` (and, without a front, reachable by HTTP: a FastCGI-only server is measured
    only behind one). A named server that cannot serve the app is refused by its setup."""
    if text.strip().lower() == "all":
        return _installed(text, front, interface)
    servers: list[str] = []
    for part in text.split(","):
        name = get_adapter(part).name  # unknown names fail here, listing the valid ones
        if name not in servers:
            servers.append(name)
    if len(servers) < 2:
        raise ConfigError(
            f"--servers {text!r}: name at least two servers, e.g. {','.join(SERVERS)}"
        )
    return servers


def _write(out: Path, name: str, setups: list[StudySetup], rows: list[ServerRow]) -> None:
    from tuner.files import atomic_write
    from tuner.report.compare import compare_chart, compare_table
    from tuner.report.html import render_page, write_report

    chart = compare_chart(rows)
    summary = [
        f"{setups[0].app_text} on server CPUs {list(setups[0].server_cpus)}, load on "
        f"{list(setups[0].load.load_cpus)}; studies: " + ", ".join(s.name for s in setups),
        "`tuner report --study STUDY` shows each study in full.",
    ]
    page = render_page(f"tuner compare: {name}", summary, [chart], [compare_table(rows)])
    write_report(out, "compare.html", page, [chart])
    summary_json = {"compare": name, "servers": [r.to_json() for r in rows]}
    atomic_write(out / "compare.json", (json.dumps(summary_json, indent=1) + "\n").encode())


def _installed(text: str, front: str | None, interface: Interface) -> list[str]:
    servers = []
    for name in server_names():
        try:
            adapter = get_adapter(name)
            adapter.check_installed()
        except TunerError:  # not installed, or refused on this Python
            continue
        if interface not in adapter.interfaces:
            continue
        if front is None and adapter.needs_front():
            continue
        servers.append(name)
    if len(servers) < 2:
        raise ConfigError(
            f"--servers {text!r}: fewer than two servers that serve {interface.describe()} "
            "are installed here"
        )
    return servers
