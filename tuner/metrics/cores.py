"""What the server's and the load's CPUs really gave while a config was measured.

A window in which the hypervisor took a quarter of the server's core measures about a quarter
fewer req/s, and a process of someone else's on the load's core slows the clients; neither is
the config's doing. Counted over the run from the kernel's per-CPU counters (steal, busy) and
our own processes' CPU time (the server tree; the tuner and its load generator), per CPU set:

- stolen: the share of the set's time the hypervisor gave to another tenant;
- other: the share busy with processes that are neither the server's nor ours (process time
  on the set minus what our own processes used; interrupt time, which the kernel charges to no
  process and where most loopback packet work lands, is left out of both);
- waited (the server's set): the share of the run the server's busy threads sat runnable
  waiting for a CPU, which bounds what the other processes took from the server itself.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from types import TracebackType

import psutil

from tuner.metrics.coreshare import CoresGot, CoreShare
from tuner.metrics.cpustat import CpuTicks, read_cpu_ticks

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


class CoresClock:
    """Snapshots the CPUs' counters and our own CPU time on entry and exit.

    `server_seconds` is the server tree's CPU time between the same two moments (the
    TreeCpuClock measured around the same run): our own tree holds it, and the load's CPUs
    are charged only with the rest."""

    def __init__(self, server_cpus: Sequence[int], load_cpus: Sequence[int]) -> None:
        self._server_cpus = tuple(server_cpus)
        overlap = set(server_cpus) & set(load_cpus)
        self._load_cpus = () if overlap else tuple(load_cpus)
        self._start: dict[int, CpuTicks] = {}
        self._end: dict[int, CpuTicks] = {}
        self._own_start = self._own_end = 0.0

    def _snapshot(self) -> tuple[dict[int, CpuTicks], float]:
        return read_cpu_ticks(self._server_cpus + self._load_cpus), _own_seconds()

    def __enter__(self) -> CoresClock:
        self._start, self._own_start = self._snapshot()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._end, self._own_end = self._snapshot()

    def result(self, server_seconds: float, server_waited: float | None = None) -> CoresGot | None:
        """None where the kernel's counters could not be read (no `/proc/stat`).
        `server_waited`: the share of the run the server's busy threads waited for a CPU
        (tuner.metrics.runqueue), kept with the server set's share."""
        server = self._share(self._server_cpus, server_seconds)
        if server is None:
            return None
        if server_waited is not None:
            server = replace(server, waited=server_waited)
        ours = max(0.0, self._own_end - self._own_start)  # the server's included
        if not self._load_cpus:  # one set holds the server and us
            return CoresGot(self._share(self._server_cpus, ours) or server, None)
        return CoresGot(server, self._share(self._load_cpus, max(0.0, ours - server_seconds)))

    def _deltas(self, cpus: Sequence[int]) -> list[CpuTicks]:
        """Each of `cpus`' counters over the run (a CPU unread at either end is left out)."""
        return [self._end[c] - self._start[c] for c in cpus if c in self._start and c in self._end]

    def _share(self, cpus: Sequence[int], own_seconds: float) -> CoreShare | None:
        deltas = self._deltas(cpus)
        total = sum(d.total for d in deltas)
        if not deltas or total <= 0:
            return None
        busy_s = sum(d.busy for d in deltas) / _TICKS_PER_S
        total_s = total / _TICKS_PER_S
        stolen = sum(d.steal for d in deltas) / total
        other = max(0.0, busy_s - own_seconds) / total_s
        idle = sum(d.idle for d in deltas) / total
        return CoreShare(len(deltas), stolen, min(1.0, other), idle=idle)


def _own_seconds() -> float:
    """CPU time of this process and every live process below it, each with its reaped
    children: the load generator's processes (kept alive between a study's runs, so never
    reaped into ours) and the server's tree."""
    total = 0.0
    me = psutil.Process()
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total
