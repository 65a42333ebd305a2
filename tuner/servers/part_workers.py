"""The workers part of the adapter contract (tuner/servers/base.py): processes, threads and
event loops, and the configs measured beside every search."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tuner.servers.binds import DIRECT, Bind
from tuner.servers.part_launcher import LauncherPart
from tuner.settings import Value

BASELINE_DEFAULT = "default"
# The folk rule for pre-forking servers ("2 x cores + 1 workers", gunicorn's docs).
BASELINE_FORK_RULE = "2*cpus+1"


@dataclass(frozen=True)
class ProcessModel:
    """How a server runs concurrent requests, for baselines, repairs and report axes.

    `forks_workers`: the server itself starts several worker processes (a `2*cpus+1` rule means
    something only then). `processes` / `threads`: the settings that count worker processes and
    threads per process, or None where the server has no such setting (one process, or no
    threads). `kind_label`: what `ServerAdapter.concurrency_model` names ("worker_class").
    """

    forks_workers: bool
    processes: str | None
    threads: str | None
    kind_label: str


@dataclass(frozen=True)
class EventLoops:
    """Which processes of a server's tree run the app's event loop on their main thread, so
    the tuner can see the app block it (tuner.metrics.loops): the server's own process when it
    serves alone (`root`), else its children whose command line contains `worker_marker`
    (not a supervisor's helpers, such as multiprocessing's resource tracker; "": every child,
    for a master that forks nothing but its workers)."""

    root: bool
    worker_marker: str = ""

    def pick(self, pids: Sequence[int], cmdline: Callable[[int], str]) -> list[int]:
        """The loop processes among `pids` (the tree, its root first)."""
        if self.root:
            return list(pids[:1])
        return [pid for pid in pids[1:] if self.worker_marker in cmdline(pid)]


@dataclass(frozen=True)
class Baseline:
    """A config every study measures next to its search: the default, or a documented rule."""

    label: str
    values: Mapping[str, Value]
    why: str


class WorkersPart(LauncherPart):
    """How a server runs concurrent requests: its process model, the counts a config runs,
    the baselines every study measures and the hand grid. Required: `concurrency_model`;
    the rest follows `process_model` by default."""

    process_model: ProcessModel

    @abc.abstractmethod
    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        """How a config serves concurrent requests, in a few words ("gthread"), for reports."""

    def pins_connections(self, values: Mapping[str, Value], *, bind: Bind = DIRECT) -> bool:
        """True when each connection kept open holds a worker thread or process for as long
        as it stays open, reached as `bind` (by default as the load generator reaches it:
        HTTP over TCP, kept open; its `kept_open` says whether the client keeps them): such a
        config answers at most processes x threads clients at a time and leaves the others
        waiting, however idle the held connections are."""
        return False

    def event_loops(self, values: Mapping[str, Value]) -> EventLoops | None:
        """Where a config runs the app's event loop, for a server that serves async apps on
        one (ASGI); None where the app's code is not run on a loop it could block (WSGI)."""
        return None

    def processes(self, values: Mapping[str, Value]) -> int:
        """Worker processes a config runs (1 where the server has no such setting)."""
        key = self.process_model.processes
        return max(1, int(values[key])) if key else 1

    def threads(self, values: Mapping[str, Value]) -> int:
        """Threads per worker process (1 where the server has no such setting)."""
        key = self.process_model.threads
        return max(1, int(values[key])) if key else 1

    # --- baselines --------------------------------------------------------------------------

    def baselines(self, cpus: float) -> tuple[Baseline, ...]:
        """The configs every study measures beside its search, the server's default first.

        The `2*cpus+1` rule only where the server forks worker processes; a server whose docs
        recommend another rule overrides this. `cpus` may be a fraction (a container's CPU
        quota): 2 x 1.5 + 1 = 4 workers, 2 x 0.5 + 1 = 2.
        """
        default = Baseline(BASELINE_DEFAULT, self.resolve({}), f"{self.name}'s own defaults")
        key = self.process_model.processes
        if not (self.process_model.forks_workers and key):
            return (default,)
        rule = Baseline(
            BASELINE_FORK_RULE,
            self.resolve({key: max(1, round(2 * cpus + 1))}),
            f"{key} = 2 x {cpus:g} CPUs + 1, the folk rule for pre-forking servers",
        )
        return (default, rule)

    # --- a hand grid, for the benchmark that checks the tuner --------------------------------

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        """The configs a careful engineer would try by hand on `cpus` CPUs (about 40-64):
        `benchmarks/grid_vs_tuner.py` measures them all to see whether the tuner finds as good
        a config. By default every process count of `worker_counts` (if the server forks) by
        1, 4, 16 and 64 threads (if it has threads); servers with other levers override it."""
        model = self.process_model
        counts = worker_counts(cpus) if model.forks_workers and model.processes else [1]
        threads = [1, 2, 4, 8, 16, 32, 64] if model.threads else [1]
        grid: list[dict[str, Value]] = []
        for count in counts:
            for thread_count in threads:
                values: dict[str, Value] = {}
                if model.forks_workers and model.processes:
                    values[model.processes] = count
                if model.threads:
                    values[model.threads] = thread_count
                grid.append(values)
        return grid


def worker_counts(cpus: int) -> list[int]:
    """Eight worker-process counts from 1 to past 4*cpus+1, denser at the low end."""
    top = 4 * cpus + 4
    counts = sorted({1, 2, cpus, cpus + 1, 2 * cpus + 1, 3 * cpus, 4 * cpus + 1, top})
    while len(counts) < 8:
        counts = sorted(set(counts) | {max(counts) + 1})
    return counts[:8]
