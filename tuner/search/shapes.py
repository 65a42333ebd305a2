"""Each concurrency model searched over its shape: processes x threads, not from one point.

A sampler that finds a plateau in one model (uWSGI's gevent at 496-503 req/s) leaves another
after a point or two of it, and in a model that holds several threads in a process the best is
often several processes x several threads (issue 45: 6 x 8 on uWSGI's http-socket, never
drawn; its threads were drawn at 1 x 9 and 1 x 20 only). So the last part of a study's budget
(`SHAPE_SHARE`) goes to the shape: each model with both levers, best first, climbs from its
best trial to the neighbours of its shape (processes x2 and /2, threads x2 and /2, and the
trades of one for the other; then the same by half-steps, x1.5; where the space lists its
thread counts, the next listed count up or down instead of x2 and /2), its other settings held,
until its best has no untried neighbour; then the next model. Each threaded model also starts
at the middle of its shape (`middle_shapes`). What each model got is said in the study's
summary (`searched_text`). Pure logic.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.errors import ConfigError
from tuner.search.branches import RandomDraw, Replay
from tuner.search.objectives import Figures
from tuner.search.records import TrialRecord, TrialStatus
from tuner.search.space import SearchSpace, active, bounds, suggest
from tuner.servers.base import ServerAdapter
from tuner.settings import Value

# Trials that ran to their end: a queued or running one has searched nothing yet.
_ENDED = (TrialStatus.COMPLETE, TrialStatus.PRUNED, TrialStatus.FAIL)

# The share of a study's trials kept for the shapes, and the fewest trials that leave any:
# below it the baselines and starts are most of the budget.
SHAPE_SHARE = 1 / 3
MIN_TRIALS = 12
# Moves from a model's best shape, in the order tried: (processes, threads) factors; doublings
# first, then half-steps once no doubling is left (a best between two doublings: 4 x 6).
MOVES = tuple(
    (up**a, up**b)
    for up in (2.0, 1.5)
    for a, b in ((1, 0), (0, 1), (-1, 0), (0, -1), (1, -1), (-1, 1))
)


def shape_trials(n_trials: int | None) -> int:
    """Trials of `n_trials` kept for the shapes (none for a timeout alone, or a small study)."""
    if n_trials is None or n_trials < MIN_TRIALS:
        return 0
    return math.floor(n_trials * SHAPE_SHARE)


@dataclass(frozen=True)
class Shaped:
    """A measured trial: its model, its shape, and what the objective ranks it by."""

    number: int  # the trial's
    model: str
    processes: int
    threads: int
    settings: dict[str, Value]  # resolved
    rank: float  # smaller is better


@dataclass(frozen=True)
class Move:
    """A shape to measure next (the space's params by name), moved from that trial's."""

    params: dict[str, Value]
    from_trial: int


@dataclass(frozen=True)
class Levers:
    """The space's params that count processes and threads (by param name)."""

    processes: str
    threads: str
    low_p: int
    high_p: int
    low_t: int
    high_t: int
    # A thread count listed as choices (granian's blocking threads, Tornado's executor), in
    # order: a move steps to the next choice up or down, not to a count the space lacks.
    # Empty: a range.
    thread_choices: tuple[int, ...] = ()


def levers(space: SearchSpace, adapter: ServerAdapter, cpus: int) -> Levers | None:
    """Both counting params, with their ranges (or the threads' choices); None where the
    space lacks one."""
    by_setting = {p.setting: p for p in space.params}
    model = adapter.process_model
    p = by_setting.get(model.processes or "")
    t = by_setting.get(model.threads or "")
    if p is None or t is None or p.type != "int":
        return None
    ranges = bounds(space, cpus)
    low_p, high_p = ranges[p.name]
    if t.type == "int":
        low_t, high_t = ranges[t.name]
        return Levers(p.name, t.name, int(low_p), int(high_p), int(low_t), int(high_t))
    counts = [c for c in t.choices if isinstance(c, int) and not isinstance(c, bool)]
    if t.type != "categorical" or len(counts) != len(t.choices):
        return None
    listed = tuple(sorted(counts))
    return Levers(p.name, t.name, int(low_p), int(high_p), listed[0], listed[-1], listed)


def measured(
    records: Sequence[TrialRecord],
    adapter: ServerAdapter,
    rank: Callable[[Figures], float],
) -> list[Shaped]:
    """The study's usable measured trials, placed."""
    out = []
    for record in records:
        placed = _placed(record, adapter)
        if placed is None or not _ran(record) or not record.feasible:
            continue
        settings, model = placed
        value = rank(record.figures)
        if math.isfinite(value):
            out.append(
                Shaped(
                    record.number,
                    model,
                    adapter.processes(settings),
                    adapter.threads(settings),
                    settings,
                    value,
                )
            )
    return out


def _ran(record: TrialRecord) -> bool:
    """Measured to its end, or pruned with its windows so far: a model whose every trial was
    pruned still has a best shape to climb from (the pruner compares it with the other
    models' best, and one run of a multi-process config can be a poor draw)."""
    ran = record.state in (TrialStatus.COMPLETE, TrialStatus.PRUNED)
    return ran and record.measurement is not None


def _placed(record: TrialRecord, adapter: ServerAdapter) -> tuple[dict[str, Value], str] | None:
    """A trial's settings as the server runs them and its model; None for a repeat (its
    result is another trial's) or a mix the server refuses."""
    if record.duplicate_of is not None:
        return None
    try:
        settings = adapter.resolve(record.settings)
        return settings, adapter.concurrency_model(settings)
    except ConfigError:
        return None


def next_shape(
    space: SearchSpace,
    adapter: ServerAdapter,
    cpus: int,
    records: Sequence[TrialRecord],
    rank: Callable[[Figures], float],
) -> Move | None:
    """The next shape to measure, or None when every threaded model's best has all its
    neighbours measured."""
    lever = levers(space, adapter, cpus)
    if lever is None:
        return None
    placed = measured(records, adapter, rank)
    # Every config the study ran or queued, whatever came of it: a move that was pruned, failed
    # or starved is not queued again (each repeat would be pruned as the first was).
    # (A repeat's config is its original's, so `_placed` leaving repeats out loses none.)
    tried = {_key(found[0]) for record in records if (found := _placed(record, adapter))}
    best_of: dict[str, Shaped] = {}
    for shaped in sorted(placed, key=lambda s: s.rank):
        best_of.setdefault(shaped.model, shaped)
    for best in best_of.values():  # best model first
        if not _threaded(space, best.settings, lever):
            continue
        for factor_p, factor_t in MOVES:
            params = _moved(space, adapter, cpus, best, lever, factor_p, factor_t)
            if params is not None and _key(_resolved(space, adapter, cpus, params)) not in tried:
                return Move(params, best.number)
    return None


def _threaded(space: SearchSpace, settings: Mapping[str, Value], lever: Levers) -> bool:
    """Whether the threads param is drawn for this config (its `when` holds) and counts
    threads in it: a ranged count above one (at one, uWSGI's plain prefork), any listed
    choice (one blocking thread is granian's model as much as eight are)."""
    by_name = {p.name: p for p in space.params}
    current = {p.name: settings.get(p.setting) for p in space.params}
    if not active(by_name[lever.threads], current):
        return False
    return bool(lever.thread_choices) or int(current[lever.threads] or 1) > 1


def _moved(
    space: SearchSpace,
    adapter: ServerAdapter,
    cpus: int,
    best: Shaped,
    lever: Levers,
    factor_p: float,
    factor_t: float,
) -> dict[str, Value] | None:
    """`best` with its counts scaled, inside the space and in the same model; None if the
    move leaves either, or changes nothing."""
    processes = _clamp(round(best.processes * factor_p), lever.low_p, lever.high_p)
    params = {p.name: best.settings[p.setting] for p in space.params if p.setting in best.settings}
    if lever.thread_choices:
        threads, choice = _step_choice(adapter, best, lever, factor_t)
        if choice is None:
            return None  # no choice that way (past the last), or a half-step: a doubling's
    else:
        threads = _clamp(round(best.threads * factor_t), max(2, lever.low_t), lever.high_t)
        choice = threads
    if _near(processes, best.processes) and _near(threads, best.threads):
        return None  # a move the space's bounds cut short (31 threads to 32) measures nothing new
    params.update({lever.processes: processes, lever.threads: choice})
    try:
        settings = _resolved(space, adapter, cpus, params)
        if adapter.concurrency_model(settings) != best.model:
            return None
    except ConfigError:  # a mix the server refuses
        return None
    return params


def _step_choice(
    adapter: ServerAdapter, best: Shaped, lever: Levers, factor: float
) -> tuple[int, int | None]:
    """For listed thread choices: the threads a move by `factor` gives and the choice that
    gives them: the best's own for 1, else the next choice up (or down) by the threads it
    runs, which is not its place in the list (granian's 0 is its rule, 512 threads). A
    half-step has no choice of its own: (best's threads, None)."""
    setting = adapter.process_model.threads or ""
    current = best.settings.get(setting)
    if factor == 1:
        return best.threads, current if isinstance(current, int) else None
    if factor not in (2.0, 0.5):
        return best.threads, None
    runs = sorted(
        (adapter.threads({**best.settings, setting: choice}), choice)
        for choice in lever.thread_choices
        if choice != current
    )
    if factor > 1:
        up = [(count, choice) for count, choice in runs if count > best.threads]
        return up[0] if up else (best.threads, None)
    down = [(count, choice) for count, choice in runs if count < best.threads]
    return down[-1] if down else (best.threads, None)


def _resolved(
    space: SearchSpace, adapter: ServerAdapter, cpus: int, params: Mapping[str, Value]
) -> dict[str, Value]:
    drawn = suggest(space, Replay(dict(params), RandomDraw(random.Random(0))), cpus)
    return adapter.resolve(drawn)


def middle_shapes(
    space: SearchSpace, adapter: ServerAdapter, cpus: int, starts: Sequence[Mapping[str, Value]]
) -> list[dict[str, Value]]:
    """A second start for each of `starts` (the space's params by name) in a model that holds
    several threads in a process: the start at the middle of its shape, the geometric middle
    of the processes' range by that of the threads' (a 2-CPU box's 1-9 processes by 2-32
    threads: 3 x 8). A branch start has the default's process count (one, on most servers),
    and a sampler that finds a plateau elsewhere may never draw that model with several
    processes again; the shape phase climbs from the better of the two."""
    lever = levers(space, adapter, cpus)
    if lever is None or lever.thread_choices:  # listed counts: the sampler draws each
        return []
    middle = {
        lever.processes: _geometric_middle(lever.low_p, lever.high_p, low_at_least=1),
        lever.threads: _geometric_middle(lever.low_t, lever.high_t, low_at_least=2),
    }
    shapes = []
    for start in starts:
        try:
            settings = _resolved(space, adapter, cpus, start)
            model = adapter.concurrency_model(settings)
            if not _threaded(space, settings, lever):
                continue
            params = {**start, **middle}
            if adapter.concurrency_model(_resolved(space, adapter, cpus, params)) != model:
                continue
        except ConfigError:  # the server refuses the shape: the first start stands alone
            continue
        if any(start.get(name) != value for name, value in middle.items()):
            shapes.append(params)
    return shapes


def _geometric_middle(low: int, high: int, *, low_at_least: int) -> int:
    """The whole number nearest the geometric mean of [max(low, low_at_least), high]."""
    bottom = max(low, low_at_least)
    return min(high, max(bottom, round(math.sqrt(bottom * high))))


def _near(moved: int, origin: int) -> bool:
    """Whether a count moved by less than a quarter of itself (a half-step is 1.5x)."""
    return max(moved, origin) < 1.25 * min(moved, origin)


def _clamp(value: int, low: int, high: int) -> int:
    return min(high, max(low, value))


def _key(settings: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, repr(value)) for name, value in settings.items()))


def searched_text(records: Sequence[TrialRecord], adapter: ServerAdapter) -> list[str]:
    """Per concurrency model, how far the study searched it: "http-socket / threads: 7
    trials, 1-6 processes x 4-32 threads", most trials first; failed trials count where
    their settings name a model."""
    by_model: dict[str, list[tuple[int, int]]] = {}
    for record in records:
        placed = _placed(record, adapter)
        if placed is None or record.state not in _ENDED:
            continue
        settings, model = placed
        by_model.setdefault(model, []).append(
            (adapter.processes(settings), adapter.threads(settings))
        )
    lines = []
    for model, shapes in sorted(by_model.items(), key=lambda item: -len(item[1])):
        processes = sorted({p for p, _ in shapes})
        threads = sorted({t for _, t in shapes})
        shape = f"{_span(processes)} process{'es' if processes[-1] > 1 else ''}"
        if threads[-1] > 1:
            shape += f" x {_span(threads)} threads"
        count = len(shapes)
        lines.append(f"{model}: {count} trial{'s' if count > 1 else ''}, {shape}")
    return lines


def _span(values: Sequence[int]) -> str:
    return f"{values[0]}" if values[0] == values[-1] else f"{values[0]}-{values[-1]}"
