"""One start per concurrency model: every branch of a space is measured before TPE narrows in.

A space branches on categorical settings (gunicorn's worker class; uWSGI's protocol, gevent or
threads), and the branches behave like different servers. Independent or grouped TPE starts
from a few random draws and then samples near what already looks good, so a branch that
nobody drew early is rarely tried (seen on uWSGI: 7 of 30 trials on one plateau, and never
several processes with many threads over http-socket, which served 13% more). So each study
starts with one config per concurrency model the space can reach (as the adapter names the
model), drawn at random within that branch, besides the baselines. Pure logic.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from tuner.errors import ConfigError
from tuner.search.space import SearchSpace, suggest
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
            starts.append({by_setting[setting]: value for setting, value in drawn.items()})
    return starts
