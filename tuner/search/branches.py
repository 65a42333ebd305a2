"""One start per concurrency model: every branch of a space is measured before TPE narrows in.

A space branches on categorical settings (gunicorn's worker class; uWSGI's protocol, gevent or
threads), and the branches behave like different servers, which TPE's few random draws may
never reach. So each study starts with one config per concurrency model the space can reach
(as the adapter names the model), besides the baselines: drawn at random until it lands in a
branch not yet seen, then moved to the server's defaults in every setting but its thread
count, so the branch is judged by itself. Pure logic. The studies that prompted it and the
replay that measures it: docs/pages/benchmarks.md, "Branch starts".
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from tuner.errors import ConfigError
from tuner.search.space import Param, SearchSpace, admits, suggest
from tuner.servers.base import ServerAdapter
from tuner.settings import Value

# Draws to find the space's branches; a branch this rare is not worth a start of its own.
DRAWS = 400


class RandomDraw:
    """A seeded TrialLike that draws uniformly (log-uniformly for log ranges)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def suggest_int(
        self, name: str, low: int, high: int, *, log: bool = False, step: int = 1
    ) -> int:
        if log and low > 0:
            value = round(math.exp(self._rng.uniform(math.log(low), math.log(high))))
            return min(high, max(low, low + step * round((value - low) / step)))
        return low + step * self._rng.randint(0, (high - low) // step)

    def suggest_float(self, name: str, low: float, high: float, *, log: bool = False) -> float:
        if log and low > 0:
            return math.exp(self._rng.uniform(math.log(low), math.log(high)))
        return self._rng.uniform(low, high)

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        return self._rng.choice(list(choices))


class Replay:
    """A TrialLike that answers from {param name: value}, and draws what the map lacks (a
    param that a changed value has just switched on)."""

    def __init__(self, values: dict[str, Value], fallback: RandomDraw) -> None:
        self._values, self._fallback = values, fallback

    def suggest_int(
        self, name: str, low: int, high: int, *, log: bool = False, step: int = 1
    ) -> int:
        value = self._values.get(name)
        return (
            int(value)
            if isinstance(value, int)
            else self._fallback.suggest_int(name, low, high, log=log, step=step)
        )

    def suggest_float(self, name: str, low: float, high: float, *, log: bool = False) -> float:
        value = self._values.get(name)
        return (
            float(value)
            if isinstance(value, int | float) and not isinstance(value, bool)
            else self._fallback.suggest_float(name, low, high, log=log)
        )

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        return (
            self._values[name]
            if name in self._values
            else self._fallback.suggest_categorical(name, choices)
        )


def branch_starts(
    space: SearchSpace,
    adapter: ServerAdapter,
    cpus: int,
    *,
    seed: int | None,
    covered: Sequence[str] = (),
) -> list[dict[str, Value]]:
    """One config (as the space's params, by name) per concurrency model the space reaches
    that `covered` (models already measured, e.g. by the baselines) lacks, in order of
    first appearance."""
    rng = random.Random(seed if seed is not None else 0)
    seen = set(covered)
    starts: list[dict[str, Value]] = []
    by_setting = {p.setting: p.name for p in space.params}
    for _ in range(DRAWS):
        drawn = suggest(space, RandomDraw(rng), cpus)
        try:
            model = adapter.concurrency_model(adapter.resolve(drawn))
        except ConfigError:  # a combination the server refuses: not a branch to start in
            continue
        if model not in seen:
            seen.add(model)
            params = {by_setting[setting]: value for setting, value in drawn.items()}
            starts.append(_near_default(space, adapter, cpus, params, model, rng))
    return starts


def _near_default(
    space: SearchSpace,
    adapter: ServerAdapter,
    cpus: int,
    params: dict[str, Value],
    model: str,
    rng: random.Random,
) -> dict[str, Value]:
    """`params` with each setting but the thread count back at the server's default, one at a
    time and again until none moves (one may switch another off), where the space admits the
    default, the server accepts the mix and the concurrency model stays `model`."""
    defaults = adapter.resolve({})
    keep = {name for name in (adapter.process_model.threads,) if name is not None}
    name_of = {p.setting: p.name for p in space.params}
    current = dict(params)
    moved = True
    while moved:
        moved = False
        for param in space.params:
            if not _revertible(param, current, defaults, keep, cpus):
                continue
            replay = Replay({**current, param.name: defaults[param.setting]}, RandomDraw(rng))
            try:
                settings = suggest(space, replay, cpus)
                if adapter.concurrency_model(adapter.resolve(settings)) != model:
                    continue
            except ConfigError:  # the server refuses the mix: this one stays as drawn
                continue
            current = {name_of[setting]: value for setting, value in settings.items()}
            moved = True
            break
    return current


def _revertible(
    param: Param,
    current: dict[str, Value],
    defaults: dict[str, Value],
    keep: set[str],
    cpus: int,
) -> bool:
    return (
        param.name in current
        and param.setting not in keep
        and current[param.name] != defaults[param.setting]
        and admits(param, defaults[param.setting], cpus)
    )
