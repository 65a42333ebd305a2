"""How much CPU the server's process tree used while it was measured.

One figure answers "is this server using the cores it was given?": a one-process server
(waitress, cheroot, Twisted) runs Python on one core at a time, so on two server CPUs it shows
about 1.0 busy of 2.0 whatever its threads; a tuned pre-fork server shows close to 2.0. The
comparison must say so rather than let a reader think the slower server was tuned badly.

Counted as user + system time, of every process in the tree plus what its reaped children used
(`children_user`/`children_system`): a worker that exits and is reaped during the run moves its
time into its parent's children counters, so the difference of two snapshots still counts it
once. Only a child that exits unreaped between the snapshots is missed; servers reap promptly.
The same snapshots read how long the tree's busy threads waited for a CPU (tuner.metrics.runqueue).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType

import psutil

from tuner.metrics.measurement import ServerCpu
from tuner.metrics.runqueue import ThreadTimes, thread_times, waited_share


class TreeCpuClock:
    """Snapshots the tree's CPU time on entry and on exit; `result()` gives the rate between."""

    def __init__(self, pids_fn: Callable[[], list[int]], of_cpus: float) -> None:
        self._pids_fn = pids_fn
        self._of_cpus = of_cpus
        self._start = self._end = 0.0
        self._t0 = self._t1 = 0.0
        self._threads_start: ThreadTimes | None = None
        self._threads_end: ThreadTimes | None = None

    def _snapshot(self) -> tuple[float, ThreadTimes | None]:
        try:
            pids = self._pids_fn()
        except Exception:  # noqa: BLE001 - a server that just died has no tree to read
            return 0.0, None
        return self._cpu_seconds(pids), thread_times(pids)

    @staticmethod
    def _cpu_seconds(pids: list[int]) -> float:
        total = 0.0
        for pid in pids:
            try:
                t = psutil.Process(pid).cpu_times()
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                continue
            total += t.user + t.system + t.children_user + t.children_system
        return total

    def __enter__(self) -> TreeCpuClock:
        (self._start, self._threads_start), self._t0 = self._snapshot(), time.monotonic()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        (self._end, self._threads_end), self._t1 = self._snapshot(), time.monotonic()

    @property
    def cpu_seconds(self) -> float:
        """CPU time the tree used between entry and exit."""
        return max(0.0, self._end - self._start)

    @property
    def waited(self) -> float | None:
        """The share of the time between entry and exit that the tree's busy threads waited
        for a CPU (tuner.metrics.runqueue.waited_share); None where unread."""
        return waited_share(self._threads_start, self._threads_end, self._t1 - self._t0)

    def result(self) -> ServerCpu:
        wall = self._t1 - self._t0
        return ServerCpu(self.cpu_seconds / wall if wall > 0 else 0.0, self._of_cpus)
