"""How long the server's busy threads waited for a CPU while runnable, from the kernel's
schedstat.

The CPU counters say what else ran on the server's CPUs (tuner.metrics.cores), not whether the
server wanted that time: beside a busy neighbour, a server that sleeps on I/O most of the time
is woken ahead of it and loses little, while a CPU-bound one loses about the neighbour's
share. Each thread's `/proc/<pid>/task/<tid>/schedstat` counts, in nanoseconds, the time it ran
and the time it sat runnable in a run queue.

What a thread's wait costs is its share of the thread's own time: a thread that waited a fifth
of the run served its requests a fifth slower, however many threads beside it did the same.
Summed over the tree, the waits of many threads that each wait a little (32 threads asleep on
I/O, each woken behind a spinner for a moment) read like one CPU-bound thread's, so the tree's
figure is each thread's wait as a share of the run, averaged with the thread's demand (run +
wait) as its weight: threads that did the work count, idle helpers do not. It also holds the
threads' waits behind each other, so it bounds what other processes took; it is not that share.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeAlias

PROC = Path("/proc")
# Each thread's (run, run-queue wait) in ns, by (pid, tid).
ThreadTimes: TypeAlias = dict[tuple[int, int], tuple[int, int]]


def thread_times(pids: list[int], proc: Path = PROC) -> ThreadTimes | None:
    """Each thread's run time and run-queue wait so far, by (pid, tid); None when the kernel
    keeps no schedstat (no `/proc/<pid>/task/<tid>/schedstat` for any of `pids`)."""
    found: ThreadTimes = {}
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
            if len(fields) >= 2 and all(f.isdigit() for f in fields[:2]) and task.name.isdigit():
                found[(pid, int(task.name))] = (int(fields[0]), int(fields[1]))
    return found if readable else None


def waited_share(start: ThreadTimes | None, end: ThreadTimes | None, wall_s: float) -> float | None:
    """The share of the `wall_s` between two readings that the server's threads sat waiting for
    a CPU, each thread weighted by its demand (run + wait) over it (a thread started meanwhile
    counts from its start; one that ended, not). None when either reading failed; 0 when no
    thread ran."""
    if start is None or end is None or wall_s <= 0:
        return None
    weighted = demand = 0.0
    for task, (run_ns, wait_ns) in end.items():
        run0, wait0 = start.get(task, (0, 0))
        ran, waited = max(0, run_ns - run0) / 1e9, max(0, wait_ns - wait0) / 1e9
        weighted += (ran + waited) * min(1.0, waited / wall_s)
        demand += ran + waited
    return weighted / demand if demand > 0 else 0.0
