"""`tune` end to end: search, re-measure the best side by side, decide, write the config file."""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from tuner.errors import AppBrokenError, ConfigError
from tuner.front import front_of
from tuner.loadgen.checks import nearly_fair
from tuner.loadgen.engine import keep_workers
from tuner.machine.cpus import spare_cpus
from tuner.machine.sizing import SizingRule
from tuner.measure.runner import limits_context, run_context
from tuner.metrics.coreshare import losses_text
from tuner.metrics.stats import Spread
from tuner.search import objectives
from tuner.search.objectives import Figures
from tuner.search.pruning import MIN_MARGIN
from tuner.search.records import BASELINE_DEFAULT, TrialRecord, TrialStatus
from tuner.search.shapes import searched_text
from tuner.search.study import StudyListener, StudySetup, open_study, run_search
from tuner.search.study_handle import StudyHandle
from tuner.settings import Value
from tuner.workflow.apprequirements import AppRequirements, Installed, missing_module_hint
from tuner.workflow.confirm import (
    Candidate,
    Confirmed,
    MoreRounds,
    OnRun,
    Verdict,
    client_bound_line,
    confirm,
    measured_more,
)
from tuner.workflow.front_close import settle_front
from tuner.workflow.front_inputs import OfferedRate, check_reachable, with_offered_rate
from tuner.workflow.lane_evidence import lane_decisions
from tuner.workflow.logcost import logging_costs
from tuner.workflow.lower_tail import settle_with_tail, tail_trial
from tuner.workflow.measurer import measurer
from tuner.workflow.pareto_front import ConfirmedFront
from tuner.workflow.proven_file import (
    BootCheck,
    NotProvenClean,
    Requirements,
    ServerConfig,
    Unproven,
    first_line,
    prove_clean_boot,
    write_artifact,
)
from tuner.workflow.provenance import Evidence, Origin, header_lines, install_command
from tuner.workflow.sizes import measure_sizes


@dataclass(frozen=True)
class TuneOutcome:
    records: list[TrialRecord]
    confirmed: list[Confirmed]
    verdict: Verdict | None
    out_path: Path | None
    noise: str
    unproven: Unproven | None = None  # written as FILE.unproven instead: see proven_file.py
    requirements: AppRequirements | None = None  # the app's, named in the file
    sizing: SizingRule | None = None  # --for-cpus: the rule the file computes its counts by
    # The confirmation rounds that reached the load generator's limit, and the load CPUs they
    # would have needed ("" when none did).
    client_bound: str = ""
    # How far the study searched each concurrency model (tuner.search.shapes.searched_text).
    models: tuple[str, ...] = ()
    # `multi`: the confirmed front, its rate and its pick rule (tuner.workflow.pareto_front).
    front: ConfirmedFront | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "trials": len(self.records),
            "completed": sum(r.state is TrialStatus.COMPLETE for r in self.records),
            "failed": [
                {"trial": r.number, "reason": r.fail_reason}
                for r in self.records
                if r.state is TrialStatus.FAIL
            ],
            "pruned": sum(r.state is TrialStatus.PRUNED for r in self.records),
            "cannot_win": [  # measured, but unfair or outside the SLOs
                {"trial": r.number, "reason": r.fail_reason}
                for r in self.records
                if r.state is TrialStatus.COMPLETE and not r.feasible
            ],
            "models_searched": list(self.models),
            "confirmation": [c.summary().to_json() for c in self.confirmed],
            "verdict": self.verdict.to_json() if self.verdict else None,
            "config_file": str(self.out_path) if self.out_path else None,
            "unproven_file": str(self.unproven.path) if self.unproven else None,
            "unproven_reason": self.unproven.reason if self.unproven else None,
            "app_requirements": {
                "packages": list(self.requirements.lines),
                "source": self.requirements.source,
            }
            if self.requirements
            else None,
            "noise": self.noise,
            "sizing": self.sizing.literal() if self.sizing else None,
            "client_bound": self.client_bound_json(),
            "blocked_loop": self.blocked_loop_json(),
            "distinct_configs": self.distinct_configs,
            "repeats_not_measured": sum(r.duplicate_of is not None for r in self.records),
            "front": self.front.to_json() if self.front else None,
        }

    def client_bound_json(self) -> dict[str, Any] | None:
        """The client_bound configs, the load CPUs the hungriest would have needed, the line."""
        if not self.client_bound:
            return None
        bound = [entry for entry in self.confirmed if entry.client_bound]
        needs = [need for entry in bound if (need := entry.load_need()) is not None]
        need = max(needs, key=lambda n: n.load_cpus, default=None)
        return {
            "configs": [entry.candidate.label for entry in bound],
            "load_need": need.to_json() if need else None,
            "line": self.client_bound,
        }

    @property
    def distinct_configs(self) -> int:
        """How many different configs the study measured (a repeat reuses its twin's result)."""
        measured = [r for r in self.records if r.measured and r.duplicate_of is None]
        return len({tuple(sorted(r.settings.items())) for r in measured})

    def _sampled(self) -> list[TrialRecord]:
        """The trials measured (pruned ones too), a repeat of an earlier config not again."""
        return [r for r in self.records if r.measurement and r.duplicate_of is None]

    def _blocked(self) -> list[TrialRecord]:
        """The measured trials whose server saw the app block its event loop."""
        return [r for r in self._sampled() if r.measurement and r.measurement.blocked_loop]

    def blocked_loop_json(self) -> dict[str, Any] | None:
        blocked = self._blocked()
        if not blocked:
            return None
        worst = _worst_blocked(blocked)
        assert worst.measurement is not None and worst.measurement.blocked_loop is not None
        measured = len(self._sampled())
        return {
            "trials": len(blocked),
            "measured": measured,
            "worst_trial": worst.number,
            **worst.measurement.blocked_loop.to_json(),
        }

    def blocked_loop_line(self) -> str:
        """Said once for the study ("" when not seen): the app blocks its event loop, which is
        its own defect; the pick is the best config for the app as it is, not a cure."""
        blocked = self._blocked()
        if not blocked:
            return ""
        worst = _worst_blocked(blocked)
        assert worst.measurement is not None and worst.measurement.blocked_loop is not None
        measured = len(self._sampled())
        return (
            f"the app blocked its event loop in {len(blocked)} of {measured} measured trials "
            f"(worst, {worst.label}: {worst.measurement.blocked_loop.describe()}). The pick is "
            "the best config for the app as written; fixing the app will do more than any "
            "setting"
        )

    def searched_line(self) -> str:
        repeats = sum(r.duplicate_of is not None for r in self.records)
        pruned = sum(r.state is TrialStatus.PRUNED for r in self.records)
        notes = [f"{repeats} repeats reused an earlier result"] if repeats else []
        if pruned:
            notes.append(f"{pruned} pruned as behind beyond the noise")
        line = f"searched: {self.distinct_configs} distinct configs in {len(self.records)} trials"
        line += f" ({'; '.join(notes)})" if notes else ""
        return line + (f"; by concurrency model: {'; '.join(self.models)}" if self.models else "")


# The counts at the other sizes, given the winner's settings, its req/s and the study's trials.
SizingFor = Callable[[Mapping[str, Value], float | None, Sequence[TrialRecord]], SizingRule]


@dataclass(frozen=True)
class TuneRun:
    """How one study's tune runs, as the command's options gave it: the search's length, the
    confirmation, the clean-venv proof, and --for-cpus' sizes (none without it)."""

    n_trials: int
    timeout_s: float | None
    top_k: int
    confirm_rounds: int
    check_clean_venv: bool = True
    sizes: tuple[float, ...] = ()


@dataclass(frozen=True)
class WinnerFile:
    """Where the winner's file goes and what it must name and prove: the app's requirements,
    the clean-venv boot, and with `sizing_for` (--for-cpus) the rule it sizes itself by."""

    out_path: Path
    app_requirements: AppRequirements | None = None
    check_clean_venv: bool = True
    sizing_for: SizingFor | None = None


@keep_workers()  # one set of load workers for the search and the confirmation rounds
def tune(
    setup: StudySetup,
    run: TuneRun,
    *,
    out_path: Path,
    listener: StudyListener,
    on_confirm_run: OnRun | None = None,
    app_requirements: AppRequirements | None = None,
) -> TuneOutcome:
    """One study at `setup`'s CPUs; with `run.sizes` (--for-cpus, `setup` at the largest), the
    winner's counts are measured at the other sizes too (tuner/workflow/sizes.py) and the file
    computes its counts at boot from the rule through them."""
    study = start(setup, app_requirements, run.check_clean_venv)
    rate = None
    if setup.objective.trade_off:  # the front: p99 at one offered rate against memory
        setup, rate = with_offered_rate(setup, study, listener)
    run_search(setup, study, n_trials=run.n_trials, timeout_s=run.timeout_s, listener=listener)
    records = study.records(queued=False)
    if rate is not None:  # a rate none carried, a memory limit none fits: said now, exit 2
        check_reachable(setup.slo, [(r.label, r.figures) for r in records if r.measured], rate.rps)
    candidates = pick_candidates(
        setup, records, run.top_k, pareto=study.pareto_numbers(), noise=study.noise()
    )
    measure = measurer(setup)
    rounds = run.confirm_rounds
    confirmed = confirm(candidates, rounds, measure, on_confirm_run)
    # --for-cpus: the other sizes are measured once the reference study has its winner.
    sizing_for: SizingFor | None = (
        partial(
            measure_sizes,
            setup,
            run.sizes,
            n_trials=run.n_trials,
            rounds=run.confirm_rounds,
            listener=listener,
        )
        if run.sizes
        else None
    )
    return conclude(
        setup,
        study,
        records,
        confirmed,
        more=measured_more(measure, rounds, on_confirm_run),
        file=WinnerFile(out_path, app_requirements, run.check_clean_venv, sizing_for),
        rate=rate,
    )


def start(
    setup: StudySetup, app_requirements: AppRequirements | None, check_clean_venv: bool
) -> StudyHandle:
    """Open (or resume) the study and prove the default boots clean."""
    study = open_study(setup)
    if check_clean_venv:
        prove_default_clean(setup, app_requirements)
    return study


def conclude(
    setup: StudySetup,
    study: StudyHandle,
    records: list[TrialRecord],
    confirmed: list[Confirmed],
    *,
    more: MoreRounds,
    file: WinnerFile,
    rate: OfferedRate | None = None,
) -> TuneOutcome:
    """Decide from the confirmation rounds (`more` measures configs in doubt again: a close
    call, a winner unfair in some of its runs, or equals far apart), and write the winner's
    file with its evidence. A trade-off objective confirms its front instead
    (tuner.workflow.pareto_front: measured at `rate`, --rate's when not given; `more` measures
    its close calls again, tuner.workflow.front_close) and writes the point its rule picks."""
    app_requirements = file.app_requirements
    front = None
    if setup.objective.trade_off:
        if rate is None and setup.load.rate_rps:
            rate = OfferedRate(setup.load.rate_rps, "--rate")
        decided = settle_front(
            confirmed,
            setup.slo,
            rate_rps=rate.rps if rate else None,
            rate_source=rate.source if rate else "closed loop: no rate offered",
            more=more,
            defaults=setup.adapter.resolve({}),
        )
        if decided is None:  # as after the search: a rate or a limit no config met
            figures = [(c.candidate.label, c.median_figures()) for c in confirmed if c.runs]
            check_reachable(setup.slo, figures, rate.rps if rate else None)
        verdict = decided.verdict if decided else None
        front = decided.front if decided else None
    else:
        defaults = setup.adapter.resolve({})
        verdict = settle_with_tail(confirmed, setup.objective, setup.slo, defaults, more)
    noise = noise_summary(study.attrs().cpu_probe_ms or [], confirmed)
    load_cpus = setup.load.load_cpus
    bound = client_bound_line(confirmed, len(load_cpus), spare_cpus(setup.server_cpus, load_cpus))
    written = unproven = sizing = None
    if verdict is not None:
        chosen = verdict.winner
        if file.sizing_for is not None:
            rps = chosen.rps.median if chosen.rps else None
            sizing = file.sizing_for(chosen.candidate.settings, rps, records)
        header = header_lines(
            Origin(
                setup.name,
                chosen.candidate.trial_number,
                {**_context(setup), "sized_at_boot": sizing is not None},
                describe_workload(setup),
            ),
            Evidence(
                verdict,
                chosen,
                noise,
                client_bound=bound,
                log_costs=logging_costs(
                    confirmed, setup.adapter.logging_settings, setup.adapter.resolve
                ),
                lanes=lane_decisions(records, confirmed, chosen.candidate.settings),
            ),
        )
        # Kept first, so `tuner emit --study` can write the pick again with these settings and
        # this header (a variant's settings are no trial's).
        study.save_pick(chosen.candidate.settings, header, sizing.to_dict() if sizing else None)
        try:
            written = write_artifact(
                ServerConfig(setup.adapter, setup.app, chosen.candidate.settings),
                header,
                file.out_path,
                boot=BootCheck(setup.server_cpus, setup.ready_path),
                requirements=Requirements(
                    app_lines=app_requirements.lines if app_requirements else (),
                    source=app_requirements.describe() if app_requirements else "",
                    check_clean_venv=file.check_clean_venv,
                    keep_unproven=True,
                ),
                sizing=sizing,
            )
        except Unproven as exc:
            unproven = exc
        else:
            _write_front_block(setup, chosen.candidate.settings, header, written)
    outcome = TuneOutcome(
        records,
        confirmed,
        verdict,
        written,
        noise,
        unproven,
        app_requirements,
        sizing,
        bound,
        tuple(searched_text(records, setup.adapter)),
        front,
    )
    study.save_result(outcome.to_json())
    return outcome


def _worst_blocked(blocked: Sequence[TrialRecord]) -> TrialRecord:
    def share(record: TrialRecord) -> float:
        loop = record.measurement.blocked_loop if record.measurement else None
        return loop.share if loop else 0.0

    return max(blocked, key=share)


# What a clean environment without one of the app's requirements fails with.
MISSING_IMPORT = re.compile(r"No module named|cannot import name|ImportError")


def prove_default_clean(setup: StudySetup, app_requirements: AppRequirements | None) -> None:
    """Boot the server's default config in a clean virtual environment holding only its
    packages and the app's requirements, before the first trial: a requirement the app's list
    lacks fails in seconds with the fix named, not after the study (ConfigError, exit 2)."""
    defaults = setup.adapter.resolve({})
    lines = app_requirements.lines if app_requirements else ()
    requirements = (*setup.adapter.requirements(defaults), *lines)
    try:
        prove_clean_boot(
            ServerConfig(setup.adapter, setup.app, defaults),
            requirements,
            boot=BootCheck(setup.server_cpus, setup.ready_path),
        )
    except (NotProvenClean, AppBrokenError) as exc:
        reason = exc.reason if isinstance(exc, NotProvenClean) else first_line(exc)
        if not MISSING_IMPORT.search(reason):
            # Not a requirement the list lacks (an app that refuses to load under a server,
            # a value the server refuses): the study's first trial reports it as it does here.
            return
        hint = missing_module_hint(reason, Installed.here())
        fix = f"; {app_requirements.describe()}: {app_requirements.fix}" if app_requirements else ""
        raise ConfigError(
            f"the default {setup.adapter.name} config does not boot in a clean virtual "
            f"environment holding only `{install_command(requirements)}`, so no trial was run: "
            f"{reason}" + (f" ({hint})" if hint else "") + fix
        ) from None


def pick_candidates(
    setup: StudySetup,
    records: Sequence[TrialRecord],
    top_k: int,
    pareto: Sequence[int],
    noise: float = MIN_MARGIN,
) -> list[Candidate]:
    """The best `top_k` usable trials (as the objective shortlists them: for `multi`, up to
    `FRONT_POINTS` of the Pareto front, spread along it), the server's baselines, a nearly
    fair trial that ranks above them (see `_nearly_fair_retry`), variants of the top one (its
    logging both ways, its other settings at the default) and the default with its
    per-request log off; for a front, each point with its other settings at the default and
    with its threads at the default too."""
    usable = [r for r in records if r.measured and r.feasible and not r.baseline]
    front = set(pareto)
    ranked = setup.objective.shortlist(usable, _figures, lambda r: r.number in front)
    baselines = [
        Candidate(b.label, _baseline_trial(records, b.label), dict(b.values))
        for b in setup.adapter.baselines(setup.cpus)
    ]
    # Configs are compared as the server would run them: a searched trial that resolves to a
    # baseline (or to a config already picked) is that config, and the next one in the ranking
    # takes its place, so `top_k` searched configs get confirmed when the study has them.
    seen: list[dict[str, Any]] = []

    def new(candidate: Candidate) -> bool:
        resolved = setup.adapter.resolve(candidate.settings)
        if resolved in seen:
            return False
        seen.append(resolved)
        return True

    chosen = [b for b in baselines if new(b)]
    picked: list[Candidate] = []
    count = setup.objective.confirm_count(top_k)
    for record in ranked:
        if len(picked) == count:
            break
        if new(candidate := Candidate(record.label, record.number, record.settings)):
            picked.append(candidate)
    tail = [c for c in _tail_candidate(setup, records, ranked, chosen + picked, noise) if new(c)]
    retry = [c for c in _nearly_fair_retry(setup, records, picked) if new(c)]
    top = picked[:1]
    variants = [
        v
        for v in _default_logging_variant(setup, top)
        + _quiet_logging_variant(setup, top + [b for b in baselines if b.label == BASELINE_DEFAULT])
        + _lean_variant(setup, picked if setup.objective.trade_off else top)
        + (_default_threads_variant(setup, picked) if setup.objective.trade_off else [])
        if new(v)
    ]
    return chosen + picked + tail + retry + variants


def _tail_candidate(
    setup: StudySetup,
    records: Sequence[TrialRecord],
    ranked: Sequence[TrialRecord],
    chosen: Sequence[Candidate],
    noise: float,
) -> list[Candidate]:
    """The trial as fast as the best within one run's `noise` with the lowest p99, when the
    configs chosen so far all have a far higher one (tuner.workflow.lower_tail)."""
    by_number = {r.number: r for r in records if r.measured}
    confirmed = [by_number[c.trial_number] for c in chosen if c.trial_number in by_number]
    trial = tail_trial(setup.objective, ranked, confirmed, _figures, noise)
    return [Candidate(trial.label, trial.number, trial.settings)] if trial else []


def _nearly_fair_retry(
    setup: StudySetup, records: Sequence[TrialRecord], picked: Sequence[Candidate]
) -> list[Candidate]:
    """The best trial that one run judged unfair only by a little (`checks.nearly_fair`,
    within the SLOs otherwise), when it ranks above the best picked trial. Its one run could
    have tipped either way (gunicorn's gevent on hello: 0.89 in the study's trial, fair in the
    grid's runs), so the confirmation judges it like every other figure, by the majority of
    its runs; a config mostly unfair there still cannot win."""
    nearly = [
        r
        for r in records
        if r.measured
        and not r.feasible
        and not r.baseline
        and r.measurement is not None
        and nearly_fair(r.measurement)
        and objectives.feasible(setup.slo, replace(r.figures, unfairness=0.0))
    ]
    if not nearly:
        return []
    best = setup.objective.rank(nearly, _figures_fair)[0]
    by_number = {r.number: r for r in records}
    number = picked[0].trial_number if picked else None
    top = by_number.get(number) if number is not None else None
    if top is not None and setup.objective.rank([top, best], _figures_fair)[0] is not best:
        return []
    return [Candidate(best.label, best.number, best.settings)]


def _figures_fair(record: TrialRecord) -> Figures:
    """A record's figures as if judged fair, to rank it among fair ones."""
    return replace(record.figures, unfairness=0.0)


def _default_logging_variant(setup: StudySetup, top: Sequence[Candidate]) -> list[Candidate]:
    """The top config with logging as the server's default, if the search changed it: logging
    changes what an operator sees, so it stays as shipped unless turning it off (or on) is
    measurably better, which the interleaved rounds then show (the tie goes to fewer changes)."""
    defaults = setup.adapter.resolve({})
    shipped = {name: defaults[name] for name in setup.adapter.logging_settings}
    return _with_logging(setup, top, shipped, "default logging")


def _quiet_logging_variant(setup: StudySetup, top: Sequence[Candidate]) -> list[Candidate]:
    """The top config and the default with their per-request log off, if they log: the search
    may leave logging at a default that writes a line per request (uWSGI) while the best config
    of the space turns it off (the uWSGI hello and fib grids' did; on fib, the default with its
    log off was the grid's best). Measured side by side, such a variant is written only if it
    is measurably better; a tie goes to fewer changes, so to the server's logging."""
    return _with_logging(setup, top, setup.adapter.logging_settings, "logging off")


def _with_logging(
    setup: StudySetup, configs: Sequence[Candidate], logging: Mapping[str, Value], words: str
) -> list[Candidate]:
    """Each of `configs` with its logging settings set to `logging`, where that changes it."""
    variants = []
    for candidate in configs:
        current = setup.adapter.resolve(candidate.settings)
        if any(current[name] != value for name, value in logging.items()):
            settings = setup.adapter.resolve({**current, **logging})
            label = f"{candidate.label}, {words}"
            variants.append(Candidate(label, candidate.trial_number, settings))
    return variants


def _lean_variant(setup: StudySetup, top: Sequence[Candidate]) -> list[Candidate]:
    """Each config of `top` (the single pick's first, or every front point) with only what
    makes its concurrency: its process and thread counts and the settings its concurrency
    model needs (worker class, gevent...), everything else at the server's default. A search
    also moves settings that make no measurable difference (granian picked
    workers_lifetime=60, cheroot expiration_interval=5); measured side by side, this variant
    ties with the config when they do nothing, and then the tie goes to fewer changes (on a
    front too: tuner.workflow.pareto_front), so the written file holds only what its figures
    need."""
    adapter = setup.adapter
    defaults = adapter.resolve({})
    levers = {adapter.process_model.processes, adapter.process_model.threads} - {None}
    variants = []
    for candidate in top:
        current = adapter.resolve(candidate.settings)
        model = adapter.concurrency_model(current)
        lean = dict(current)
        reverted_any = True
        while reverted_any:  # again, until none moves: one may need another reverted first
            reverted_any = False
            for name, value in lean.items():
                if name in levers or value == defaults[name]:
                    continue
                try:
                    reverted = adapter.resolve({**lean, name: defaults[name]})
                except ConfigError:  # another setting needs it (the server refuses the mix)
                    continue
                if reverted == lean:  # how the server is reached sets it (gunicorn's
                    continue  # keepalive 0 behind uwsgi_pass): it does not revert
                if adapter.concurrency_model(reverted) == model:
                    lean, reverted_any = reverted, True
                    break
        if lean != current:
            label = f"{candidate.label}, other settings at default"
            variants.append(Candidate(label, candidate.trial_number, lean))
    return variants


def _default_threads_variant(setup: StudySetup, points: Sequence[Candidate]) -> list[Candidate]:
    """Each front point with its threads per process at the server's default, where the search
    changed them. Every thread holds a stack and buffers, so on the memory axis a point's
    threads cost what its p99 may not repay; the search samples thread counts with everything
    else, and its front can keep a many-thread config whose processes alone are as fast for
    less (uWSGI on fib: 2 processes x 8 threads beside 2 processes). Measured in the same
    rounds, the two merge when the noise cannot separate their p99, and the cheaper stands."""
    adapter = setup.adapter
    threads = adapter.process_model.threads
    if threads is None:
        return []
    default = adapter.resolve({})[threads]
    variants = []
    for candidate in points:
        current = adapter.resolve(candidate.settings)
        if current[threads] == default:
            continue
        try:
            fewer = adapter.resolve({**current, threads: default})
        except ConfigError:  # the concurrency model needs threads (gthread, blocking pools)
            continue
        if fewer != current:
            label = f"{candidate.label}, {threads} at default"
            variants.append(Candidate(label, candidate.trial_number, fewer))
    return variants


def _figures(record: TrialRecord) -> Figures:
    return record.figures


def _baseline_trial(records: Sequence[TrialRecord], label: str) -> int | None:
    return next((r.number for r in records if r.baseline == label), None)


def _write_front_block(
    setup: StudySetup, settings: Mapping[str, Value], header: Sequence[str], written: Path
) -> None:
    """Behind a front (--front nginx), the front's block that was measured, beside the file."""
    fronted = front_of(setup.adapter)
    if fronted is None:
        return
    from tuner.front.block import write_front_block

    write_front_block(
        fronted,
        setup.app,
        settings,
        written,
        header,
        server_cpus=setup.server_cpus,
        ready_path=setup.ready_path,
    )


def _context(setup: StudySetup) -> dict[str, Any]:
    plan = setup.plan({}, setup.workdir / "unused.log")
    return {**run_context(plan), **limits_context(setup.limits, None)}


def describe_workload(setup: StudySetup) -> str:
    load = setup.load
    paths = ", ".join(f"{r.method} {r.path}" for r in load.workload.requests[:3])
    loop = f"open loop at {load.rate_rps:g} req/s" if load.rate_rps else "closed loop"
    keepalive = "keep-alive" if load.keepalive else "Connection: close"
    clients = "" if load.clients.default else f"; {load.clients.describe()}"
    lanes = f"; beside it {load.lanes.describe()}" if load.lanes else ""
    return (
        f"{paths}; {load.connections} connections, {loop}, {keepalive}{clients}{lanes}; "
        f"{load.warmup_s:g} s warm-up + {load.duration_s:g} s per run"
    )


def noise_summary(probes: Sequence[Sequence[float]], confirmed: Sequence[Confirmed]) -> str:
    """How much the same thing varied: the CPU probe over the study, and repeats of each config."""
    parts = []
    times = [float(ms) for _trial, ms in probes]
    if len(times) >= 2:
        spread = Spread.of(times)
        parts.append(
            f"CPU probe {spread.low:.1f}-{spread.high:.1f} ms "
            f"({spread.relative_range:.0%} range over {len(times)} probes)"
        )
    ranges = [c.rps.relative_range for c in confirmed if c.rps and len(c.rps.samples) > 1]
    if ranges:
        parts.append(
            f"repeats of one config varied {statistics.median(ranges):.0%} in req/s "
            f"(median over {len(ranges)} configs, max {max(ranges):.0%})"
        )
    parts += losses_text([run.cores for c in confirmed for run in c.runs if run.cores is not None])
    parts += [text for c in confirmed if (text := c.repeats_text())]
    return "; ".join(parts) or "not measured (too few probes or rounds)"
