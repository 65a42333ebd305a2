"""What the server's and the load's CPUs really gave while a config was measured.

A window in which the hypervisor took a quarter of the server's core measures about a quarter
fewer req/s, and a process of someone else's on the load's core slows the clients; neither is
the config's doing. Counted over the run from the kernel's per-CPU counters (steal, busy) and
our own processes' CPU time (the server tree; the tuner and its load generator), per CPU set:

- stolen: the share of the set's time the hypervisor gave to another tenant;
- other: the share busy with processes that are neither the server's nor ours (process time
  on the set minus what our own processes used; interrupt time, which the kernel charges to no
  process and where most loopback packet work lands, is left out of both).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from types import TracebackType

import psutil

from tuner.metrics.coreshare import CoresGot, CoreShare
from tuner.metrics.cpustat import CpuTicks, read_cpu_ticks

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


class CoresClock:
    """Snapshots the CPUs' counters and our own CPU time on entry and exit.

    `server_seconds` is the server tree's CPU time between the same two moments (the
    TreeCpuClock measured around the same run), which this clock cannot see: the server's
    processes are our children, but not reaped ones."""

    def __init__(self, server_cpus: Sequence[int], load_cpus: Sequence[int]) -> None:
        self._server_cpus = tuple(server_cpus)
        overlap = set(server_cpus) & set(load_cpus)
        self._load_cpus = () if overlap else tuple(load_cpus)
        self._start: dict[int, CpuTicks] = {}
        self._end: dict[int, CpuTicks] = {}
        self._own_start = self._own_end = 0.0
        self._t0 = self._t1 = 0.0

    def _snapshot(self) -> tuple[dict[int, CpuTicks], float, float]:
        return read_cpu_ticks(self._server_cpus + self._load_cpus), _own_seconds(), time.monotonic()

    def __enter__(self) -> CoresClock:
        self._start, self._own_start, self._t0 = self._snapshot()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._end, self._own_end, self._t1 = self._snapshot()

    def result(self, server_seconds: float) -> CoresGot | None:
        """None where the kernel's counters could not be read (no `/proc/stat`)."""
        server = self._share(self._server_cpus, server_seconds)
        if server is None:
            return None
        if not self._load_cpus:  # one set holds the server and us
            together = self._share(self._server_cpus, server_seconds + self._own())
            return CoresGot(together or server, None)
        return CoresGot(server, self._share(self._load_cpus, self._own()))

    def _own(self) -> float:
        return max(0.0, self._own_end - self._own_start)

    def _share(self, cpus: Sequence[int], own_seconds: float) -> CoreShare | None:
        seen = [c for c in cpus if c in self._start and c in self._end]
        deltas = [self._end[c] - self._start[c] for c in seen]
        total = sum(d.total for d in deltas)
        if not deltas or total <= 0:
            return None
        busy_s = sum(d.busy for d in deltas) / _TICKS_PER_S
        total_s = total / _TICKS_PER_S
        stolen = sum(d.steal for d in deltas) / total
        other = max(0.0, busy_s - own_seconds) / total_s
        return CoreShare(len(deltas), stolen, min(1.0, other))


def _own_seconds() -> float:
    """CPU time of this process and its reaped children (the load generator's processes,
    joined at the end of each run)."""
    times = psutil.Process().cpu_times()
    return times.user + times.system + times.children_user + times.children_system
