"""The Optuna study: the only module that imports optuna.

A study searches the server's search space; each trial is one real measurement (runner). Trial 0
is the server's default config and trial 1 the `2*cpus+1` rule, so every study measures its own
baselines on the same machine in the same run. Failed configs are recorded as FAIL with their
reason and the study goes on; an app that cannot be imported stops it.
"""

from __future__ import annotations

import json
import statistics
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import optuna
from optuna.trial import FrozenTrial, Trial

from tuner import objectives
from tuner.apps import AppRef
from tuner.errors import ConfigError, InvalidMeasurement, TrialError
from tuner.loadgen import LoadSpec, WindowStats
from tuner.objectives import Slo
from tuner.probe import cpu_probe_ms
from tuner.records import BASELINE_DEFAULT, BASELINE_RULE, TrialRecord
from tuner.runner import BenchPlan, cpu_model, run_bench
from tuner.servers.base import ServerAdapter
from tuner.settings import Value
from tuner.space import SearchSpace, suggest

# A trial whose running throughput is below this percentile of the others at the same second
# is stopped early: only clearly hopeless configs, since one-second windows are noisy.
PRUNE_PERCENTILE = 25.0
PRUNE_WARMUP_WINDOWS = 2
HEARTBEAT_S = 10
GRACE_S = 30


@dataclass(frozen=True)
class StudySetup:
    """Everything a study needs to run trials; stored with the study so it can be resumed."""

    name: str
    storage_url: str
    app_text: str
    app: AppRef
    adapter: ServerAdapter
    space: SearchSpace
    objective: str
    slo: Slo
    load: LoadSpec
    server_cpus: tuple[int, ...]
    ready_path: str
    workdir: Path
    seed: int | None = None
    probe_every: int = 5

    def metadata(self) -> dict[str, Any]:
        """What identifies the study; a resumed study must match it."""
        return {
            "server": self.adapter.name,
            "app": self.app_text,
            "objective": self.objective,
            "server_cpus": list(self.server_cpus),
            "load_cpus": list(self.load.load_cpus),
            "cpu_model": cpu_model(),
        }


class StudyListener(Protocol):
    def on_trial_start(self, number: int, settings: dict[str, Value]) -> None: ...
    def on_phase(self, phase: str) -> None: ...
    def on_window(self, window: WindowStats) -> None: ...
    def on_trial_end(self, record: TrialRecord) -> None: ...


@dataclass
class QuietListener:
    """A listener that shows nothing (tests, --json)."""

    ended: list[TrialRecord] = field(default_factory=list)

    def on_trial_start(self, number: int, settings: dict[str, Value]) -> None:
        pass

    def on_phase(self, phase: str) -> None:
        pass

    def on_window(self, window: WindowStats) -> None:
        pass

    def on_trial_end(self, record: TrialRecord) -> None:
        self.ended.append(record)


def _quiet_optuna() -> None:
    """Optuna's per-trial log lines and its notes on experimental arguments (grouped TPE,
    heartbeats) are for library users; the tuner shows its own progress."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def storage(url: str) -> optuna.storages.BaseStorage:
    """Optuna RDB storage with heartbeats, so a trial left RUNNING by a killed tuner is failed."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    try:
        return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)
    except Exception as exc:  # SQLAlchemy raises many kinds for a bad URL or unreachable server
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"--storage {url!r}: cannot open it ({first_line}); expected an Optuna storage URL "
            "such as sqlite:///studies/tuner.db or postgresql://user:pass@host/db"
        ) from None


def open_study(setup: StudySetup) -> optuna.Study:
    """Create the study (enqueueing both baselines), or load it to add trials."""
    _quiet_optuna()
    sampler = optuna.samplers.TPESampler(
        seed=setup.seed,
        n_startup_trials=8,
        multivariate=True,
        group=True,  # conditional parameters (threads only with gthread) need grouped TPE
    )
    pruner = optuna.pruners.PercentilePruner(
        PRUNE_PERCENTILE, n_startup_trials=4, n_warmup_steps=PRUNE_WARMUP_WINDOWS
    )
    study = optuna.create_study(
        study_name=setup.name,
        storage=storage(setup.storage_url),
        directions=objectives.directions(setup.objective),
        sampler=sampler,
        pruner=pruner,
        load_if_exists=True,
    )
    known = study.user_attrs.get("setup")
    if known is None:
        study.set_user_attr("setup", setup.metadata())
        study.set_user_attr("created", datetime.now(timezone.utc).isoformat(timespec="seconds"))
        _enqueue_baselines(study, setup)
    else:
        _check_same_study(setup, known)
    return study


def _check_same_study(setup: StudySetup, known: dict[str, Any]) -> None:
    mine = setup.metadata()
    for key in ("server", "app", "objective"):
        if known.get(key) != mine[key]:
            raise ConfigError(
                f"study {setup.name!r} exists with {key}={known.get(key)!r}, not {mine[key]!r}; "
                "use another --study-name or the same options to resume it"
            )


def _enqueue_baselines(study: optuna.Study, setup: StudySetup) -> None:
    defaults = setup.adapter.table.defaults()
    rule = {**defaults, **setup.adapter.baseline_rule_values(len(setup.server_cpus))}
    for label, settings in ((BASELINE_DEFAULT, defaults), (BASELINE_RULE, rule)):
        params = {p.name: settings[p.setting] for p in setup.space.params}
        study.enqueue_trial(params, user_attrs={"baseline": label}, skip_if_exists=False)


def run_search(
    setup: StudySetup,
    study: optuna.Study,
    *,
    n_trials: int | None,
    timeout_s: float | None,
    listener: StudyListener,
) -> None:
    """Run trials until `n_trials` more are done or `timeout_s` passes.

    Ctrl-C: the running trial's server is stopped on the way out, Optuna marks that trial FAIL,
    every completed trial stays, and KeyboardInterrupt reaches the caller.
    """
    objective = _TrialObjective(setup, study, listener)
    study.optimize(
        objective,
        n_trials=n_trials,
        timeout=timeout_s,
        catch=(TrialError,),
        callbacks=[lambda _study, frozen: listener.on_trial_end(to_record(frozen))],
    )


class _TrialObjective:
    def __init__(self, setup: StudySetup, study: optuna.Study, listener: StudyListener) -> None:
        self.setup = setup
        self.study = study
        self.listener = listener

    def __call__(self, trial: Trial) -> list[float]:
        setup = self.setup
        self._maybe_probe(trial.number)
        try:
            settings = setup.adapter.resolve(suggest(setup.space, trial, len(setup.server_cpus)))
        except ConfigError as exc:
            _fail(trial, "invalid_combination", str(exc))
            raise InvalidMeasurement(str(exc)) from exc
        trial.set_user_attr("settings", settings)
        self.listener.on_trial_start(trial.number, settings)
        plan = BenchPlan(
            adapter=setup.adapter,
            app=setup.app,
            settings=settings,
            load=setup.load,
            server_cpus=setup.server_cpus,
            log_path=setup.workdir / "trials" / str(trial.number) / "server.log",
            ready_path=setup.ready_path,
        )
        pruning = _Pruning(trial, setup.objective, self.listener)
        try:
            result = run_bench(plan, on_window=pruning.on_window, on_phase=self.listener.on_phase)
        except TrialError as exc:
            _fail(trial, exc.reason, str(exc))
            raise
        metrics = trial_metrics(result.to_dict())
        trial.set_user_attr("metrics", metrics)
        if pruning.pruned:
            trial.set_user_attr("fail_reason", "pruned: throughput clearly below the others")
            raise optuna.TrialPruned()
        if metrics["unfair"]:
            reasons = "; ".join(metrics.get("unfair_reasons", [])) or "unfair measurement"
            _fail(trial, "unfair", reasons)
            raise InvalidMeasurement(f"unfair: {reasons}")
        named = objectives.named_constraints(setup.slo, metrics)
        for name, excess in named.items():
            trial.set_constraint(name, excess)  # the sampler steers away from violations
        trial.set_user_attr("constraints", list(named.values()))
        return objectives.values(setup.objective, metrics)

    def _maybe_probe(self, number: int) -> None:
        """Every few trials, time a fixed CPU loop on the server CPUs to watch machine drift."""
        if self.setup.probe_every <= 0 or number % self.setup.probe_every:
            return
        probes = list(self.study.user_attrs.get("cpu_probe_ms", []))
        probes.append([number, round(cpu_probe_ms(self.setup.server_cpus), 3)])
        self.study.set_user_attr("cpu_probe_ms", probes)


class _Pruning:
    """Reports each one-second window to Optuna and stops hopeless trials early."""

    def __init__(self, trial: Trial, objective: str, listener: StudyListener) -> None:
        self.trial = trial
        self.objective = objective
        self.listener = listener
        self.pruned = False

    def on_window(self, window: WindowStats) -> bool:
        self.listener.on_window(window)
        if self.objective == "multi":  # Optuna cannot prune multi-objective trials
            return True
        value = window.rps if self.objective == "throughput" else window.p99_ms
        self.trial.report(value, window.index)
        if self.trial.should_prune():
            self.pruned = True
            return False
        return True


def trial_metrics(result: dict[str, Any]) -> dict[str, Any]:
    """The figures kept per trial. The objective's req/s is the median of one-second windows,
    which one stall or burst of a noisy neighbour cannot move much."""
    metrics = {key: value for key, value in result.items() if key != "settings"}
    windows = result.get("windows_rps") or []
    metrics["rps_overall"] = result["rps"]
    if windows:
        metrics["rps"] = statistics.median(windows)
    return metrics


def _fail(trial: Trial, reason: str, message: str) -> None:
    trial.set_user_attr("fail_reason", f"{reason}: {message.splitlines()[0][:300]}")
    trial.set_user_attr("fail_detail", message[-2000:])


def to_record(frozen: FrozenTrial) -> TrialRecord:
    constraints = frozen.user_attrs.get("constraints", [])
    return TrialRecord(
        number=frozen.number,
        state=frozen.state.name,
        settings=dict(frozen.user_attrs.get("settings", {})),
        metrics=dict(frozen.user_attrs.get("metrics", {})),
        values=tuple(frozen.values or ()),
        baseline=str(frozen.user_attrs.get("baseline", "")),
        fail_reason=str(frozen.user_attrs.get("fail_reason", "")),
        feasible=all(c <= 0 for c in constraints),
    )


def load_records(storage_url: str, name: str) -> tuple[dict[str, Any], list[TrialRecord]]:
    """The study's stored setup and all its trials, for emit/report/show."""
    study = load_existing(storage_url, name)
    return dict(study.user_attrs), [to_record(t) for t in study.get_trials(deepcopy=False)]


def load_existing(storage_url: str, name: str) -> optuna.Study:
    _quiet_optuna()
    store = storage(storage_url)
    names = [summary.study_name for summary in optuna.get_all_study_summaries(store)]
    if name not in names:
        known = ", ".join(names) or "none"
        raise ConfigError(f"--study {name!r}: no such study in {storage_url}; studies: {known}")
    return optuna.load_study(study_name=name, storage=store)


def pareto_numbers(study: optuna.Study) -> list[int]:
    return [t.number for t in study.best_trials]


def save_summary(study: optuna.Study, key: str, value: Any) -> None:
    """Keep a JSON-able result (confirmation rounds, noise) with the study for reports."""
    study.set_user_attr(key, json.loads(json.dumps(value)))
