"""`tuner tune APP --server S`: search the server's settings, confirm, write the config file."""

from __future__ import annotations

import argparse
import os
import shlex
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.commands.options import (
    add_for_cpus_option,
    add_front_option,
    add_load_options,
    add_server_cpu_option,
    cpu_split,
    parse_for_cpus,
)
from tuner.commands.setup import build_setup
from tuner.errors import ConfigError
from tuner.front import front_of
from tuner.search.objectives import OBJECTIVES
from tuner.search.storage_url import DEFAULT_STORAGE, redact
from tuner.servers import SERVERS

if TYPE_CHECKING:
    from rich.console import Console

    from tuner.report.study_view import PlainListener
    from tuner.search.study import StudySetup
    from tuner.workflow.apprequirements import AppRequirements
    from tuner.workflow.proven_file import Unproven
    from tuner.workflow.tune_steps import TuneOutcome


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("tune", help="find the best server config for an app")
    parser.add_argument(
        "app", help="WSGI app: module:callable (apps.fib:app) or path (apps/fib.py)"
    )
    parser.add_argument(
        "--server", required=True, metavar="NAME", help="one of: " + ", ".join(SERVERS)
    )
    parser.add_argument("--study-name", default=None, help="default: APP-SERVER-OBJECTIVE")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="config file to write (default studies/STUDY/<server config name>)",
    )
    add_tune_options(parser)
    add_for_cpus_option(parser)
    parser.set_defaults(handler=handle)


def add_tune_options(parser: argparse.ArgumentParser) -> None:
    """The search, SLO, storage and load options, shared by `tune` and `compare`."""
    parser.add_argument("--path", default="/", help="URL path to load (default /)")
    parser.add_argument("--trials", type=int, default=30, help="trials to run (default 30)")
    parser.add_argument(
        "--timeout",
        dest="study_timeout",
        type=float,
        default=None,
        metavar="S",
        help="stop searching after S seconds",
    )
    parser.add_argument("--objective", choices=OBJECTIVES, default="throughput")
    parser.add_argument(
        "--slo-p99",
        type=float,
        default=None,
        metavar="MS",
        help="a config whose p99 exceeds this cannot win",
    )
    parser.add_argument(
        "--max-error-rate",
        type=float,
        default=0.01,
        metavar="F",
        help="a config with more errors than this fraction cannot win (0.01)",
    )
    parser.add_argument(
        "--max-memory",
        type=float,
        default=None,
        metavar="MB",
        help="a config whose mean PSS exceeds this cannot win",
    )
    parser.add_argument("--space", type=Path, default=None, help="search space TOML file")
    parser.add_argument("--storage", default=DEFAULT_STORAGE, help="Optuna storage URL")
    parser.add_argument("--top-k", type=int, default=3, help="configs re-measured at the end")
    parser.add_argument(
        "--confirm-rounds",
        type=int,
        default=5,
        help="interleaved re-measurement rounds (default 5: the fewest in which the pairs of "
        "rounds can tell a config from the default at 5%%)",
    )
    parser.add_argument("--seed", type=int, default=None, help="sampler seed")
    parser.add_argument(
        "--no-branch-starts",
        action="store_true",
        help="do not start with one config per concurrency model (gthread, gevent, ...): "
        "only the baselines come before the sampler",
    )
    parser.add_argument(
        "--allow-mixed-hosts",
        action="store_true",
        help="let this host join a shared study measured on different hardware",
    )
    add_requirement_options(parser)
    add_server_cpu_option(parser)
    add_front_option(parser)
    add_load_options(parser, duration_s=5.0, warmup_s=1.0)


def add_app_settings_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--app-settings",
        type=Path,
        default=None,
        metavar="FILE",
        help="the app's own settings, environment variables it reads (tuned with the server's "
        "when they declare a search, and written into the config file); default: "
        "NAME.tuner.toml beside the app's NAME.py, if there is one",
    )


def add_requirement_options(parser: argparse.ArgumentParser) -> None:
    """What the written file says it needs, and the proof that it needs no more (and the app's
    own settings, which the file sets too)."""
    add_app_settings_option(parser)
    parser.add_argument(
        "--app-requirements",
        type=Path,
        default=None,
        metavar="FILE",
        help="the app's own requirements (one package per line), named in the written file "
        "and installed in its clean-venv check (default: a requirements.txt beside the app or "
        "above it up to the project's root, else the root's pyproject.toml dependencies, else "
        "inferred from the app's imports)",
    )
    parser.add_argument(
        "--no-clean-venv-check",
        dest="clean_venv_check",
        action="store_false",
        help="do not boot the written file in a clean virtual environment holding only what "
        "its header names (for machines without access to the package index)",
    )


def app_requirements(setup: StudySetup, args: argparse.Namespace) -> AppRequirements:
    """The app's requirements, found before any measurement (tuner/workflow/apprequirements.py);
    with the clean-venv check on, an import no clean environment can have stops here, and the
    study proves the rest on the default config before its first trial."""
    from tuner.workflow.apprequirements import find_app_requirements

    return find_app_requirements(
        setup.app,
        args.app_requirements,
        server_requirements=setup.adapter.requirements(setup.adapter.resolve({})),
        check_imports=args.clean_venv_check,
    )


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tuner.report.study_view import confirmation_table, print_json

    sizes = for_cpus(args)
    setup = build_setup(args)
    if sizes:
        setup = sized_setup(setup, args, sizes)
    if not args.json:
        # On stdout, where the results go: stderr keeps an error to one line.
        print(f"app {args.app}: {setup.app.interface.describe()}", flush=True)
    out = args.out or setup.workdir / setup.adapter.artifact_filename
    check_writable(out)  # before the study, not after minutes of measuring
    setup.adapter.check_artifact_name(out)
    if out.resolve() == setup.workdir.resolve():
        raise ConfigError(
            f"--out {str(out)!r} is the study's own folder (its trial logs go there); give a "
            f"file name such as {out / setup.adapter.artifact_filename}"
        )
    outcome = run_tune(setup, args, out, sizes)
    if args.json:
        print_json(
            {
                "study": setup.name,
                "storage": setup.storage_url,
                "interface": str(setup.app.interface),
                **outcome.to_json(),
            }
        )
        if outcome.unproven is not None:
            return outcome.unproven.exit_code
        return 0 if outcome.verdict else 1
    console = Console(stderr=True)
    winner = outcome.verdict.winner.candidate.label if outcome.verdict else None
    Console().print(confirmation_table(outcome.confirmed, winner))
    if outcome.verdict is None:
        console.print(
            "[red]no config passed the SLOs in the confirmation rounds; no file written[/]"
        )
        return 1
    if outcome.client_bound:
        console.print(
            f"warning: {outcome.client_bound}", style="yellow", markup=False, highlight=False
        )
    if blocked := outcome.blocked_loop_line():
        console.print(blocked, style="yellow", markup=False, highlight=False)
    console.print(f"verdict: {outcome.verdict.summary}", highlight=False)
    console.print(f"noise: {outcome.noise}", highlight=False)
    console.print(outcome.searched_line(), highlight=False)
    if outcome.unproven is not None:
        print_unproven(console, outcome.unproven, setup, out)
        return outcome.unproven.exit_code
    console.print(f"wrote {outcome.out_path}", highlight=False)
    if outcome.sizing is not None:
        for line in ["sized at boot:", *outcome.sizing.describe_lines()]:
            console.print(line, markup=False, highlight=False)
    if outcome.requirements is not None:
        shown = " ".join(outcome.requirements.lines) or "none"
        console.print(f"{outcome.requirements.describe()}: {shown}", markup=False, highlight=False)
    fronted = front_of(setup.adapter)
    if fronted is not None and outcome.out_path is not None:
        from tuner.front.block import block_path

        console.print(f"wrote {block_path(outcome.out_path, fronted)}", highlight=False)
    return 0


def print_unproven(console: Console, unproven: Unproven, setup: StudySetup, out: Path) -> None:
    """The study's file was kept as FILE.unproven: say so, why, and how to write it for real."""
    storage = setup.storage_url
    again = ["tuner", "emit", "--study", setup.name, "--out", str(out)]
    again += [] if storage == DEFAULT_STORAGE else ["--storage", redact(storage)]
    console.print(str(unproven), style="red", markup=False, highlight=False, soft_wrap=True)
    console.print(
        "name the app's requirements (a requirements.txt beside it or at the project's root, "
        "its pyproject.toml, or --app-requirements FILE), then write the file with: "
        + shlex.join(again),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def check_writable(out: Path) -> None:
    """The config file's folder must exist (or be creatable) and be writable."""
    if out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a folder; give a file name")
    folder = out.resolve().parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"--out {str(out)!r}: cannot create {str(folder)!r} ({exc.strerror})"
        ) from None
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"--out {str(out)!r}: {str(folder)!r} is not writable")


def for_cpus(args: argparse.Namespace) -> tuple[float, ...]:
    """The --for-cpus sizes, checked before anything is measured (empty without it)."""
    if getattr(args, "for_cpus", None) is None:
        return ()
    if args.cpu_limit is not None:
        raise ConfigError(
            f"--for-cpus {args.for_cpus} with --cpu-limit {args.cpu_limit}: each size is its "
            "own CPU limit; give one or the other"
        )
    server_cpus, _ = cpu_split(args)
    return parse_for_cpus(args.for_cpus, server_cpus)


def sized_setup(
    setup: StudySetup, args: argparse.Namespace, sizes: tuple[float, ...]
) -> StudySetup:
    """The reference study of --for-cpus: at the largest size, named apart from a study of
    the server at no limit (`-sized`); the server must write files sized at boot."""
    from dataclasses import replace

    from tuner.machine.limits import Limits, check_cgroups
    from tuner.search.storage_url import study_workdir

    if setup.adapter.sizing_env is None:
        raise unsized([setup.adapter.name], "tune")
    limits = Limits(max(sizes), setup.limits.memory_bytes)
    check_cgroups(limits)
    name = args.study_name or f"{setup.name}-sized"
    workdir = study_workdir(args.storage, name)
    return replace(setup, name=name, workdir=workdir, limits=limits)


def sized_servers() -> list[str]:
    """The servers that write a file sized at boot (--for-cpus)."""
    from tuner.servers import get_adapter

    return [name for name in SERVERS if get_adapter(name).sizing_env]


def unsized(names: list[str], command: str) -> ConfigError:
    """The one line that refuses --for-cpus for servers that write no file sized at boot."""
    which = f"{names[0]} writes" if len(names) == 1 else f"{', '.join(names)} write"
    return ConfigError(
        f"--for-cpus: {which} no file sized at boot yet; servers that do: "
        f"{', '.join(sized_servers())} (or {command} one size with --cpu-limit)"
    )


def run_tune(
    setup: StudySetup, args: argparse.Namespace, out: Path, sizes: tuple[float, ...] = ()
) -> TuneOutcome:
    """Run one study with live progress (plain lines off a terminal or with --json)."""
    from rich.console import Console

    from tuner.report.study_view import LiveListener, PlainListener

    defaults = setup.adapter.table.defaults()
    console = Console(stderr=True)
    live = console.is_terminal and not args.json
    listener = (
        LiveListener(console, defaults, args.trials, setup.objective)
        if live
        else PlainListener(defaults)  # one line per trial on stderr; --json owns stdout
    )
    requirements = app_requirements(setup, args)
    try:
        if isinstance(listener, LiveListener):
            with listener:
                return _tune(setup, args, out, listener, requirements, sizes)
        return _tune(setup, args, out, listener, requirements, sizes)
    except KeyboardInterrupt:
        _print_best_so_far(console, setup)
        raise


def _tune(
    setup: StudySetup,
    args: argparse.Namespace,
    out: Path,
    listener: PlainListener,
    requirements: AppRequirements,
    sizes: tuple[float, ...] = (),
) -> TuneOutcome:
    from tuner.workflow.sizes import measure_sizes
    from tuner.workflow.tune_steps import SizingFor, tune

    # --for-cpus: the other sizes are measured once the reference study has its winner.
    sizing_for: SizingFor | None = (
        partial(measure_sizes, setup, sizes, n_trials=args.trials, listener=listener)
        if sizes
        else None
    )
    return tune(
        setup,
        n_trials=args.trials,
        timeout_s=args.study_timeout,
        top_k=args.top_k,
        confirm_rounds=args.confirm_rounds,
        out_path=out,
        listener=listener,
        on_confirm_run=listener.on_confirm_run,
        app_requirements=requirements,
        check_clean_venv=args.clean_venv_check,
        sizing_for=sizing_for,
    )


def _print_best_so_far(console: Console, setup: StudySetup) -> None:
    from tuner.search.study import load_records

    try:
        _, records = load_records(setup.storage_url, setup.name)
    except ConfigError:
        return
    done = [r for r in records if r.measured]
    usable = setup.objective.rank((r for r in done if r.feasible), lambda r: r.figures)
    console.print(
        f"interrupted: {len(done)} completed trial(s) kept in {setup.storage_url} "
        f"(study {setup.name!r}); re-run the same command to resume"
    )
    if usable:
        best = usable[0]
        console.print(
            f"best so far: {best.label}: {best.rps:,.0f} req/s, p99 {best.p99_ms:.2f} ms",
            highlight=False,
        )
