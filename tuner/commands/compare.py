"""`tuner compare APP --servers A,B`: tune each server, then measure them side by side.

Each server gets its own study (named COMPARE-SERVER) with exactly the options of `tuner tune`;
the config files, compare.html, compare.png and compare.json go to one folder. By default the
studies race (tuner/workflow/race_runner.py) within `--budget` minutes; `--full` runs each one
whole.
With `--for-cpus`, each server's study runs at the largest size and its written file is sized
at boot, as `tune --for-cpus` writes it (tuner/workflow/sizes.py).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.apps import Interface, check_app_imports, parse_app
from tuner.commands.compare_sizes import SizedFor, sizable
from tuner.commands.options import add_for_cpus_option
from tuner.commands.setup import STUDY_NAME, build_setup
from tuner.commands.tune import run_tune
from tuner.commands.tune_options import TuneOptions, add_tune_options, for_cpus
from tuner.errors import ConfigError, TunerError
from tuner.search.objectives import objective_named
from tuner.search.storage_url import study_workdir
from tuner.servers import SERVERS, get_adapter, server_names

# The default --budget: a raced `--servers all` (the ten WSGI servers) on one app fits in it on
# a 2-CPU machine at the default windows (docs/pages/commands/compare.md, "The budget").
DEFAULT_BUDGET_MIN = 14.0

if TYPE_CHECKING:
    from tuner.report.compare_page import Split
    from tuner.report.study_view import PlainListener
    from tuner.report.tables import Table
    from tuner.search.study import StudySetup
    from tuner.workflow.race_runner import RaceOptions, RaceResult
    from tuner.workflow.side_by_side import ServerRow
    from tuner.workflow.tune_steps import TuneOutcome


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "compare", help="tune several servers for an app and measure them side by side"
    )
    parser.add_argument(
        "app",
        nargs="+",
        metavar="APP",
        help="the app, WSGI or ASGI: module:callable (apps.fib:app) or path (apps/fib.py); or a "
        "project's two entry points, its WSGI one and its ASGI one (mysite/wsgi.py:application "
        "mysite/asgi.py:application), to rank the servers of both side by side",
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
        default=5,
        help="interleaved side-by-side rounds of all servers (default 5: the fewest in which "
        "the pairs of rounds can tell two servers apart at 5%%)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="MINUTES",
        help=f"minutes for the whole raced comparison (default {DEFAULT_BUDGET_MIN:g})",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="a full study per server (--trials each), no race: every server's own optimum",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the config files and compare.html (default studies/NAME)",
    )
    add_tune_options(parser)
    add_for_cpus_option(parser)
    parser.set_defaults(handler=handle)


@dataclass(frozen=True)
class CompareOptions:
    """`compare`'s options, read from the command line once; `study` is every server's study
    options, each taken with its own app, server and name (`TuneOptions.for_study`)."""

    apps: tuple[str, ...]
    servers: str
    name: str | None
    compare_rounds: int
    budget_min: float | None
    full: bool
    out: Path | None
    study: TuneOptions

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CompareOptions:
        return cls(
            apps=tuple(args.app),
            servers=args.servers,
            name=args.name,
            compare_rounds=args.compare_rounds,
            budget_min=args.budget,
            full=args.full,
            out=args.out,
            study=TuneOptions.of_study(args, app="", server="", study_name=None),
        )


def handle(args: argparse.Namespace) -> int:
    from tuner.report.html import check_out_dir
    from tuner.report.study_view import PlainListener

    options = CompareOptions.from_args(args)
    shared = options.study
    sizes = for_cpus(shared)  # before the app is imported: a bad size is one line
    entries, chosen, sized = _chosen(options, sizes)
    if options.compare_rounds < 1:
        raise ConfigError(
            f"--compare-rounds {options.compare_rounds}: expected a whole number >= 1"
        )
    if objective_named(shared.objective).trade_off and shared.load.rate_rps is None:
        # `tune` derives one from the default's capacity; the servers compared share one.
        raise ConfigError(
            "--objective multi: give --rate R, the rate every server's front is measured at"
        )
    budget_s = budget_seconds(options.budget_min, options.full)
    modules = "-".join(parse_app(e.text).module.rsplit(".", 1)[-1] for e in entries)
    # A sized compare's studies run under a CPU limit: apart from those of one without.
    name = options.name or f"{modules}-compare-{shared.objective}" + ("-sized" if sizes else "")
    if not STUDY_NAME.match(name):
        raise ConfigError(f"--name {name!r}: use letters, digits, '.', '_' and '-'")
    out = check_out_dir(options.out or study_workdir(shared.storage, name))
    # Every contender's options are checked before the first one is tuned.
    per_server = {
        c.name: shared.for_study(c.entry.text, c.server, f"{name}-{c.name}") for c in chosen
    }
    setups = _setups(chosen, per_server, sizes)
    listener = PlainListener({}, quiet=shared.json)
    race: RaceResult | None = None
    if options.full:
        outcomes, rows = _full(setups, per_server, options.compare_rounds, out, listener, sizes)
    else:
        race_options = _race_options(setups, per_server, budget_s, options, sizes)
        outcomes, rows, race = _race(setups, race_options, shared.json, out, listener)
    result = CompareResult(name, out, setups, rows, race, budget_s, sized)
    _write(result)
    _show(result, shared.json)
    return _unproven_exit(outcomes)


def _chosen(
    options: CompareOptions, sizes: tuple[float, ...]
) -> tuple[list[EntryPoint], list[Contender], SizedFor]:
    """The entry points and the contenders, said on stdout (stderr keeps an error to one line).
    `all` means every server that can serve the app: its interface decides (and with
    --for-cpus, whether it writes a file sized at boot)."""
    entries = entry_points(options.apps)
    servers = parse_servers(options.servers, options.study.front, [e.interface for e in entries])
    sized = sizable(servers, options.servers, sizes)
    chosen = contenders(sized.kept(servers), entries, options.servers)
    if not options.study.json:
        found = "; ".join(f"app {e.text}: {e.interface.describe()}" for e in entries)
        print(f"{found}; servers: {', '.join(c.name for c in chosen)}", flush=True)
        if sized.left_out:
            print(sized.left_out_line(), flush=True)
    return entries, chosen, sized


def _setups(
    chosen: Sequence[Contender], per_server: dict[str, TuneOptions], sizes: tuple[float, ...]
) -> list[StudySetup]:
    """Each contender's study setup; with --for-cpus, at the largest size, as `tune
    --for-cpus` runs its reference."""
    from tuner.workflow.sizes import sized_setup

    setups = [
        replace(build_setup(per_server[c.name]), entrant="" if c.name == c.server else c.name)
        for c in chosen
    ]
    if sizes:
        setups = [sized_setup(s, sizes, per_server[s.contender].study_name) for s in setups]
    return setups


def _full(
    setups: list[StudySetup],
    per_server: dict[str, TuneOptions],
    compare_rounds: int,
    out: Path,
    listener: PlainListener,
    sizes: tuple[float, ...],
) -> tuple[dict[str, TuneOutcome], list[ServerRow]]:
    """--full: every server's whole study, then the side-by-side rounds."""
    from tuner.workflow import side_by_side

    outcomes: dict[str, TuneOutcome] = {}
    for setup in setups:
        outcomes[setup.contender] = run_tune(
            setup, per_server[setup.contender], setup.file_in(out), sizes
        )
    confirmed = side_by_side.side_by_side(
        setups, outcomes, compare_rounds, out / "confirm", listener.on_confirm_run
    )
    return outcomes, side_by_side.rows(setups, outcomes, confirmed)


def _show(result: CompareResult, as_json: bool) -> None:
    """The result on stdout: one JSON object, or the tables (and where the page went)."""
    from rich.console import Console

    from tuner.report.compare_page import sized_tables
    from tuner.report.study_view import print_json
    from tuner.report.terminal import console as stdout_console
    from tuner.report.terminal import print_tables

    if as_json:
        print_json(
            {
                "compare": result.name,
                "folder": str(result.out),
                "race": result.race_json,
                **result.sized.to_json(),
                "servers": [r.to_json() for r in result.rows],
            }
        )
        return
    print_tables(stdout_console(), [result.table(), *sized_tables(result.rows)])
    Console(stderr=True).print(f"wrote {result.out / 'compare.html'}", highlight=False)


def _unproven_exit(outcomes: dict[str, TuneOutcome]) -> int:
    """Each study that finished with its file kept unproven says so; exit 3 if any did."""
    from rich.console import Console

    unproven = [o.unproven for o in outcomes.values() if o.unproven is not None]
    for kept in unproven:  # its study finished: the file is kept, marked (exit 3)
        Console(stderr=True).print(
            str(kept), style="red", markup=False, highlight=False, soft_wrap=True
        )
    return unproven[0].exit_code if unproven else 0


def budget_seconds(minutes: float | None, full: bool) -> float:
    """--budget in seconds (the default without it); refused with --full, which has none."""
    if minutes is None:
        return DEFAULT_BUDGET_MIN * 60
    if full:
        raise ConfigError(
            f"--budget {minutes:g} with --full: a full compare runs --trials per server and has "
            "no budget; drop one of them"
        )
    if not math.isfinite(minutes) or minutes <= 0:
        raise ConfigError(f"--budget {minutes:g}: expected minutes > 0, e.g. --budget 10")
    return minutes * 60


def _race_options(
    setups: list[StudySetup],
    per_server: dict[str, TuneOptions],
    budget_s: float,
    options: CompareOptions,
    sizes: tuple[float, ...],
) -> RaceOptions:
    """The race's options, each server's app requirements found before anything is measured."""
    from tuner.workflow.apprequirements import study_requirements
    from tuner.workflow.race_runner import RaceOptions

    shared = options.study
    return RaceOptions(
        budget_s=budget_s,
        max_trials=shared.trials,
        top_k=shared.top_k,
        final_rounds=options.compare_rounds,
        app_requirements={
            s.contender: study_requirements(
                s, per_server[s.contender].app_requirements, shared.clean_venv_check
            )
            for s in setups
        },
        check_clean_venv=shared.clean_venv_check,
        sizes=sizes,
    )


def _race(
    setups: list[StudySetup],
    options: RaceOptions,
    quiet: bool,
    out: Path,
    listener: PlainListener,
) -> tuple[dict[str, TuneOutcome], list[ServerRow], RaceResult]:
    """The raced comparison: the race, its final rounds, the rows."""
    from tuner.report.study_view import PlainListener
    from tuner.workflow import race_runner, side_by_side

    def say(line: str) -> None:
        if not quiet:  # on stdout, as the app's line: stderr keeps an error to one line
            print(line, flush=True)

    listeners = {
        s.contender: PlainListener(s.adapter.table.defaults(), quiet=quiet) for s in setups
    }
    result = race_runner.run_race(setups, listeners, options, say, listener.on_confirm_run)
    say("race: final rounds: " + ", ".join(result.finalists) + " and every server's default")
    final = race_runner.run_final(result, options, out, listener.on_confirm_run)
    return final.outcomes, side_by_side.race_rows(result, final), result


@dataclass(frozen=True)
class EntryPoint:
    """An app as given on the command line, and the interface it was found to speak."""

    text: str
    interface: Interface


@dataclass(frozen=True)
class Contender:
    """One server serving one entry point: a row of the comparison, a lane of its race."""

    name: str  # the server's, or SERVER-asgi beside the same server's WSGI row
    server: str
    entry: EntryPoint


def entry_points(texts: Sequence[str]) -> list[EntryPoint]:
    """The app, or a project's WSGI and ASGI entry points (one each), imported and inspected."""
    if len(texts) > 2:
        raise ConfigError(
            f"{' '.join(texts)}: give one app, or a project's two entry points (its WSGI one "
            "and its ASGI one)"
        )
    entries = [EntryPoint(text, check_app_imports(parse_app(text)).interface) for text in texts]
    if len(entries) == 2 and entries[0].interface is entries[1].interface:
        raise ConfigError(
            f"{texts[0]} and {texts[1]}: both are {entries[0].interface.describe()}; two entry "
            "points must be one project's WSGI one and its ASGI one"
        )
    return entries


def contenders(servers: Sequence[str], entries: Sequence[EntryPoint], text: str) -> list[Contender]:
    """Each server with each entry point it can serve: a server that serves both (gunicorn,
    granian) is two contenders, SERVER and SERVER-asgi. One that serves none keeps the first
    entry, so its setup refuses it in one line naming the servers that can."""
    chosen: list[Contender] = []
    for server in servers:
        interfaces = get_adapter(server).interfaces
        served = [e for e in entries if e.interface in interfaces] or list(entries[:1])
        for entry in served:
            both = len(served) > 1 and entry.interface is not Interface.WSGI
            name = f"{server}-{entry.interface.value}" if both else server
            chosen.append(Contender(name, server, entry))
    if len(chosen) < 2 and len(entries) > 1:
        wanted = {entry.interface for entry in entries}
        serve_all = [name for name in SERVERS if wanted <= set(get_adapter(name).interfaces)]
        raise ConfigError(
            f"--servers {text!r}: only {chosen[0].name} serves these entry points; name "
            f"another server, e.g. one that serves both ({' or '.join(serve_all)})"
        )
    if len(chosen) < 2:
        raise ConfigError(
            f"--servers {text!r}: name at least two servers, e.g. {','.join(SERVERS)}"
        )
    return chosen


def parse_servers(
    text: str, front: str | None = None, interfaces: Sequence[Interface] = (Interface.WSGI,)
) -> list[str]:
    """`a,b,c`, or `all`: every registered server that is installed here and serves apps of one
    of `interfaces` (and, without a front, reachable by HTTP: a FastCGI-only server is measured
    only behind one). A named server that cannot serve the app is refused by its setup."""
    if text.strip().lower() == "all":
        return _installed(text, front, interfaces)
    servers: list[str] = []
    for part in text.split(","):
        name = get_adapter(part).name  # unknown names fail here, listing the valid ones
        if name not in servers:
            servers.append(name)
    return servers


def _connections(setups: Sequence[StudySetup]) -> int | None:
    """The closed loop's connections (None for an open loop: its ceiling is the rate)."""
    load = setups[0].load
    return None if load.open_loop else load.connections


@dataclass(frozen=True)
class CompareResult:
    """What a compare measured and where it goes: the page, the JSON and the terminal."""

    name: str
    out: Path
    setups: list[StudySetup]
    rows: list[ServerRow]
    race: RaceResult | None  # None for --full
    budget_s: float
    sized: SizedFor

    @property
    def race_json(self) -> dict[str, object] | None:
        return self.race.to_json(self.budget_s) if self.race is not None else None

    @property
    def noise(self) -> float | None:
        """The noise the race measured (None for --full: the ranges alone then call a tie)."""
        return self.race.noise if self.race is not None else None

    def table(self) -> Table:
        from tuner.report.compare_page import compare_table

        setups = self.setups
        return compare_table(self.rows, load_split(setups), self.noise, _connections(setups))


def _write(result: CompareResult) -> None:
    from tuner.files import atomic_write
    from tuner.report.compare_page import compare_chart, sized_tables
    from tuner.report.html import render_page, write_report

    out, name, setups, rows, sized = (
        result.out,
        result.name,
        result.setups,
        result.rows,
        result.sized,
    )

    chart = compare_chart(rows)
    apps = list(dict.fromkeys(s.app_text for s in setups))
    summary = [
        f"{' and '.join(apps)} on server CPUs {list(setups[0].server_cpus)}, load on "
        f"{list(setups[0].load.load_cpus)}; studies: " + ", ".join(s.name for s in setups),
        "`tuner report --study STUDY` shows each study in full.",
    ]
    if len(apps) > 1:  # a project's two entry points: say which row serves which
        summary.append(
            "Entry points: " + "; ".join(f"{s.contender} serves {s.app_text}" for s in setups)
        )
    summary += sized.summary()
    tables = [result.table(), *sized_tables(rows)]
    page = render_page(f"tuner compare: {name}", summary, [chart], tables)
    write_report(out, "compare.html", page, [chart])
    summary_json = {
        "compare": name,
        "race": result.race_json,
        **sized.to_json(),
        "servers": [r.to_json() for r in rows],
    }
    atomic_write(out / "compare.json", (json.dumps(summary_json, indent=1) + "\n").encode())


def load_split(setups: Sequence[StudySetup]) -> Split:
    """The load CPUs every server's rounds had, and this machine's CPUs to spare."""
    from tuner.machine.cpus import spare_cpus
    from tuner.report.compare_page import Split

    load = setups[0].load.load_cpus
    return Split(len(load), spare_cpus(setups[0].server_cpus, load))


def _installed(text: str, front: str | None, interfaces: Sequence[Interface]) -> list[str]:
    servers = []
    for name in server_names():
        try:
            adapter = get_adapter(name)
            adapter.check_installed()
        except TunerError:  # not installed, or refused on this Python
            continue
        if not set(interfaces) & set(adapter.interfaces):
            continue
        if front is None and adapter.needs_front():
            continue
        servers.append(name)
    if len(servers) < 2:
        served = " or ".join(i.describe() for i in interfaces)
        raise ConfigError(
            f"--servers {text!r}: fewer than two servers that serve {served} are installed here"
        )
    return servers
