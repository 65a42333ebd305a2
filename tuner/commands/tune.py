"""`tuner tune APP --server S`: search the server's settings, confirm, write the config file."""

from __future__ import annotations

import argparse
import os
import shlex
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.commands.options import add_for_cpus_option
from tuner.commands.setup import build_setup
from tuner.commands.tune_options import TuneOptions, add_tune_options, for_cpus
from tuner.errors import ConfigError
from tuner.front import front_of
from tuner.search.storage_url import DEFAULT_STORAGE, redact
from tuner.servers import SERVERS

if TYPE_CHECKING:
    from rich.console import Console

    from tuner.search.study import StudySetup
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


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tuner.report.study_view import confirmation_table, print_json
    from tuner.workflow.sizes import sized_setup

    options = TuneOptions.from_args(args)
    sizes = for_cpus(options)
    setup = build_setup(options)
    if sizes:
        setup = sized_setup(setup, sizes, options.study_name)
    if not options.json:
        # On stdout, where the results go: stderr keeps an error to one line.
        print(f"app {options.app}: {setup.app.interface.describe()}", flush=True)
    out = options.out or setup.workdir / setup.adapter.artifact_filename
    check_writable(out)  # before the study, not after minutes of measuring
    setup.adapter.check_artifact_name(out)
    if out.resolve() == setup.workdir.resolve():
        raise ConfigError(
            f"--out {str(out)!r} is the study's own folder (its trial logs go there); give a "
            f"file name such as {out / setup.adapter.artifact_filename}"
        )
    outcome = run_tune(setup, options, out, sizes)
    if options.json:
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
    if outcome.front is not None:
        for line in outcome.front.listing(setup.name, setup.storage_url):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
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


def run_tune(
    setup: StudySetup, options: TuneOptions, out: Path, sizes: tuple[float, ...] = ()
) -> TuneOutcome:
    """Run one study with live progress (plain lines off a terminal or with --json)."""
    from rich.console import Console

    from tuner.report.study_view import LiveListener, PlainListener
    from tuner.workflow.apprequirements import study_requirements
    from tuner.workflow.tune_steps import tune

    defaults = setup.adapter.table.defaults()
    console = Console(stderr=True)
    live = console.is_terminal and not options.json
    listener = (
        LiveListener(console, defaults, options.trials, setup.objective)
        if live
        else PlainListener(defaults)  # one line per trial on stderr; --json owns stdout
    )
    requirements = study_requirements(setup, options.app_requirements, options.clean_venv_check)
    study = partial(
        tune,
        setup,
        options.run(sizes),
        out_path=out,
        listener=listener,
        on_confirm_run=listener.on_confirm_run,
        app_requirements=requirements,
    )
    try:
        if isinstance(listener, LiveListener):
            with listener:
                return study()
        return study()
    except KeyboardInterrupt:
        _print_best_so_far(console, setup)
        raise


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
