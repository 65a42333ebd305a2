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

from collections.abc import Callable
from pathlib import Path
from types import TracebackType

PROC = Path("/proc")


def waits_ns(pids: list[int], proc: Path = PROC) -> dict[tuple[int, int], int] | None:
    """Each thread's run-queue wait so far, by (pid, tid); None when the kernel keeps no
    schedstat (no `/proc/<pid>/task/<tid>/schedstat` for any of `pids`)."""
    found: dict[tuple[int, int], int] = {}
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


class RunQueueClock:
    """Snapshots the tree's threads' run-queue waits on entry and exit; `seconds` is what they
    waited between (a thread started meanwhile counts from its start; one that ended, not)."""

    def __init__(self, pids_fn: Callable[[], list[int]], proc: Path = PROC) -> None:
        self._pids_fn = pids_fn
        self._proc = proc
        self._start: dict[tuple[int, int], int] | None = None
        self._end: dict[tuple[int, int], int] | None = None

    def _read(self) -> dict[tuple[int, int], int] | None:
        try:
            pids = self._pids_fn()
        except Exception:  # noqa: BLE001 - a server that just died has no tree to read
            return None
        return waits_ns(pids, self._proc)

    def __enter__(self) -> RunQueueClock:
        self._start = self._read()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._end = self._read()

    @property
    def seconds(self) -> float | None:
        """The tree's threads' run-queue wait between entry and exit; None when unread."""
        if self._start is None or self._end is None:
            return None
        waited = sum(max(0, ns - self._start.get(task, 0)) for task, ns in self._end.items())
        return waited / 1e9
