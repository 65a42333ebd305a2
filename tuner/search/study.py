"""The Optuna study: the only module that imports optuna.

A study searches the server's search space; each trial is one real measurement (runner). Trial 0
is the server's default config and trial 1 the `2*cpus+1` rule, so every study measures its own
baselines on the same machine in the same run. Failed configs are recorded as FAIL with their
reason and the study goes on; an app that cannot be imported stops it.

Several tuners (on one host or many) may share a study through one database: the study is
created once (a tuner that loses the race to create it loads it), baselines are enqueued once,
and each trial records the host that ran it. Heartbeats mark a trial whose tuner died FAIL once
it is `grace` seconds old, the next time any tuner opens the study.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import optuna
from optuna.trial import FrozenTrial, Trial

from tuner.apps import AppRef
from tuner.errors import AppBrokenError, ConfigError, InvalidMeasurement, TrialError, TunerError
from tuner.loadgen import LoadSpec, WindowStats
from tuner.machine import hosts
from tuner.machine.probe import cpu_probe_ms
from tuner.measure.runner import BenchPlan, cpu_model, run_bench
from tuner.search import objectives
from tuner.search.covering import covering_config
from tuner.search.objectives import Slo
from tuner.search.records import BASELINE_DEFAULT, BASELINE_RULE, TrialRecord
from tuner.search.space import SearchSpace, bounds, suggest
from tuner.search.storage_url import redact, sqlite_path
from tuner.servers.base import ServerAdapter
from tuner.settings import Value

# A trial whose running figure is in the worst quarter of the others at the same second is
# stopped early: only clearly hopeless configs, since one-second windows are noisy. (Optuna's
# PercentilePruner takes the share it *keeps*: 75 keeps the best 75% in either direction.)
KEEP_BEST_PERCENT = 75.0
PRUNE_WARMUP_WINDOWS = 2
# Configs queued per study because a config starved connections it had no thread for.
MAX_COVERING_TRIES = 2
HEARTBEAT_S = 10
GRACE_S = 30
# Environment overrides (whole seconds), so tests need not wait 30 s for a dead tuner's trial.
HEARTBEAT_ENV = "TUNER_HEARTBEAT_S"
GRACE_ENV = "TUNER_HEARTBEAT_GRACE_S"
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
    objective: str
    slo: Slo
    load: LoadSpec
    server_cpus: tuple[int, ...]
    ready_path: str
    workdir: Path
    seed: int | None = None
    probe_every: int = 5
    allow_mixed_hosts: bool = False

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

    def host(self) -> dict[str, Any]:
        return hosts.this_host(self.server_cpus, self.load.load_cpus)


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
    # ERROR: Optuna logs every failed trial as a WARNING with its traceback; the tuner records
    # and shows each failure as its own one-line reason instead.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def heartbeat_settings() -> tuple[int, int]:
    """(heartbeat interval, grace period) in seconds, from the environment or the defaults."""
    values = []
    for env, default in ((HEARTBEAT_ENV, HEARTBEAT_S), (GRACE_ENV, GRACE_S)):
        text = os.environ.get(env, "").strip()
        if not text:
            values.append(default)
            continue
        if not text.isdigit() or int(text) < 1:
            raise ConfigError(f"{env}={text!r}: expected a whole number of seconds >= 1")
        values.append(int(text))
    interval, grace = values
    if grace <= interval:
        raise ConfigError(
            f"{GRACE_ENV}={grace} must be longer than the heartbeat interval ({interval} s), "
            "or every running trial would look dead"
        )
    return interval, grace


# What SQLAlchemy says when two tuners create the tables of a fresh database at once.
_TABLE_RACE_MARKERS = (
    "already exists",
    "duplicate key",
    "UNIQUE constraint failed",
    "database is locked",
)


def storage(url: str) -> optuna.storages.BaseStorage:
    """Optuna RDB storage with heartbeats, so a trial left RUNNING by a killed tuner is failed."""
    interval, grace = heartbeat_settings()
    engine_kwargs: dict[str, Any] = {}
    shown = redact(url)
    url = with_postgres_driver(url)
    database = sqlite_path(url)
    if database is not None:
        folder = database.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"--storage {url!r}: cannot create the folder {str(folder)!r} ({exc.strerror})"
            ) from None
    elif url.startswith(("postgresql", "mysql")):
        # Fail in seconds on an unreachable server; re-check pooled connections after a
        # database restart instead of failing the next trial.
        engine_kwargs = {"connect_args": {"connect_timeout": 10}, "pool_pre_ping": True}
    for attempt in range(3):
        try:
            return optuna.storages.RDBStorage(
                url, engine_kwargs, heartbeat_interval=interval, grace_period=grace
            )
        except Exception as exc:  # SQLAlchemy raises many kinds for a bad URL or server
            text = str(exc).strip()
            # Two tuners creating the tables of a fresh database at once: one loses, retries.
            if attempt < 2 and any(marker in text for marker in _TABLE_RACE_MARKERS):
                time.sleep(0.5 * (attempt + 1))
                continue
            first_line = text.splitlines()[0] if text else type(exc).__name__
            raise ConfigError(
                f"--storage {shown!r}: cannot open it ({first_line[:200]}); expected an "
                "Optuna storage URL such as sqlite:///studies/tuner.db or "
                "postgresql://user:pass@host/db"
            ) from None
    raise AssertionError("unreachable")


def with_postgres_driver(url: str) -> str:
    """`postgresql://` with the driver that is installed: SQLAlchemy 2.1 assumes psycopg 3 (the
    tuner's `postgres` extra), 2.0 psycopg2; either works when it is the one installed."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        return url
    for module in ("psycopg", "psycopg2"):
        if importlib.util.find_spec(module) is not None:
            return f"postgresql+{module}://{rest}"
    raise ConfigError(
        f"--storage {redact(url)!r}: no PostgreSQL driver is installed; "
        "pip install 'tuner[postgres]' (psycopg 3)"
    )


class FeasiblePercentilePruner(optuna.pruners.PercentilePruner):
    """Optuna's PercentilePruner, comparing a trial only with trials that could win.

    An unfair config often looks fast (it serves a few clients and ignores the rest), and an
    SLO violator may too: neither may raise the bar that a sound config is pruned against.
    """

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        return super().prune(_FeasibleTrialsOnly(study), trial)  # type: ignore[arg-type]


class _FeasibleTrialsOnly:
    """A view of a study whose get_trials() leaves out trials that violate a constraint."""

    def __init__(self, study: optuna.Study) -> None:
        self._study = study

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def get_trials(self, deepcopy: bool = True, states: Any = None) -> list[FrozenTrial]:
        trials = self._study.get_trials(deepcopy=deepcopy, states=states)
        return [t for t in trials if objectives.satisfied(t.constraints.values())]


def open_study(setup: StudySetup) -> optuna.Study:
    """Create the study (enqueueing both baselines), or load it to add trials.

    Safe when several tuners start at once: exactly one creates the study and enqueues the
    baselines; the others load it. Trials left RUNNING by a dead tuner are failed here.
    """
    _quiet_optuna()
    sampler = optuna.samplers.TPESampler(
        seed=setup.seed,
        n_startup_trials=8,
        multivariate=True,
        group=True,  # conditional parameters (threads only with gthread) need grouped TPE
    )
    pruner = FeasiblePercentilePruner(
        KEEP_BEST_PERCENT, n_startup_trials=4, n_warmup_steps=PRUNE_WARMUP_WINDOWS
    )
    store = storage(setup.storage_url)
    mine = hosts.hardware(setup.server_cpus, setup.load.load_cpus)
    try:
        study = optuna.create_study(
            study_name=setup.name,
            storage=store,
            directions=objectives.directions(setup.objective),
            sampler=sampler,
            pruner=pruner,
        )
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(
            study_name=setup.name, storage=store, sampler=sampler, pruner=pruner
        )
        known = _wait_for_setup(study)
        if known is not None:
            _check_same_study(setup, known)
            study_hw = study.user_attrs.get("hardware") or mine
            hosts.check_same_hardware(setup.name, study_hw, mine, setup.allow_mixed_hosts)
            fail_stale_trials(study)
            return study
        # The tuner that created it died before writing its setup: adopt the study.
    study.set_user_attr("setup", setup.metadata())
    study.set_user_attr("hardware", mine)
    study.set_user_attr("created", datetime.now(timezone.utc).isoformat(timespec="seconds"))
    if not any(t.user_attrs.get("baseline") for t in study.get_trials(deepcopy=False)):
        _enqueue_baselines(study, setup)
    return study


def _wait_for_setup(study: optuna.Study) -> dict[str, Any] | None:
    """The study's setup, waiting briefly for a tuner that has just created it to write it."""
    deadline = time.monotonic() + SETUP_WAIT_S
    while True:
        known = study.user_attrs.get("setup")
        if known is not None or time.monotonic() > deadline:
            return known
        time.sleep(0.2)


def fail_stale_trials(study: optuna.Study) -> None:
    """Mark FAIL every trial whose tuner stopped sending heartbeats more than `grace` s ago.

    Optuna also does this before each new trial; doing it on open covers `emit` and reports,
    and a resumed study whose search has nothing left to run.
    """
    optuna.storages.fail_stale_trials(study)


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
        trial.set_user_attr("host", setup.host())
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
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (the CLI raises it the same way)
            _fail(trial, "interrupted", f"the tuner got {exc or 'SIGINT'} during this trial")
            raise
        except AppBrokenError as exc:  # stops the study: no other config can do better
            _fail(trial, "app_broken", str(exc))
            raise
        except TunerError as exc:  # e.g. the server binary vanished: stops the study too
            _fail(trial, type(exc).__name__, str(exc))
            raise
        metrics = trial_metrics(result.to_dict())
        trial.set_user_attr("metrics", metrics)
        if pruning.pruned:
            trial.set_user_attr("fail_reason", "pruned: throughput clearly below the others")
            raise optuna.TrialPruned()
        named = objectives.named_constraints(setup.slo, metrics)
        for name, excess in named.items():
            trial.set_constraint(name, excess)  # the sampler steers away from violations
        trial.set_user_attr("constraints", list(named.values()))
        if reason := infeasible_reason(setup.slo, metrics):
            trial.set_user_attr("fail_reason", reason)
        if metrics.get("starved_connections"):
            self._try_covering_config(trial.number, settings)
        return objectives.values(setup.objective, metrics)

    def _try_covering_config(self, number: int, settings: dict[str, Value]) -> None:
        """Queue the nearest config with a thread for every connection (see tuner.search.covering),
        a few times per study, so the sampler sees that region at its best once."""
        setup = self.setup
        tried = [t for t in self.study.get_trials(deepcopy=False) if "covers_for" in t.user_attrs]
        if len(tried) >= MAX_COVERING_TRIES:
            return
        cpus = len(setup.server_cpus)
        ranges = bounds(setup.space, cpus)
        limits = {
            p.setting: (int(ranges[p.name][0]), int(ranges[p.name][1]))
            for p in setup.space.params
            if p.type == "int"
        }
        fixed = covering_config(setup.adapter, settings, setup.load.connections, limits)
        if fixed is None:
            return
        params = {p.name: fixed[p.setting] for p in setup.space.params}
        self.study.enqueue_trial(params, user_attrs={"covers_for": number}, skip_if_exists=True)

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


def infeasible_reason(slo: Slo, metrics: dict[str, Any]) -> str:
    """Why a measured trial cannot win, as one line ("" when it can): unfair first (its
    figures describe only the clients the server chose to serve), then the SLOs it breaks."""
    if metrics.get("unfair"):
        return "unfair: " + ("; ".join(metrics.get("unfair_reasons", [])) or "uneven service")
    violations = slo_violations(slo, metrics)
    return f"violates SLO: {violations}" if violations else ""


def slo_violations(slo: Slo, metrics: dict[str, Any]) -> str:
    """The SLOs a measurement breaks, as one line a user reads ("" when none)."""
    parts = []
    errors = metrics.get("error_rate")
    if not isinstance(errors, (int, float)) or errors > slo.max_error_rate:
        detail = ", ".join(f"{k} {v}" for k, v in (metrics.get("errors") or {}).items() if v)
        parts.append(
            f"{errors:.1%} of requests failed ({detail or 'no detail'}) > --max-error-rate "
            f"{slo.max_error_rate:g}"
            if isinstance(errors, (int, float))
            else "error rate not measured"
        )
    p99 = (metrics.get("latency_ms") or {}).get("p99")
    if slo.p99_ms is not None and (not isinstance(p99, (int, float)) or p99 > slo.p99_ms):
        parts.append(f"p99 {_figure(p99)} ms > --slo-p99 {slo.p99_ms:g}")
    pss = (metrics.get("memory_mb") or {}).get("pss_mean")
    limit = slo.max_memory_mb
    if limit is not None and (not isinstance(pss, (int, float)) or pss > limit):
        parts.append(f"memory (PSS) {_figure(pss)} MB > --max-memory {limit:g}")
    return "; ".join(parts)


def _figure(value: object) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) else "not measured"


def _fail(trial: Trial, reason: str, message: str) -> None:
    trial.set_user_attr("fail_reason", f"{reason}: {message.splitlines()[0][:300]}")
    trial.set_user_attr("fail_detail", message[-2000:])


def to_record(frozen: FrozenTrial) -> TrialRecord:
    constraints = frozen.user_attrs.get("constraints", [])
    fail_reason = str(frozen.user_attrs.get("fail_reason", ""))
    if frozen.state.name == "FAIL" and not fail_reason:
        # Only the heartbeat check fails a trial without a reason: its tuner died mid-trial.
        host = frozen.user_attrs.get("host") or {}
        where = f" on {host.get('host')} (pid {host.get('pid')})" if host else ""
        fail_reason = (
            f"abandoned: the tuner{where} stopped sending heartbeats during this trial "
            "(killed, or its host died)"
        )
    return TrialRecord(
        number=frozen.number,
        state=frozen.state.name,
        settings=dict(frozen.user_attrs.get("settings", {})),
        metrics=dict(frozen.user_attrs.get("metrics", {})),
        values=tuple(frozen.values or ()),
        baseline=str(frozen.user_attrs.get("baseline", "")),
        fail_reason=fail_reason,
        feasible=objectives.satisfied(constraints),
        covers_for=frozen.user_attrs.get("covers_for"),
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
        raise ConfigError(
            f"--study {name!r}: no such study in {redact(storage_url)}; studies: {known}"
        )
    study = optuna.load_study(study_name=name, storage=store)
    fail_stale_trials(study)
    return study


def pareto_numbers(study: optuna.Study) -> list[int]:
    return [t.number for t in study.best_trials]


def save_summary(study: optuna.Study, key: str, value: Any) -> None:
    """Keep a JSON-able result (confirmation rounds, noise) with the study for reports."""
    study.set_user_attr(key, json.loads(json.dumps(value)))
