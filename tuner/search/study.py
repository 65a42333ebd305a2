"""A study's search: opening it, and running its trials (the objective Optuna calls).

A study searches the server's search space; each trial is one real measurement (runner). Trial 0
is the server's default config and trial 1 the `2*cpus+1` rule, so every study measures its own
baselines on the same machine in the same run. Failed configs are recorded as FAIL with their
reason and the study goes on; an app that cannot be imported stops it.

The layers above hold the study as a StudyHandle (tuner.search.study_handle) and reach Optuna
through `search/` alone: the sampler is a SamplerChoice (tuner.search.samplers), the storage
tuner.search.storage's.

Several tuners (on one host or many) may share a study through one database: the study is
created once (a tuner that loses the race to create it loads it), baselines are enqueued once,
and each trial records the host that ran it. Heartbeats mark a trial whose tuner died FAIL once
it is `grace` seconds old, the next time any tuner opens the study (tuner.search.storage).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import optuna
from optuna.trial import FrozenTrial, Trial, TrialState

from tuner import interrupts
from tuner.apps import AppRef
from tuner.errors import AppBrokenError, ConfigError, InvalidMeasurement, TrialError, TunerError
from tuner.loadgen import LoadSpec, WindowStats
from tuner.loadgen.engine import keep_workers
from tuner.machine import hosts
from tuner.machine.cpus import cpu_model
from tuner.machine.limits import Limits
from tuner.machine.probe import cpu_probe_ms
from tuner.measure.runner import BenchPlan, run_bench
from tuner.metrics.measurement import Measurement
from tuner.search import objectives
from tuner.search.attrs import StudyAttrs, TrialAttrs
from tuner.search.branches import branch_starts
from tuner.search.carryover import carried_starts
from tuner.search.covering import covering_config, space_limits
from tuner.search.objectives import Figures, Objective, Slo
from tuner.search.pruning import NoiseAwarePruner
from tuner.search.records import TrialRecord
from tuner.search.samplers import SamplerChoice, make_sampler
from tuner.search.shapes import middle_shapes, next_shape, shape_trials
from tuner.search.space import SearchSpace, suggest
from tuner.search.storage import fail_stale_trials, quiet_optuna, storage
from tuner.search.study_handle import StudyHandle, stored_measurement, to_record
from tuner.servers.base import ServerAdapter
from tuner.settings import Value

# Configs queued per study because a config starved connections it had no thread for.
MAX_COVERING_TRIES = 2
# A tuner that loses the race to create a study waits this long for the winner's setup.
SETUP_WAIT_S = 15.0


@dataclass(frozen=True)
class StudySetup:
    """Everything a study needs to run trials; stored with the study so it can be resumed."""

    name: str
    storage_url: str
    app_text: str
    app: AppRef
    adapter: ServerAdapter
    space: SearchSpace
    objective: Objective
    slo: Slo
    load: LoadSpec
    server_cpus: tuple[int, ...]
    ready_path: str
    workdir: Path
    seed: int | None = None
    probe_every: int = 5
    allow_mixed_hosts: bool = False
    # One start per concurrency model before the sampler takes over (tuner.search.branches).
    branch_starts: bool = True
    limits: Limits = Limits()
    # Requests to hold at once, learnt from servers raced before (tuner.search.carryover):
    # the study's starts are queued at that concurrency instead of as drawn. None: unknown.
    start_concurrency: int | None = None
    # Its name among the contenders of a `compare` over several entry points of one project,
    # where one server may serve each ("gunicorn" and "gunicorn-asgi"); "": the server's name.
    entrant: str = ""
    # What draws the configs (not stored: a resumed study may draw with another).
    sampler: SamplerChoice = SamplerChoice.TPE

    @property
    def contender(self) -> str:
        """The name `compare` knows this study by: its rows, its race lane, its file's folder."""
        return self.entrant or self.adapter.name

    def file_in(self, folder: Path) -> Path:
        """Where `compare` writes this contender's file: in `folder`, or in a folder of its own
        when it is not the server's only entry (two files of one server share a name)."""
        name = self.adapter.artifact_filename
        return (
            folder / name if self.contender == self.adapter.name else folder / self.contender / name
        )

    @property
    def cpus(self) -> float:
        """CPUs the server can use: its pinned cores, or the --cpu-limit quota if lower."""
        return self.limits.effective_cpus(len(self.server_cpus))

    @property
    def space_cpus(self) -> int:
        """`cpus` in search-space ranges (`4*cpus+1`): whole CPUs, a fraction rounded up."""
        return max(1, math.ceil(self.cpus))

    def metadata(self) -> dict[str, Any]:
        """What identifies the study; a resumed study must match it."""
        return {
            "server": self.adapter.name,
            "app": self.app_text,
            "objective": self.objective.name,
            "server_cpus": list(self.server_cpus),
            "load_cpus": list(self.load.load_cpus),
            "cpu_model": cpu_model(),
            "limits": self.limits.to_dict() if self.limits else None,
            "clients": self.load.clients.to_dict(),  # None: fast clients only
            # Behind a front (tuner.front), or None: figures with and without one differ.
            "front": getattr(self.adapter, "front_name", None),
            # What the app speaks decides the server's table (gunicorn's for WSGI or ASGI).
            "interface": self.app.interface.value,
        }

    def host(self) -> dict[str, Any]:
        return hosts.this_host(self.server_cpus, self.load.load_cpus)

    def plan(self, settings: Mapping[str, Value], log_path: Path) -> BenchPlan:
        """One measurement of `settings` under this study's app, load, CPUs and limits."""
        return BenchPlan(
            adapter=self.adapter,
            app=self.app,
            settings=settings,
            load=self.load,
            server_cpus=self.server_cpus,
            log_path=log_path,
            ready_path=self.ready_path,
            limits=self.limits,
        )


class StudyListener(Protocol):
    def on_start(self, line: str) -> None: ...
    def on_trial_start(self, number: int, settings: dict[str, Value]) -> None: ...
    def on_phase(self, phase: str) -> None: ...
    def on_window(self, window: WindowStats) -> None: ...
    def on_trial_end(self, record: TrialRecord) -> None: ...


@dataclass
class QuietListener:
    """A listener that shows nothing (tests, --json)."""

    ended: list[TrialRecord] = field(default_factory=list)

    def on_start(self, line: str) -> None:
        """A line of progress before trials (a race's rung, a --for-cpus size): shown as it is."""

    def on_trial_start(self, number: int, settings: dict[str, Value]) -> None:
        pass

    def on_phase(self, phase: str) -> None:
        pass

    def on_window(self, window: WindowStats) -> None:
        pass

    def on_trial_end(self, record: TrialRecord) -> None:
        self.ended.append(record)


def open_study(setup: StudySetup) -> StudyHandle:
    """Create the study (enqueueing both baselines), or load it to add trials.

    Safe when several tuners start at once: exactly one creates the study and enqueues the
    baselines; the others load it. Trials left RUNNING by a dead tuner are failed here.
    """
    quiet_optuna()
    sampler = make_sampler(
        setup.sampler, seed=setup.seed, objectives=len(setup.objective.directions)
    )
    pruner = NoiseAwarePruner()
    store = storage(setup.storage_url)
    mine = hosts.hardware(setup.server_cpus, setup.load.load_cpus)
    try:
        study = optuna.create_study(
            study_name=setup.name,
            storage=store,
            directions=setup.objective.directions,
            sampler=sampler,
            pruner=pruner,
        )
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(
            study_name=setup.name, storage=store, sampler=sampler, pruner=pruner
        )
        known = _wait_for_setup(study)
        _check_same_directions(setup, study)
        if known is not None:
            _check_same_study(setup, known)
            study_hw = StudyAttrs.read(study.user_attrs).hardware or mine
            hosts.check_same_hardware(setup.name, study_hw, mine, setup.allow_mixed_hosts)
            fail_stale_trials(study)
            return StudyHandle(study)
        # The tuner that created it died before writing its setup: adopt the study.
    handle = StudyHandle(study)
    handle.keep(
        StudyAttrs(
            setup=setup.metadata(),
            hardware=mine,
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
    )
    if not any(record.baseline for record in handle.records()):
        covered = _enqueue_baselines(handle, setup)
        if setup.branch_starts:
            _enqueue_branch_starts(handle, setup, covered)
    return handle


def _enqueue_branch_starts(study: StudyHandle, setup: StudySetup, covered: list[str]) -> None:
    """One start per concurrency model the baselines do not cover (see tuner.search.branches),
    and with a known concurrency (`start_concurrency`), the default's model too, each at it."""
    starts = branch_starts(
        setup.space, setup.adapter, setup.space_cpus, seed=setup.seed, covered=covered
    )
    target = setup.start_concurrency
    queued = [(params, False) for params in starts]
    if target is not None:
        default = {p.name: setup.adapter.resolve({})[p.setting] for p in setup.space.params}
        known = default if _expressible(setup, default) else None
        queued = carried_starts(
            setup.space, setup.adapter, setup.space_cpus, known, starts, target, covered
        )
    else:
        # Each threaded model also at the middle of its shape (tuner.search.shapes); a raced
        # study's starts are at the concurrency learnt already, and its rungs are short.
        middle = middle_shapes(setup.space, setup.adapter, setup.space_cpus, starts)
        queued += [(params, False) for params in middle]
    for params, moved in queued:
        study.queue(params, TrialAttrs(branch_start=True, carried=target if moved else None))


def _wait_for_setup(study: optuna.Study) -> dict[str, Any] | None:
    """The study's setup, waiting briefly for a tuner that has just created it to write it."""
    deadline = time.monotonic() + SETUP_WAIT_S
    while True:
        known = StudyAttrs.read(study.user_attrs).setup
        if known is not None or time.monotonic() > deadline:
            return known
        time.sleep(0.2)


def _check_same_study(setup: StudySetup, known: dict[str, Any]) -> None:
    mine = setup.metadata()
    for key in ("server", "app", "objective", "limits", "clients", "front"):
        if known.get(key) != mine[key]:
            raise ConfigError(
                f"study {setup.name!r} exists with {key}={known.get(key)!r}, not {mine[key]!r}; "
                "use another --study-name or the same options to resume it"
            )


def _check_same_directions(setup: StudySetup, study: optuna.Study) -> None:
    """A study of the same objective name made by an earlier version may rank other figures
    (`multi` ranked req/s, p99 and memory before it became p99 at a rate against memory)."""
    theirs = [d.name.lower() for d in study.directions]
    if theirs != setup.objective.directions:
        raise ConfigError(
            f"study {setup.name!r} exists with {len(theirs)} objective direction(s) "
            f"({', '.join(theirs)}), not the {setup.objective.name} objective's "
            f"({', '.join(setup.objective.directions)}); it was made by an earlier version: use "
            "another --study-name"
        )


def _enqueue_baselines(study: StudyHandle, setup: StudySetup) -> list[str]:
    """Queue the server's baselines as the first trials. A baseline the search space can
    express goes in as the space's params, so the sampler learns from it; one it cannot (a
    default outside a range or a choice list the user narrowed) is measured as it is, outside
    the sampler's params (`baseline_settings`), rather than failing the study. Returns the
    concurrency models the baselines measure."""
    models = []
    for baseline in setup.adapter.baselines(setup.cpus):
        models.append(setup.adapter.concurrency_model(baseline.values))
        params = {p.name: baseline.values[p.setting] for p in setup.space.params}
        attrs = TrialAttrs(baseline=baseline.label)
        if not _expressible(setup, params):
            params, attrs = {}, replace(attrs, baseline_settings=dict(baseline.values))
        study.queue(params, attrs)
    return models


def _expressible(setup: StudySetup, params: dict[str, Any]) -> bool:
    """Whether the space can draw exactly `params` (each active one in its range or choices)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Optuna only warns of a fixed int out of its range
        try:
            suggest(setup.space, optuna.trial.FixedTrial(params), setup.space_cpus)
        except (ValueError, UserWarning, ConfigError):
            return False
    return True


# The load workers stay up from trial to trial (see tuner.loadgen.engine.keep_workers).
@keep_workers()
def run_search(
    setup: StudySetup,
    study: StudyHandle,
    *,
    n_trials: int | None,
    timeout_s: float | None,
    listener: StudyListener,
) -> None:
    """Run trials until `n_trials` more are done or `timeout_s` passes: the sampler's, then
    the shape phase's (tuner.search.shapes: the last third of a study of 12 trials or more).

    Ctrl-C: the running trial's server is stopped on the way out, Optuna marks that trial FAIL,
    every completed trial stays, and KeyboardInterrupt reaches the caller.
    """
    optuna_study = study.optuna_study
    objective = _TrialObjective(setup, optuna_study, listener)
    deadline = time.monotonic() + timeout_s if timeout_s is not None else None
    shaped = shape_trials(n_trials)
    sampled = None if n_trials is None else n_trials - shaped
    _sampled_trials(optuna_study, objective, sampled, deadline, listener)
    for left in range(shaped, 0, -1):
        if deadline is not None and deadline <= time.monotonic():
            return
        move = next_shape(
            setup.space,
            setup.adapter,
            setup.space_cpus,
            study.records(),
            setup.objective.headlines[0].sort_value,
        )
        if move is None:  # every model's best has its neighbours measured: the sampler's
            _sampled_trials(optuna_study, objective, left, deadline, listener)
            return
        study.queue(move.params, TrialAttrs(shape_of=move.from_trial))
        _sampled_trials(optuna_study, objective, 1, deadline, listener)


def _sampled_trials(
    study: optuna.Study,
    objective: _TrialObjective,
    n_trials: int | None,
    deadline: float | None,
    listener: StudyListener,
) -> None:
    """Run trials the sampler draws (and queued ones) until `n_trials` more are done (their
    repeats not counted) or the deadline passes."""
    remaining, spare = n_trials, n_trials or 0
    while remaining is None or remaining > 0:
        # Trials already ended; queued ones (baselines, branch starts) are not, and their
        # repeats give their slots back too.
        ended_before = {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
        left_s = None if deadline is None else deadline - time.monotonic()
        if left_s is not None and left_s <= 0:
            return
        study.optimize(
            objective,
            n_trials=remaining,
            timeout=left_s,
            catch=(TrialError,),
            callbacks=[lambda _study, frozen: _trial_ended(listener, frozen)],
        )
        if remaining is None:
            return
        # A config measured before cost no measurement: give its slot back (at most n_trials
        # times), so the budget buys distinct configs.
        repeats = sum(
            TrialAttrs.read(t.user_attrs).duplicate_of is not None
            for t in study.get_trials(deepcopy=False)
            if t.number not in ended_before
        )
        remaining = min(repeats, spare)
        spare -= remaining


def _trial_ended(listener: StudyListener, frozen: FrozenTrial) -> None:
    listener.on_trial_end(to_record(frozen))
    interrupts.raise_if_requested()  # a stop signal whose exception was lost on the way


class _TrialObjective:
    def __init__(self, setup: StudySetup, study: optuna.Study, listener: StudyListener) -> None:
        self.setup = setup
        self.study = study
        self.listener = listener

    def __call__(self, trial: Trial) -> list[float]:
        setup = self.setup
        self._maybe_probe(trial.number)
        try:
            queued = TrialAttrs.read(trial.user_attrs).baseline_settings
            if queued is not None:
                settings = setup.adapter.resolve(queued)
            else:
                settings = setup.adapter.resolve(suggest(setup.space, trial, setup.space_cpus))
        except ConfigError as exc:
            _fail(trial, "invalid_combination", str(exc))
            raise InvalidMeasurement(str(exc)) from exc
        TrialAttrs(settings=settings, host=setup.host()).write(trial)
        self.listener.on_trial_start(trial.number, settings)
        twin = self._measured_twin(trial.number, settings)
        if twin is not None:
            return self._reuse(trial, twin)
        plan = setup.plan(settings, setup.workdir / "trials" / str(trial.number) / "server.log")
        pruning = _Pruning(trial, self.study, setup.objective, self.listener)
        try:
            result = run_bench(plan, on_window=pruning.on_window, on_phase=self.listener.on_phase)
        except TrialError as exc:
            _fail(trial, exc.reason, str(exc))
            raise
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (the CLI raises it the same way)
            _fail(trial, "interrupted", f"the tuner got {exc or 'SIGINT'} during this trial")
            raise
        except AppBrokenError as exc:  # stops the study: no other config can do better
            _fail(trial, "app_broken", str(exc))
            raise
        except TunerError as exc:  # e.g. the server binary vanished: stops the study too
            _fail(trial, type(exc).__name__, str(exc))
            raise
        measurement = result.measurement
        TrialAttrs(metrics=measurement.to_json(), context=result.context).write(trial)
        if pruning.pruned:
            TrialAttrs(fail_reason=pruning.reason).write(trial)
            raise optuna.TrialPruned()
        values = self._judge(trial, measurement)
        if measurement.starved_connections:
            self._try_covering_config(trial.number, settings)
        return values

    def _judge(self, trial: Trial, measurement: Measurement) -> list[float]:
        """The trial's objective values, with its SLO constraints and why it cannot win."""
        setup = self.setup
        figures = Figures.of(measurement)
        named = objectives.named_constraints(setup.slo, figures)
        for name, excess in named.items():
            trial.set_constraint(name, excess)  # the sampler steers away from violations
        TrialAttrs(constraints=list(named.values())).write(trial)
        if reason := objectives.infeasible_reason(setup.slo, measurement):
            TrialAttrs(fail_reason=reason).write(trial)
        return setup.objective.values(figures)

    def _measured_twin(self, number: int, settings: dict[str, Value]) -> FrozenTrial | None:
        """An earlier complete or pruned trial of exactly these settings (what the server runs,
        with conditions applied and inactive settings at their defaults), if there is one. A
        pruned one counts: measuring it again would only be pruned again (seen on bjoern,
        whose whole space is 12 configs: one pruned config was measured 11 times)."""
        states = (TrialState.COMPLETE, TrialState.PRUNED)
        for frozen in self.study.get_trials(deepcopy=False, states=states):
            stored = TrialAttrs.read(frozen.user_attrs)
            same = frozen.number != number and stored.settings == settings
            if same and stored_measurement(stored.metrics) is not None:
                return frozen
        return None

    def _reuse(self, trial: Trial, twin: FrozenTrial) -> list[float]:
        """Tell the sampler the twin's result again instead of measuring the same config."""
        stored = TrialAttrs.read(twin.user_attrs)
        measurement = stored_measurement(stored.metrics)
        assert measurement is not None
        TrialAttrs(
            duplicate_of=twin.number, metrics=stored.metrics, context=stored.context or {}
        ).write(trial)
        if twin.state == TrialState.PRUNED:
            reason = "pruned" if stored.fail_reason is None else stored.fail_reason
            TrialAttrs(fail_reason=reason).write(trial)
            raise optuna.TrialPruned()
        return self._judge(trial, measurement)

    def _try_covering_config(self, number: int, settings: dict[str, Value]) -> None:
        """Queue the nearest config with a thread for every connection (see tuner.search.covering),
        a few times per study, so the sampler sees that region at its best once."""
        setup = self.setup
        tried = [
            t
            for t in self.study.get_trials(deepcopy=False)
            if TrialAttrs.read(t.user_attrs).covers_for is not None
        ]
        if len(tried) >= MAX_COVERING_TRIES:
            return
        limits = space_limits(setup.space, setup.space_cpus)
        fixed = covering_config(setup.adapter, settings, setup.load.connections, limits)
        if fixed is None:
            return
        params = {p.name: fixed[p.setting] for p in setup.space.params}
        queued = TrialAttrs(covers_for=number).stored()
        self.study.enqueue_trial(params, user_attrs=queued, skip_if_exists=True)

    def _maybe_probe(self, number: int) -> None:
        """Every few trials, time a fixed CPU loop on the server CPUs to watch machine drift."""
        if self.setup.probe_every <= 0 or number % self.setup.probe_every:
            return
        probes = list(StudyAttrs.read(self.study.user_attrs).cpu_probe_ms or [])
        probes.append([number, round(cpu_probe_ms(self.setup.server_cpus), 3)])
        StudyAttrs(cpu_probe_ms=probes).write(self.study)


class _Pruning:
    """Reports each one-second window to Optuna and stops trials that are behind beyond the
    noise (see tuner.search.pruning); `reason` says by how much, with the margin used."""

    def __init__(
        self, trial: Trial, study: optuna.Study, objective: Objective, listener: StudyListener
    ) -> None:
        self.trial = trial
        self.study = study
        self.objective = objective
        self.listener = listener
        self.pruned = False
        self.reason = ""
        self.windows: dict[int, float] = {}

    def on_window(self, window: WindowStats) -> bool:
        self.listener.on_window(window)
        value = self.objective.window_value(window)
        if value is None:  # Optuna cannot prune multi-objective trials
            return True
        self.trial.report(value, window.index)
        self.windows[window.index] = value
        pruner = self.study.pruner
        if not isinstance(pruner, NoiseAwarePruner):
            return True
        call = pruner.judge(self.study, self.windows)
        if call.prune:
            self.pruned = True
            self.reason = call.reason(self.objective.headlines[0].unit)
            return False
        return True


def _fail(trial: Trial, reason: str, message: str) -> None:
    TrialAttrs(
        fail_reason=f"{reason}: {message.splitlines()[0][:300]}", fail_detail=message[-2000:]
    ).write(trial)


def load_records(storage_url: str, name: str) -> tuple[StudyAttrs, list[TrialRecord]]:
    """The study's stored setup and all its trials, for emit/report/show."""
    study = StudyHandle.load(storage_url, name)
    return study.attrs(), study.records()
