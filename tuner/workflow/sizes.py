"""`tune --for-cpus 0.5,1,2`: the best counts at each CPU limit, and the rule through them.

The design: one whole study at the largest size (the reference: the full search, the
confirmation rounds and the verdict, as `tune` runs at one `--cpu-limit`), then, for each other
size, a small study that searches only the counts (processes and threads) with every other
setting pinned to the reference winner's, warm-started with the winner's counts scaled by the
size ratio. What the reference learnt (the concurrency model, keep-alive, logging, the parser)
carries over, and it is what a file sized at boot can hold: one config whose counts vary. Each
other size costs `size_trials` trials instead of a whole study. Its point is decided as the
reference's winner is: the counts scaled from the reference (the study's first trial) and its
best other counts are measured again in interleaved rounds, and another count is kept only
where it beats the scaled one beyond the noise, by the pairs of those rounds
(tuner.workflow.confirm.settle; among equals, the cheapest, or counts as fast with a far lower
tail: tuner.workflow.lower_tail).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from tuner.errors import ConfigError, TunerError
from tuner.machine.limits import Limits, check_cgroups
from tuner.machine.sizing import SizePoint, SizingRule, fit_rule
from tuner.search.records import BASELINE_DEFAULT, TrialRecord
from tuner.search.space import Param, SearchSpace
from tuner.search.storage_url import study_workdir
from tuner.search.study import StudyListener, StudySetup, open_study, run_search
from tuner.servers import SERVERS, get_adapter
from tuner.settings import Value
from tuner.workflow.confirm import (
    Candidate,
    Confirmed,
    Verdict,
    confirm,
    measured_more,
)
from tuner.workflow.lower_tail import settle_with_tail
from tuner.workflow.measurer import measurer

# Of each other size's study, how many of its best counts (other than the scaled ones) are
# measured again beside the scaled counts before its point is decided: its best, as `tune`
# weighs its best median against the default (one more would double the family's luck and
# add a third of the runs).
SIZE_FINALISTS = 1


def size_trials(n_trials: int) -> int:
    """Trials per size past the reference: a third of the reference's, at least 6."""
    return max(6, n_trials // 3)


def size_confirm_runs(rounds: int) -> int:
    """The runs that decide a size's point: the scaled counts and `SIZE_FINALISTS` others,
    once per round (a close call's extra rounds not counted: they are not always run)."""
    return (SIZE_FINALISTS + 1) * rounds


def count_space(setup: StudySetup, settings: Mapping[str, Value]) -> SearchSpace:
    """The reference space with every param but the counts pinned to `settings` (a choice of
    one value); the counts keep their ranges, and their conditions (threads only for gthread)
    see the pinned values."""
    model = setup.adapter.process_model
    counts = {model.processes, model.threads} - {None}
    params: list[Param] = []
    for param in setup.space.params:
        if param.setting in counts:
            params.append(param)
        elif param.setting in settings:
            pinned = (settings[param.setting],)
            params.append(replace(param, type="categorical", choices=pinned, low=None, high=None))
    return replace(setup.space, params=tuple(params), source=f"{setup.space.source} (counts)")


def size_setup(setup: StudySetup, cpus: float, settings: Mapping[str, Value]) -> StudySetup:
    """The study of one other size: its own name, folder and CPU quota, the counts only."""
    label = f"{cpus:g}cpus"
    return replace(
        setup,
        name=f"{setup.name}-{label}",
        workdir=setup.workdir / label,
        limits=Limits(cpus, setup.limits.memory_bytes),
        space=count_space(setup, settings),
        branch_starts=False,
    )


def scaled_settings(
    setup: StudySetup, settings: Mapping[str, Value], ratio: float
) -> dict[str, Value]:
    """The reference winner's settings with its process count (a one-process server's thread
    count) scaled by `ratio` (at least 1): the counts a size is measured against first."""
    model = setup.adapter.process_model
    scaled = model.processes or model.threads
    out = dict(settings)
    if scaled is not None and scaled in out:
        out[scaled] = max(1, round(int(out[scaled]) * ratio))
    return out


def scaled_start(
    setup: StudySetup, settings: Mapping[str, Value], ratio: float
) -> dict[str, Value]:
    """`scaled_settings` as the space names its params: the first trial of a smaller (or
    larger) size."""
    values = scaled_settings(setup, settings, ratio)
    return {p.name: values[p.setting] for p in setup.space.params if p.setting in values}


def _ranked(setup: StudySetup, cpus: float, records: Sequence[TrialRecord]) -> list[TrialRecord]:
    """One size's usable trials, the best first (NoPoint when there is none)."""
    # The baselines run the server's defaults, not the reference's other settings: not points.
    usable = [r for r in records if r.measured and r.feasible and not r.baseline]
    if not usable:
        raise NoPoint(f"no config at {cpus:g} CPUs passed the SLOs; no rule can be fitted")
    return setup.objective.rank(usable, lambda r: r.figures)


def size_candidates(
    setup: StudySetup, cpus: float, records: Sequence[TrialRecord], scaled: Mapping[str, Value]
) -> list[Candidate]:
    """The scaled counts (as the baseline every other count must beat, labelled as the
    default is in a confirmation) and the size's best `SIZE_FINALISTS` other counts."""
    adapter = setup.adapter

    def counts(settings: Mapping[str, Value]) -> tuple[int, int]:
        values = adapter.resolve(settings)
        return adapter.processes(values), adapter.threads(values)

    picked = [Candidate(BASELINE_DEFAULT, None, adapter.resolve(scaled))]
    seen = {counts(scaled)}
    for record in _ranked(setup, cpus, records):
        found = counts(record.settings)
        if found in seen:
            continue
        seen.add(found)
        picked.append(
            Candidate(f"trial {record.number}", record.number, adapter.resolve(record.settings))
        )
        if len(picked) > SIZE_FINALISTS:
            break
    return picked


def decided_point(setup: StudySetup, cpus: float, verdict: Verdict | None) -> SizePoint:
    """The point a size's verdict gives, and in words how it was decided."""
    if verdict is None:
        raise NoPoint(
            f"no config at {cpus:g} CPUs passed the SLOs in its rounds; no rule can be fitted"
        )
    adapter = setup.adapter
    chosen, scaled = verdict.winner, verdict.default
    values = adapter.resolve(chosen.candidate.settings)
    shape = f"{adapter.processes(values)} x {adapter.threads(values)}"
    rounds = f"over {len(chosen.runs)} interleaved rounds"
    if scaled is not None and chosen is scaled:
        why = (
            f"the counts scaled from the reference ({shape}): no other counts beat them beyond "
            f"the noise {rounds}"
        )
    elif scaled is None or not scaled.usable(setup.slo):
        why = (
            f"{chosen.candidate.label} ({shape}): the counts scaled from the reference could "
            f"not be used (failed, or over an SLO) {rounds}"
        )
    else:
        why = (
            f"{chosen.candidate.label} ({shape}) beat the counts scaled from the reference "
            f"beyond the noise {rounds}"
        )
    if verdict.tied_with:
        why += f"; the cheapest of {len(verdict.tied_with) + 1} counts the noise could not separate"
    rps = chosen.rps.median if chosen.rps else None
    return SizePoint(cpus, adapter.processes(values), adapter.threads(values), rps, why)


class NoPoint(TunerError):
    """A size whose study has no usable trial (exit 1, as a study with no winner)."""


def memory_samples(
    setup: StudySetup, settings: Mapping[str, Value], records: Sequence[TrialRecord]
) -> list[tuple[int, float]]:
    """(processes, the server tree's PSS in MB) of every measured trial of the winner's
    concurrency model: the points the master's and each process's memory are fitted from."""
    adapter = setup.adapter
    model = adapter.concurrency_model(adapter.resolve(settings))
    samples = []
    for record in records:
        memory = record.measurement.memory if record.measurement else None
        if memory is None or not record.measured:
            continue
        try:
            values = adapter.resolve(record.settings)
        except Exception:  # noqa: BLE001 - a record the adapter no longer reads: not a sample
            continue
        if adapter.concurrency_model(values) == model:
            samples.append((adapter.processes(values), memory.server_pss_mean_mb))
    return samples


def measure_sizes(
    setup: StudySetup,
    sizes: Sequence[float],
    winner: Mapping[str, Value],
    winner_rps: float | None,
    reference_records: Sequence[TrialRecord],
    *,
    n_trials: int,
    rounds: int,
    listener: StudyListener,
) -> SizingRule:
    """The rule through the reference winner's counts and the counts a count-only study
    decides at each other size (`setup` is the reference's, at the largest size; `rounds`:
    the interleaved rounds its best counts are measured again in)."""
    env = setup.adapter.sizing_env
    assert env is not None, "checked with the options"
    reference = setup.limits.cpus or setup.cpus
    resolved = setup.adapter.resolve(winner)
    points = [
        SizePoint(
            reference,
            setup.adapter.processes(resolved),
            setup.adapter.threads(resolved),
            winner_rps,
        )
    ]
    records = list(reference_records)
    for cpus in sizes:
        if cpus == reference:
            continue
        sized = size_setup(setup, cpus, resolved)
        study = open_study(sized)
        start = scaled_start(sized, resolved, cpus / reference)
        study.queue(start, skip_if_exists=True)  # a resumed study has it already
        listener.on_start(f"size {cpus:g} CPUs: the counts only, the rest as at {reference:g}")
        run_search(sized, study, n_trials=size_trials(n_trials), timeout_s=None, listener=listener)
        found = study.records()
        scaled = scaled_settings(sized, resolved, cpus / reference)
        points.append(_confirmed_point(sized, cpus, found, scaled, rounds, listener))
        records += found
    rule = fit_rule(points, memory_samples(setup, winner, records), env)
    return replace(rule, overrides=setup.adapter.sized_override())


def _confirmed_point(
    sized: StudySetup,
    cpus: float,
    records: Sequence[TrialRecord],
    scaled: Mapping[str, Value],
    rounds: int,
    listener: StudyListener,
) -> SizePoint:
    """One size's point: its candidates measured again in `rounds` interleaved rounds at its
    CPU limit, decided by the pairs as `tune` decides its winner (a close call gets
    EXTRA_ROUNDS more, once; counts as fast with a far lower tail win among equals)."""
    measure = measurer(sized)
    candidates = size_candidates(sized, cpus, records, scaled)
    confirmed: list[Confirmed] = confirm(candidates, rounds, measure)

    more = measured_more(measure, rounds)
    verdict = settle_with_tail(confirmed, sized.objective, sized.slo, candidates[0].settings, more)
    point = decided_point(sized, cpus, verdict)
    listener.on_start(f"size {cpus:g} CPUs: {point.decided}")
    return point


def sized_setup(setup: StudySetup, sizes: tuple[float, ...], study_name: str | None) -> StudySetup:
    """The reference study of --for-cpus: at the largest size, named apart from a study of
    the server at no limit (`-sized`, unless `study_name` was given); the server must write
    files sized at boot."""
    if setup.adapter.sizing_env is None:
        raise unsized([setup.adapter.name], "tune")
    limits = Limits(max(sizes), setup.limits.memory_bytes)
    check_cgroups(limits)
    name = study_name or f"{setup.name}-sized"
    workdir = study_workdir(setup.storage_url, name)
    return replace(setup, name=name, workdir=workdir, limits=limits)


def sized_servers() -> list[str]:
    """The servers that write a file sized at boot (--for-cpus)."""
    return [name for name in SERVERS if get_adapter(name).sizing_env]


def unsized(names: list[str], command: str) -> ConfigError:
    """The one line that refuses --for-cpus for servers that write no file sized at boot."""
    which = f"{names[0]} writes" if len(names) == 1 else f"{', '.join(names)} write"
    return ConfigError(
        f"--for-cpus: {which} no file sized at boot yet; servers that do: "
        f"{', '.join(sized_servers())} (or {command} one size with --cpu-limit)"
    )
