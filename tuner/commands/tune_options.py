"""The options of `tune` (shared by `compare`): their parser, and the typed value read from it.

`TuneOptions.from_args` reads the command line once; below `commands/` only typed values
travel (the study's `StudySetup`, the run's `TuneRun`). `compare` derives each server's options
from the same value (`for_study`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.commands.options import (
    LoadOptions,
    add_front_option,
    add_load_options,
    add_server_cpu_option,
    cpu_split,
    parse_for_cpus,
)
from tuner.errors import ConfigError
from tuner.search.objectives import OBJECTIVES
from tuner.search.storage_url import DEFAULT_STORAGE

if TYPE_CHECKING:
    from tuner.workflow.tune_steps import TuneRun


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


@dataclass(frozen=True)
class TuneOptions:
    """One study's options as given: its app and server, the search, the SLOs, what the
    written file needs, and the load (`LoadOptions`)."""

    app: str
    server: str
    study_name: str | None
    storage: str
    objective: str
    slo_p99: float | None
    max_error_rate: float
    max_memory: float | None
    space: Path | None
    front: str | None
    app_settings: Path | None
    app_requirements: Path | None
    clean_venv_check: bool
    seed: int | None
    allow_mixed_hosts: bool
    branch_starts: bool
    path: str
    trials: int
    study_timeout_s: float | None
    top_k: int
    confirm_rounds: int
    for_cpus: str | None
    load: LoadOptions
    out: Path | None = None  # tune's --out, the file (a compare's folder is its own)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TuneOptions:
        """`tune`'s options."""
        return cls.of_study(args, args.app, args.server, args.study_name, out=args.out)

    @classmethod
    def of_study(
        cls,
        args: argparse.Namespace,
        app: str,
        server: str,
        study_name: str | None,
        out: Path | None = None,
    ) -> TuneOptions:
        """The options of one study on `app` and `server` (`compare` has several)."""
        return cls(
            app=app,
            server=server,
            study_name=study_name,
            storage=args.storage,
            objective=args.objective,
            slo_p99=args.slo_p99,
            max_error_rate=args.max_error_rate,
            max_memory=args.max_memory,
            space=args.space,
            front=args.front,
            app_settings=args.app_settings,
            app_requirements=args.app_requirements,
            clean_venv_check=args.clean_venv_check,
            seed=args.seed,
            allow_mixed_hosts=args.allow_mixed_hosts,
            branch_starts=not args.no_branch_starts,
            path=args.path,
            trials=args.trials,
            study_timeout_s=args.study_timeout,
            top_k=args.top_k,
            confirm_rounds=args.confirm_rounds,
            for_cpus=args.for_cpus,
            load=LoadOptions.from_args(args),
            out=out,
        )

    @property
    def json(self) -> bool:
        return self.load.json

    def for_study(self, app: str, server: str, study_name: str) -> TuneOptions:
        """One server's study of a compare: the same options for another app, server, name."""
        return replace(self, app=app, server=server, study_name=study_name)

    def run(self, sizes: tuple[float, ...] = ()) -> TuneRun:
        """What the workflow runs once the study is set up."""
        from tuner.workflow.tune_steps import TuneRun

        return TuneRun(
            n_trials=self.trials,
            timeout_s=self.study_timeout_s,
            top_k=self.top_k,
            confirm_rounds=self.confirm_rounds,
            check_clean_venv=self.clean_venv_check,
            sizes=sizes,
        )


def for_cpus(options: TuneOptions) -> tuple[float, ...]:
    """The --for-cpus sizes, checked before anything is measured (empty without it)."""
    if options.for_cpus is None:
        return ()
    if options.load.cpu_limit is not None:
        raise ConfigError(
            f"--for-cpus {options.for_cpus} with --cpu-limit {options.load.cpu_limit}: each size "
            "is its own CPU limit; give one or the other"
        )
    server_cpus, _ = cpu_split(options.load)
    return parse_for_cpus(options.for_cpus, server_cpus)
