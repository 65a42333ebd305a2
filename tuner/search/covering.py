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

from tuner.servers.base import ServerAdapter
from tuner.settings import Value

Limits = Mapping[str, tuple[int, int]]  # setting -> (low, high) the search space allows


def covering_config(
    adapter: ServerAdapter, settings: Mapping[str, Value], connections: int, limits: Limits
) -> dict[str, Value] | None:
    """`settings` with just enough threads (then processes) for `connections`, within
    `limits`; None when the config does not pin connections, already covers them, or the
    space cannot hold that many threads."""
    workers_key, threads_key = adapter.process_model.processes, adapter.process_model.threads
    if not adapter.pins_connections(settings) or workers_key is None or threads_key is None:
        return None
    workers, threads = int(settings[workers_key]), int(settings[threads_key])
    if workers * threads >= connections:
        return None  # starved for another reason: more threads would not help
    max_threads = limits.get(threads_key, (threads, threads))[1]
    max_workers = limits.get(workers_key, (workers, workers))[1]
    wanted = math.ceil(connections / workers)
    if wanted <= max_threads:
        return adapter.resolve({**settings, threads_key: wanted})
    workers = math.ceil(connections / max_threads)
    if workers > max_workers:
        return None
    return adapter.resolve({**settings, threads_key: max_threads, workers_key: workers})
