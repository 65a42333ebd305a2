"""How long the server's threads waited for a CPU while runnable, from the kernel's schedstat.

The CPU counters say what else ran on the server's CPUs (tuner.metrics.cores), not whether the
server wanted that time: beside a busy neighbour, a server that sleeps on I/O most of the time
is woken ahead of it and loses nothing, while a CPU-bound one loses about the neighbour's
share. Each thread's `/proc/<pid>/task/<tid>/schedstat` counts, in nanoseconds, the time it ran
and the time it sat runnable in a run queue; the second, summed over the tree, bounds what the
other processes took from the server (it also holds the waits of the server's threads behind
each other, so it is a bound, not the share itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeAlias

PROC = Path("/proc")
# Each thread's run-queue wait in ns, by (pid, tid).
Waits: TypeAlias = dict[tuple[int, int], int]


def waits_ns(pids: list[int], proc: Path = PROC) -> Waits | None:
    """Each thread's run-queue wait so far, by (pid, tid); None when the kernel keeps no
    schedstat (no `/proc/<pid>/task/<tid>/schedstat` for any of `pids`)."""
    found: Waits = {}
    readable = False
    for pid in pids:
        try:
            tasks = list((proc / str(pid) / "task").iterdir())
        except OSError:  # gone, or not ours to read
            continue
        for task in tasks:
            try:
                fields = (task / "schedstat").read_text().split()
            except OSError:
                continue
            readable = True
            if len(fields) >= 2 and fields[1].isdigit() and task.name.isdigit():
                found[(pid, int(task.name))] = int(fields[1])
    return found if readable else None


def waited_seconds(start: Waits | None, end: Waits | None) -> float | None:
    """What the threads waited between two readings (a thread started meanwhile counts from its
    start; one that ended, not); None when either reading failed."""
    if start is None or end is None:
        return None
    return sum(max(0, ns - start.get(task, 0)) for task, ns in end.items()) / 1e9
