"""How much CPU the server's process tree used while it was measured.

One figure answers "is this server using the cores it was given?": a one-process server
(waitress, cheroot, Twisted) runs Python on one core at a time, so on two server CPUs it shows
about 1.0 busy of 2.0 whatever its threads; a tuned pre-fork server shows close to 2.0. The
comparison must say so rather than let a reader think the slower server was tuned badly.

Counted as user + system time, of every process in the tree plus what its reaped children used
(`children_user`/`children_system`): a worker that exits and is reaped during the run moves its
time into its parent's children counters, so the difference of two snapshots still counts it
once. Only a child that exits unreaped between the snapshots is missed; servers reap promptly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import psutil


@dataclass(frozen=True)
class ServerCpu:
    """CPU-seconds per wall second of the server tree, against the CPUs it could use."""

    busy_cpus: float  # 1.0 = one core busy the whole run
    of_cpus: float  # the pinned server CPUs, or the lower `--cpu-limit`

    @property
    def utilisation(self) -> float:
        """Busy share of the CPUs the server had, 0..1 (nan when it had none)."""
        return min(1.0, self.busy_cpus / self.of_cpus) if self.of_cpus > 0 else math.nan

    def describe(self) -> str:
        return f"{self.busy_cpus:.2f} of {self.of_cpus:g} CPUs busy ({self.utilisation:.0%})"

    def to_json(self) -> dict[str, float]:
        return {"busy_cpus": round(self.busy_cpus, 3), "of_cpus": self.of_cpus}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServerCpu:
        return cls(float(data.get("busy_cpus") or 0.0), float(data.get("of_cpus") or 0.0))


class TreeCpuClock:
    """Snapshots the tree's CPU time on entry and on exit; `result()` gives the rate between."""

    def __init__(self, pids_fn: Callable[[], list[int]], of_cpus: float) -> None:
        self._pids_fn = pids_fn
        self._of_cpus = of_cpus
        self._start = self._end = 0.0
        self._t0 = self._t1 = 0.0

    def _cpu_seconds(self) -> float:
        try:
            pids = self._pids_fn()
        except Exception:  # noqa: BLE001 - a server that just died has no tree to read
            return 0.0
        total = 0.0
        for pid in pids:
            try:
                t = psutil.Process(pid).cpu_times()
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                continue
            total += t.user + t.system + t.children_user + t.children_system
        return total

    def __enter__(self) -> TreeCpuClock:
        self._start, self._t0 = self._cpu_seconds(), time.monotonic()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._end, self._t1 = self._cpu_seconds(), time.monotonic()

    @property
    def cpu_seconds(self) -> float:
        """CPU time the tree used between entry and exit."""
        return max(0.0, self._end - self._start)

    def result(self) -> ServerCpu:
        wall = self._t1 - self._t0
        return ServerCpu(self.cpu_seconds / wall if wall > 0 else 0.0, self._of_cpus)
