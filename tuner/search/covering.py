"""After a config starved connections: the nearest config that has a thread for each.

Where each keep-alive connection holds a worker thread (the adapter says which configs do, in
`pins_connections`), a config with fewer threads than the load's connections leaves the rest
unanswered, so it is unfair and can never win, however fast the answered few were. Such configs
are most of that region of the space, and the sampler learns only "this region fails", never
that it is good once the threads cover the connections (measured on hello under uWSGI
http11-socket: 49k req/s vs 18k for the best http-socket config). So the study tries the
nearest covering config once. Pure logic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from tuner.search.space import SearchSpace, bounds
from tuner.servers.base import ServerAdapter
from tuner.settings import Value


@dataclass(frozen=True)
class Allowed:
    """The counts the search space can give one setting: every integer from `low` to
    `high`, or only the listed `choices` (a categorical param of counts, e.g. flup's
    max_spare)."""

    low: int
    high: int
    choices: tuple[int, ...] = ()

    @classmethod
    def listed(cls, choices: tuple[int, ...]) -> Allowed:
        return cls(min(choices), max(choices), tuple(sorted(choices)))

    def at_least(self, count: int) -> int | None:
        """The smallest allowed count of at least `count`, or None past the space."""
        if self.choices:
            return next((choice for choice in self.choices if choice >= count), None)
        return max(count, self.low) if count <= self.high else None


Limits = Mapping[str, Allowed]  # setting -> the counts the search space allows


def space_limits(space: SearchSpace, cpus: int) -> dict[str, Allowed]:
    """The counts `space` allows for each setting it draws as a number, or from a list of
    numbers."""
    ranges = bounds(space, cpus)
    limits: dict[str, Allowed] = {}
    for param in space.params:
        allowed = ranges[param.name]
        if param.type == "int":
            limits[param.setting] = Allowed(int(allowed[0]), int(allowed[1]))
        elif param.type == "categorical" and all(type(c) is int for c in allowed):
            limits[param.setting] = Allowed.listed(tuple(allowed))
    return limits


def covering_config(
    adapter: ServerAdapter, settings: Mapping[str, Value], connections: int, limits: Limits
) -> dict[str, Value] | None:
    """`settings` with just enough threads (then processes) for `connections`, within
    `limits`; None when the config does not pin connections, already covers them, or the
    space cannot hold that many. A server without a threads setting (one thread per process,
    or per spare slot: flup) is covered by its processes setting alone."""
    workers_key, threads_key = adapter.process_model.processes, adapter.process_model.threads
    if not adapter.pins_connections(settings) or (workers_key is None and threads_key is None):
        return None
    workers = int(settings[workers_key]) if workers_key else 1
    threads = int(settings[threads_key]) if threads_key else 1
    if workers * threads >= connections:
        return None  # starved for another reason: more threads would not help
    changed: dict[str, Value] = {}
    if threads_key is not None:
        allowed = limits.get(threads_key, Allowed(threads, threads))
        enough = allowed.at_least(math.ceil(connections / workers))
        if enough is not None:
            return adapter.resolve({**settings, threads_key: enough})
        threads = changed[threads_key] = allowed.high
    if workers_key is None:
        return None
    allowed = limits.get(workers_key, Allowed(workers, workers))
    enough = allowed.at_least(math.ceil(connections / threads))
    if enough is None:
        return None
    return adapter.resolve({**settings, **changed, workers_key: enough})
