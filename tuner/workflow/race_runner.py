"""`compare` as a race: rungs of trials per server, each server's best re-measured beside the
others', the servers behind beyond the noise stopped (the rule: tuner/workflow/race_rule.py), then
one set of interleaved final rounds for the finalists' candidates and every server's default.

The rungs measure with short windows (RUNG_DURATION_S after RUNG_WARMUP_S, or the user's if
shorter), as successive halving spends little on each config early; the final rounds use the
user's windows. Each server's study is a plain study (NAME-SERVER) that `tuner tune` can resume.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tuner.loadgen.engine import keep_workers
from tuner.machine.sizing import SizingRule
from tuner.measure.runner import run_bench
from tuner.metrics.measurement import Measurement
from tuner.search.carryover import Sample, shape_of, slots
from tuner.search.records import BASELINE_DEFAULT, TrialRecord
from tuner.search.study import StudyListener, StudySetup, run_search
from tuner.search.study_handle import StudyHandle
from tuner.settings import Value
from tuner.workflow import race_rule
from tuner.workflow.apprequirements import AppRequirements
from tuner.workflow.confirm import (
    Candidate,
    Confirmed,
    OnRun,
    confirm,
    measured_more,
    more_rounds,
)
from tuner.workflow.measurer import measurer
from tuner.workflow.race_rule import BudgetPlan, Call, RunCost, Standing
from tuner.workflow.repeats import Repeat, RunAllowance
from tuner.workflow.sizes import measure_sizes, size_confirm_runs, size_trials
from tuner.workflow.tune_steps import (
    SizingFor,
    TuneOutcome,
    WinnerFile,
    conclude,
    pick_candidates,
    start,
)

# A rung's measurement windows: Hyperband's cheap early evaluations (the final is full length).
RUNG_DURATION_S = 2.0
RUNG_WARMUP_S = 0.5
# Seconds a run takes besides its windows (the server's start and stop), until measured.
OVERHEAD_ESTIMATE_S = 1.5
# Configs a finalist brings to the final rounds besides its --top-k: its baselines and a variant.
FINAL_EXTRA_CANDIDATES = 3

Say = Callable[[str], None]  # a line for the user


@dataclass
class Lane:
    """One server in the race."""

    setup: StudySetup  # the user's windows: the final rounds and the written file
    rung_setup: StudySetup  # the rungs' short windows
    listener: StudyListener
    study: StudyHandle | None = None
    stopped: str = ""  # why it stopped drawing trials early ("" while it races)
    done: bool = False  # drew every trial it may
    gain: float = 0.0  # its best trial's gain over the last rung
    best_value: float | None = None  # its best trial's headline figure after the last rung
    entries: dict[str, Confirmed] = field(default_factory=dict)  # race runs, by config

    @property
    def server(self) -> str:
        """Its contender's name: the server's, or "gunicorn-asgi" beside "gunicorn"."""
        return self.setup.contender

    def records(self) -> list[TrialRecord]:
        return self.study.records(queued=False) if self.study is not None else []

    def trials(self) -> int:
        """Trials it drew, less repeats of a config already measured (those cost nothing)."""
        return sum(r.duplicate_of is None for r in self.records())

    def best(self) -> TrialRecord | None:
        """Its best measured config that could win (fair, within the SLOs), baselines included."""
        usable = [r for r in self.records() if r.measured and r.feasible]
        ranked = self.setup.objective.rank(usable, lambda r: r.figures)
        return ranked[0] if ranked else None

    def entry(self, record: TrialRecord) -> Confirmed:
        """The race's runs of `record`'s config (kept across rungs while it stays the best)."""
        key = repr(sorted(record.settings.items()))
        if key not in self.entries:
            label = f"{self.server} {record.label}"
            self.entries[key] = Confirmed(
                Candidate(label, record.number, dict(record.settings), self.server)
            )
        return self.entries[key]


def lean_finalists(finalists: Sequence[str], extra_candidates: int) -> list[str]:
    """The finalists beyond the top MIN_FINALISTS, when they bring `extra_candidates` (fewer
    than all their candidates, to fit the budget; 0: all)."""
    return list(finalists[race_rule.MIN_FINALISTS :]) if extra_candidates else []


@dataclass(frozen=True)
class RaceResult:
    lanes: list[Lane]
    finalists: list[str]
    standings: dict[str, Standing]
    noise: float
    rungs: int
    # Configs each finalist beyond the top MIN_FINALISTS brings to the final rounds when the
    # budget holds fewer than all its candidates; 0 when it holds them all.
    extra_candidates: int
    # The final rounds' configs: each finalist's candidates and every other server's default.
    final: list[Candidate]
    # Runs beyond the final rounds' own the budget has time for (repeats of lossy runs, then
    # the verdicts' second looks); None: no limit.
    repeats_left: int | None = None

    @property
    def lean(self) -> list[str]:
        """The finalists that bring only some of their candidates, to fit the budget."""
        return lean_finalists(self.finalists, self.extra_candidates)

    def to_json(self, budget_s: float) -> dict[str, object]:
        """The race as compare.json and `compare --json` give it, with the budget it had."""
        return {
            "budget_s": budget_s,
            "rungs": self.rungs,
            "noise": self.noise,
            "finalists": self.finalists,
            "stopped": {lane.server: lane.stopped for lane in self.lanes if lane.stopped},
            "final_configs": len(self.final),
            "repeats_left": self.repeats_left,
        }


@dataclass(frozen=True)
class RaceOptions:
    budget_s: float
    max_trials: int  # --trials: the most one server draws
    top_k: int
    final_rounds: int
    app_requirements: Mapping[str, AppRequirements | None]
    check_clean_venv: bool
    sizes: tuple[float, ...] = ()  # --for-cpus: the race runs at the largest

    @property
    def sized_trials(self) -> int:
        """Runs each finalist makes after the final rounds: at each other size, its count-only
        trials and the rounds its best counts are decided in (tuner.workflow.sizes)."""
        if not self.sizes:
            return 0
        per_size = size_trials(self.max_trials) + size_confirm_runs(self.final_rounds)
        return (len(self.sizes) - 1) * per_size


def rung_setup(setup: StudySetup) -> StudySetup:
    """`setup` with the rungs' short windows (never longer than the user's)."""
    load = replace(
        setup.load,
        duration_s=min(setup.load.duration_s, RUNG_DURATION_S),
        warmup_s=min(setup.load.warmup_s, RUNG_WARMUP_S),
    )
    return replace(setup, load=load)


class _Clock:
    """Time spent and runs made, for the budget: a run's cost is measured, not assumed."""

    def __init__(self, now: Callable[[], float], first: StudySetup) -> None:
        self.now = now
        self.started = now()
        self.rung_runs = 0
        self.rung_spent = 0.0
        self.round_runs = 0  # runs of the race's rounds, and how many were measured twice
        self.round_repeats = 0
        windows = first.load.duration_s + first.load.warmup_s
        short = rung_setup(first).load
        self.short_windows = short.duration_s + short.warmup_s
        self.final_windows = windows

    @property
    def spent_s(self) -> float:
        return self.now() - self.started

    def cost(self) -> RunCost:
        overhead = OVERHEAD_ESTIMATE_S
        if self.rung_runs:
            overhead = max(0.0, self.rung_spent / self.rung_runs - self.short_windows)
        share = self.round_repeats / self.round_runs if self.round_runs else 0.0
        return RunCost(self.short_windows + overhead, self.final_windows + overhead, share)


@keep_workers()  # one set of load workers for every rung, round and server
def run_race(
    setups: Sequence[StudySetup],
    listeners: Mapping[str, StudyListener],
    options: RaceOptions,
    say: Callable[[str], None],
    on_run: OnRun | None = None,
    now: Callable[[], float] = time.monotonic,
) -> RaceResult:
    """Race the servers' studies until the budget leaves only the final rounds (or no server
    may draw more); the rungs and every stop are reported through `say`."""
    lanes = [Lane(s, rung_setup(s), listeners[s.contender]) for s in setups]
    headline = setups[0].objective.headlines[0]
    clock = _Clock(now, setups[0])
    plan = BudgetPlan(
        options.budget_s,
        len(lanes),
        options.top_k + FINAL_EXTRA_CANDIDATES,
        options.final_rounds,
        options.sized_trials,
    )
    _say_plan(options, plan, clock, say)
    first = min(plan.first_rung(clock.cost()), options.max_trials)
    say(f"race: rung 1: {len(lanes)} servers, {first} trials each")
    for lane in lanes:
        _first_rung(lane, lanes, first, options, clock, say)
    standings: dict[str, Standing] = {}
    rungs, next_round = 1, 0
    while True:
        racing = [lane for lane in lanes if not lane.stopped]
        for lane, entry in _race_rounds(racing, next_round, clock, on_run, say):
            spread = entry.spread(headline)
            if spread is not None:
                trials = lane.trials()
                standings[lane.server] = Standing(lane.server, trials, spread, lane.gain, lane.done)
        next_round += race_rule.RACE_ROUNDS
        noise = _noise(lanes)
        judged = [standings[lane.server] for lane in racing if lane.server in standings]
        calls = race_rule.judge(
            judged,
            noise=noise,
            rungs_left=plan.rungs_left(clock.spent_s, clock.cost(), len(judged)),
            higher_is_better=headline.higher_is_better,
        )
        _stop(lanes, calls, say)
        finalists = race_rule.finalists(
            list(standings.values()),
            noise=noise,
            higher_is_better=headline.higher_is_better,
        )
        drawing = [lane for lane in lanes if not lane.stopped and not lane.done]
        if not drawing or not plan.rung_fits(
            clock.spent_s, clock.cost(), len(drawing), len(finalists)
        ):
            break
        rungs += 1
        say(f"race: rung {rungs}: " + ", ".join(lane.server for lane in drawing))
        for lane in drawing:
            say(f"{lane.server}: rung {rungs}")  # its trial lines follow
            _rung(lane, race_rule.RUNG_TRIALS, options, clock)
    extra = plan.extra_candidates(clock.spent_s, clock.cost(), len(finalists))
    fewer = extra if extra < plan.final_candidates else 0
    lean = lean_finalists(finalists, fewer)
    chosen = _final_candidates(lanes, finalists, lean, extra, options.top_k)
    # What the final will measure, not the plan's most: a finalist brings fewer candidates
    # than the plan counts when it has fewer trials or configs than --top-k and its variants.
    runs = plan.runs_of_final(len(chosen), len(finalists))
    repeats = plan.repeats_left(clock.spent_s, clock.cost(), runs)
    if clock.round_repeats:
        say(
            f"race: {clock.round_repeats} of {clock.round_runs} runs of its rounds lost too "
            f"much of their CPUs and were measured again; the budget holds {repeats} more runs "
            "in the final rounds, for such repeats and then second looks"
            f"{_short_of(plan, clock, runs, repeats)}"
        )
    result = RaceResult(lanes, finalists, standings, noise, rungs, fewer, chosen, repeats)
    if result.lean:
        say(
            f"race: {len(finalists)} finalists, the noise cannot separate them; so that the "
            f"final rounds fit the budget, {', '.join(result.lean)} bring {extra} configs "
            f"each (their default and best first), the top {race_rule.MIN_FINALISTS} all theirs"
        )
    return result


def _short_of(plan: BudgetPlan, clock: _Clock, runs: int, repeats: int) -> str:
    """When the race's share of repeats predicts more lossy final runs than the budget holds:
    how many, and the budget that would hold them (a shared machine's answer is only as sharp
    as the repeats its final rounds can make)."""
    cost = clock.cost()
    expected = plan.expected_repeats(cost, runs)
    if expected <= repeats:
        return ""
    minutes = math.ceil(plan.budget_for_repeats(clock.spent_s, cost, runs) / 60)
    return (
        f", of the {expected} its share predicts; a --budget of {minutes} min or more would "
        "hold them all"
    )


def _say_plan(options: RaceOptions, plan: BudgetPlan, clock: _Clock, say: Say) -> None:
    """Before the first rung: the size the race runs at, and a budget too small for it."""
    if options.sizes:
        others = ", ".join(f"{cpus:g}" for cpus in options.sizes[:-1])
        say(
            f"race: at {options.sizes[-1]:g} CPUs; then each finalist draws "
            f"{size_trials(options.max_trials)} trials at {others} CPUs (its counts only) and "
            f"measures its best counts there again in {options.final_rounds} interleaved rounds, "
            "inside the budget"
        )
    fixed_s = plan.fixed_s(clock.cost())
    if fixed_s > options.budget_s:
        say(
            f"race: the budget ({options.budget_s / 60:g} min) is below what the first rung "
            f"and the final rounds take at these windows (about {fixed_s / 60:.0f} min): they "
            "run anyway, and no further rung"
        )


def _stop(lanes: Sequence[Lane], calls: Sequence[Call], say: Say) -> None:
    """The servers the race's calls stop drawing trials."""
    for call in (c for c in calls if c.stop):
        lane = next(lane for lane in lanes if lane.server == call.server)
        lane.stopped = call.reason
        say(f"race: {lane.server} stops drawing trials: {call.reason}")


def _first_rung(
    lane: Lane,
    lanes: Sequence[Lane],
    trials: int,
    options: RaceOptions,
    clock: _Clock,
    say: Callable[[str], None],
) -> None:
    """Open the server's study with its starts at the concurrency the servers before it
    measured (tuner.search.carryover), and draw its first rung."""
    samples = [sample for other in lanes if other.study is not None for sample in _samples(other)]
    shape = shape_of(samples)
    if shape is not None:
        target = shape.concurrency(lane.setup.cpus, lane.setup.load.connections)
        lane.setup = replace(lane.setup, start_concurrency=target)
        lane.rung_setup = replace(lane.rung_setup, start_concurrency=target)
        say(
            f"{lane.server}: starts at {target} requests at once, from the servers raced "
            f"before ({shape.describe()})"
        )
    say(f"{lane.server}: rung 1")  # its trial lines follow
    lane.study = start(
        lane.rung_setup,
        options.app_requirements.get(lane.server),
        options.check_clean_venv,
    )
    _rung(lane, trials, options, clock)
    default = next((r for r in lane.records() if r.baseline == BASELINE_DEFAULT), None)
    # The first rung's gain is over the server's default: what its space added so far.
    if default is not None and default.measured and lane.best_value is not None:
        headline = lane.setup.objective.headlines[0]
        lane.gain = race_rule.gain_over(
            headline.value(default.figures),
            lane.best_value,
            higher_is_better=headline.higher_is_better,
        )


def _rung(lane: Lane, trials: int, options: RaceOptions, clock: _Clock) -> None:
    """Draw up to `trials` more trials (never past --trials); note the gain of its best."""
    assert lane.study is not None
    before = lane.records()
    wanted = min(trials, options.max_trials - lane.trials())
    if wanted > 0:
        started = clock.now()
        run_search(
            lane.rung_setup, lane.study, n_trials=wanted, timeout_s=None, listener=lane.listener
        )
        after = lane.records()
        measured = [r for r in after[len(before) :] if r.duplicate_of is None]
        clock.rung_runs += len(measured)
        clock.rung_spent += clock.now() - started
        if not measured:
            lane.done = True  # every draw repeated a measured config: its space is measured
    lane.done = lane.done or lane.trials() >= options.max_trials
    best = lane.best()
    if best is None:
        return
    headline = lane.setup.objective.headlines[0]
    value = headline.value(best.figures)
    lane.gain = race_rule.gain_over(
        lane.best_value, value, higher_is_better=headline.higher_is_better
    )
    lane.best_value = value


def _race_rounds(
    lanes: Sequence[Lane],
    first_round: int,
    clock: _Clock,
    on_run: OnRun | None,
    say: Callable[[str], None],
) -> list[tuple[Lane, Confirmed]]:
    """Each racing server's best config, measured RACE_ROUNDS more times side by side."""
    chosen: list[tuple[Lane, Confirmed]] = []
    for lane in lanes:
        best = lane.best()
        if best is None:
            lane.stopped = f"no config that could win in {lane.trials()} trials"
            say(f"race: {lane.server} stops drawing trials: {lane.stopped}")
            continue
        chosen.append((lane, lane.entry(best)))
    by_server = {lane.server: lane for lane, _ in chosen}

    def measure(candidate: Candidate, round_index: int) -> Measurement:
        setup = by_server[candidate.server].rung_setup
        slug = candidate.label.replace(" ", "-").replace("*", "x")
        log = setup.workdir / "race" / f"{slug}-round{round_index}.log"
        return run_bench(setup.plan(candidate.settings, log)).measurement

    started = clock.now()
    entries = [entry for _, entry in chosen]
    repeated = sum(len(entry.repeats) for entry in entries)
    more_rounds(entries, range(first_round, first_round + race_rule.RACE_ROUNDS), measure, on_run)
    # A run measured twice (its CPUs lost too much) is two runs' time.
    repeated = sum(len(entry.repeats) for entry in entries) - repeated
    clock.rung_runs += len(entries) * race_rule.RACE_ROUNDS + repeated
    clock.rung_spent += clock.now() - started
    clock.round_runs += len(entries) * race_rule.RACE_ROUNDS
    clock.round_repeats += repeated
    return chosen


def _samples(lane: Lane) -> list[Sample]:
    """The runs of `lane` whose slots its process model counts: configs in its baselines'
    concurrency models (tuner.search.carryover says why)."""
    adapter = lane.setup.adapter
    models = {adapter.concurrency_model(b.values) for b in adapter.baselines(lane.setup.cpus)}
    samples = []
    for record in lane.records():
        if not record.measured or record.measurement is None:
            continue
        if adapter.concurrency_model(record.settings) not in models:
            continue
        count = slots(adapter, record.settings)
        processes = adapter.processes(record.settings)
        connections = lane.setup.load.connections
        samples.append(Sample(record.measurement, count, connections, processes))
    return samples


def _noise(lanes: Sequence[Lane]) -> float:
    """race_noise over every study's CPU probes and every config's race runs."""
    probes = [
        float(ms)
        for lane in lanes
        if lane.study is not None
        for _trial, ms in lane.study.attrs().cpu_probe_ms or []
    ]
    repeats = [
        spread
        for lane in lanes
        for entry in lane.entries.values()
        if (spread := entry.spread(lane.setup.objective.headlines[0])) is not None
    ]
    return race_rule.race_noise(probes, repeats)


@dataclass(frozen=True)
class FinalResult:
    confirmed: list[Confirmed]  # every final round's entries, all servers
    outcomes: dict[str, TuneOutcome]  # each finalist's verdict and written file


@keep_workers()
def run_final(
    result: RaceResult,
    options: RaceOptions,
    out: Path,
    on_run: OnRun | None = None,
) -> FinalResult:
    """One set of interleaved rounds: each finalist's candidates (as `tune` picks them: its
    baselines, its --top-k best, their variants) and every other server's default; then
    each finalist's verdict from its own entries, and its file written (with `sizes`, after
    its counts are measured at the other sizes, as `tune --for-cpus` does: sized at boot).
    A budget's time left after the rounds (`repeats_left` runs) goes to the lossy runs'
    repeats as they come, then to the verdicts' second looks, each whole or not at all."""
    measurers = {lane.server: measurer(lane.setup) for lane in result.lanes}

    def measure(candidate: Candidate, round_index: int) -> Measurement:
        return measurers[candidate.server](candidate, round_index)

    def named(
        candidate: Candidate, round_index: int, run: Measurement | None, repeat: Repeat | None
    ) -> None:
        if on_run is not None:
            label = f"{candidate.server} {candidate.label}"
            on_run(replace(candidate, label=label), round_index, run, repeat)

    rounds = options.final_rounds
    spare = result.repeats_left
    allowance = RunAllowance(spare, result.finalists) if spare is not None else None
    confirmed = confirm(result.final, rounds, measure, named, allowance)
    outcomes: dict[str, TuneOutcome] = {}
    for lane in result.lanes:
        if lane.server not in result.finalists or lane.study is None:
            continue
        mine = [entry for entry in confirmed if entry.candidate.server == lane.server]
        outcomes[lane.server] = conclude(
            lane.setup,
            lane.study,
            lane.records(),
            mine,
            more=measured_more(measure, rounds, named, allowance),
            file=WinnerFile(
                lane.setup.file_in(out),
                options.app_requirements.get(lane.server),
                options.check_clean_venv,
                _sizing_for(lane, options),
            ),
        )
    return FinalResult(confirmed, outcomes)


def _final_candidates(
    lanes: Sequence[Lane], finalists: Sequence[str], lean: Sequence[str], extra: int, top_k: int
) -> list[Candidate]:
    """Each finalist's candidates (as `tune` picks them: its baselines, its --top-k best,
    their variants; `extra` of them, its default and best first, for a `lean` one) and every
    other server's default."""
    chosen: list[Candidate] = []
    for lane in lanes:
        if lane.server in finalists and lane.study is not None:
            picks = pick_candidates(
                lane.setup,
                lane.records(),
                top_k,
                pareto=lane.study.pareto_numbers(),
                noise=lane.study.noise(),
            )
            if lane.server in lean:
                best = lane.best()
                number = best.number if best is not None else None
                picks = default_and_best(picks, number, extra)
        else:
            default = lane.setup.adapter.baselines(lane.setup.cpus)[0]
            trial0 = next((r.number for r in lane.records() if r.baseline == default.label), None)
            picks = [Candidate(default.label, trial0, dict(default.values))]
        chosen += [replace(candidate, server=lane.server) for candidate in picks]
    return chosen


def default_and_best(picks: Sequence[Candidate], best: int | None, count: int) -> list[Candidate]:
    """The first `count` of `picks` (as `pick_candidates` orders them, the default first),
    with the race's best config moved up to second: a lean finalist still brings what it
    reached, and what it is measured against."""
    first = list(picks[:1])
    if best is not None:
        first += [c for c in picks[1:] if c.trial_number == best][:1]
    rest = [c for c in picks if c not in first]
    return (first + rest)[:count]


def _sizing_for(lane: Lane, options: RaceOptions) -> SizingFor | None:
    """--for-cpus: the finalist's counts at the other sizes, measured once its winner is
    decided (tune's own steps, tuner/workflow/sizes.py); its trial lines follow its name."""
    if not options.sizes:
        return None

    def sizing_for(
        winner: Mapping[str, Value], rps: float | None, records: Sequence[TrialRecord]
    ) -> SizingRule:
        lane.listener.on_start(f"{lane.server}: its counts at the other sizes")
        return measure_sizes(
            lane.setup,
            options.sizes,
            winner,
            rps,
            records,
            n_trials=options.max_trials,
            rounds=options.final_rounds,
            listener=lane.listener,
        )

    return sizing_for
