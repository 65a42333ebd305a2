"""A study's setup from the options of `tune` and `compare`: the adapter, its space, its name."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tuner.apps import check_app_imports, parse_app
from tuner.commands.options import cpu_split, limits_from, load_spec_from, workload_from
from tuner.commands.tune_options import TuneOptions
from tuner.errors import ConfigError
from tuner.search.objectives import Slo, objective_named
from tuner.search.space import SearchSpace, default_space_path, extend_space, load_space
from tuner.search.storage_url import study_workdir
from tuner.servers.appenv import WithAppSettings, adapter_for_app
from tuner.servers.base import ServerAdapter

if TYPE_CHECKING:
    from tuner.search.study import StudySetup

STUDY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def build_setup(options: TuneOptions) -> StudySetup:
    from tuner.search.study import StudySetup

    _check_numbers(options)
    from tuner.front import behind
    from tuner.search.front_space import with_front_space

    app = parse_app(options.app)
    # The interface decides which servers can run it and how: found before the adapter.
    app = check_app_imports(app)
    adapter = adapter_for_app(options.server, app, options.app_settings)
    server_cpus, load_cpus = cpu_split(options.load)
    limits = limits_from(options.load, server_cpus)
    load = load_spec_from(options.load, workload_from(options.load, options.path), load_cpus)
    space_path = options.space or adapter.space_file or default_space_path(adapter.name)
    space = with_app_params(adapter, load_space(space_path, adapter.table, adapter.name))
    adapter, space = with_front_space(behind(adapter, options.front), space)
    space = space.for_lanes(load.lanes.kinds())
    adapter.check_installed()
    # A study behind a front is another study: its name says so (and so does its metadata).
    setup_name = f"{adapter.name}-{options.front}" if options.front else adapter.name
    name = options.study_name or f"{app.module.rsplit('.', 1)[-1]}-{setup_name}-{options.objective}"
    if not STUDY_NAME.match(name):
        raise ConfigError(
            f"--study-name {name!r}: use letters, digits, '.', '_' and '-' "
            "(up to 100, starting with a letter or digit)"
        )
    objective = objective_named(options.objective)
    return StudySetup(
        name=name,
        storage_url=options.storage,
        app_text=options.app,
        app=app,
        adapter=adapter,
        space=space,
        objective=objective,
        slo=Slo(
            p99_ms=options.slo_p99,
            max_error_rate=options.max_error_rate,
            max_memory_mb=options.max_memory,
            streams=load.lanes.streams is not None,
            probe=load.lanes.probe is not None,
            # The front is p99 at an offered rate: a config that cannot carry it breaks it.
            carry_rate=objective.trade_off,
        ),
        load=load,
        server_cpus=server_cpus,
        ready_path=load.workload.probe_path,
        workdir=study_workdir(options.storage, name),
        seed=options.seed,
        allow_mixed_hosts=options.allow_mixed_hosts,
        branch_starts=options.branch_starts,
        limits=limits,
    )


def with_app_params(adapter: ServerAdapter, space: SearchSpace) -> SearchSpace:
    """The server's search space plus the app settings that declare a search."""
    if not isinstance(adapter, WithAppSettings) or not adapter.app_settings.search:
        return space
    declared = adapter.app_settings
    return extend_space(space, adapter.table, declared.search, declared.source)


def _check_numbers(options: TuneOptions) -> None:
    checks: list[tuple[str, float | None, bool, str]] = [
        ("--trials", options.trials, options.trials >= 1, "a whole number >= 1"),
        ("--top-k", options.top_k, options.top_k >= 1, "a whole number >= 1"),
        (
            "--confirm-rounds",
            options.confirm_rounds,
            options.confirm_rounds >= 1,
            "a whole number >= 1",
        ),
        (
            "--max-error-rate",
            options.max_error_rate,
            0 <= options.max_error_rate <= 1,
            "a fraction from 0 to 1",
        ),
    ]
    checks += [
        (name, value, value is None or value > 0, "a number > 0")
        for name, value in (
            ("--timeout", options.study_timeout_s),
            ("--slo-p99", options.slo_p99),
            ("--max-memory", options.max_memory),
        )
    ]
    for name, value, ok, valid in checks:
        if not ok:
            raise ConfigError(f"{name} {value}: expected {valid}")
