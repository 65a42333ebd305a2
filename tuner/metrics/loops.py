"""Is the app blocking its event loop? Asked of the kernel while the server is under load.

An event loop that waits for I/O sleeps in epoll_wait or epoll_pwait (asyncio's selector on
Linux, libuv under uvloop); between waits it runs. A synchronous call inside `async def`
(`time.sleep`, a blocking socket or file call) puts the loop's thread to sleep in another
system call instead, and every connection of that process waits with it. So the sampler reads,
every few milliseconds, which system call each loop thread sleeps in
(`/proc/PID/task/PID/syscall`: its number, or `running`), and the share of samples spent
asleep outside the loop's own wait is the server's fact, not a guess from latencies.

futex is left out of the share: a loop thread also sleeps there waiting for the GIL that
another thread of the process holds, which is no call of the app's. So is a thread stopped
outside any system call (a page fault, shown as -1).
"""

from __future__ import annotations

import os
import platform
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

import psutil

from tuner.metrics.measurement import BlockedLoop

# Sampling period: 200 reads a second per loop process (a pread of an open /proc file, about
# 3 us each), enough for hundreds of samples in a 1.5 s window without disturbing the server.
SAMPLE_PERIOD_S = 0.005
# The loop processes are looked up again this often (a recycled worker is a new process).
PIDS_EVERY_S = 0.25
# Fewer samples of a process than this say nothing about it.
MIN_SAMPLES = 50
# A loop asleep outside its own wait in more than this share of the samples is blocked.
# Measured here (uvicorn, 1-3 workers, 64 connections, 2 s): apps/async_wait.py and
# apps/async_api.py 0-0.2% on every loop (a stray accept4 or write), apps/async_blocking.py
# (time.sleep(0.05) inside async def) 89-94% on each. A quarter leaves a wide margin both ways.
BLOCKED_SHARE = 0.25

# The syscall numbers this module names, per machine (asm/unistd.h); others are shown by
# number. The loop's own waits are the epoll ones.
_SYSCALLS: Mapping[str, Mapping[int, str]] = {
    "x86_64": {
        0: "read",
        1: "write",
        7: "poll",
        23: "select",
        35: "nanosleep",
        42: "connect",
        43: "accept",
        44: "sendto",
        45: "recvfrom",
        46: "sendmsg",
        47: "recvmsg",
        61: "wait4",
        73: "flock",
        74: "fsync",
        75: "fdatasync",
        202: "futex",
        230: "clock_nanosleep",
        232: "epoll_wait",
        257: "openat",
        270: "pselect6",
        271: "ppoll",
        281: "epoll_pwait",
        288: "accept4",
        441: "epoll_pwait2",
    },
    "aarch64": {
        22: "epoll_pwait",
        32: "flock",
        56: "openat",
        63: "read",
        64: "write",
        72: "pselect6",
        73: "ppoll",
        82: "fsync",
        83: "fdatasync",
        98: "futex",
        101: "nanosleep",
        115: "clock_nanosleep",
        202: "accept",
        203: "connect",
        206: "sendto",
        207: "recvfrom",
        211: "sendmsg",
        212: "recvmsg",
        242: "accept4",
        260: "wait4",
        441: "epoll_pwait2",
    },
}
RUNNING = "running"
IDLE = frozenset({"epoll_wait", "epoll_pwait", "epoll_pwait2"})
NOT_COUNTED = frozenset({RUNNING, "futex", "-1"})


def syscall_name(field: str, machine: str | None = None) -> str:
    """`/proc/PID/syscall`'s first field as a name: "running", "-1", "clock_nanosleep", or
    "syscall N" for a number this module does not name."""
    if not field.isdigit():
        return field
    names = _SYSCALLS.get(machine or platform.machine(), {})
    return names.get(int(field), f"syscall {field}")


@dataclass(frozen=True)
class LoopSamples:
    """What one loop process's main thread was seen doing: samples by state ("running",
    "epoll_wait", "clock_nanosleep", ...)."""

    pid: int
    states: Mapping[str, int]

    @property
    def samples(self) -> int:
        return sum(self.states.values())

    def blocked(self) -> tuple[float, str]:
        """(share of samples asleep outside the loop's wait, the call it slept in most)."""
        asleep = Counter(
            {s: n for s, n in self.states.items() if s not in IDLE and s not in NOT_COUNTED}
        )
        if not asleep or not self.samples:
            return 0.0, ""
        call, _ = asleep.most_common(1)[0]
        return asleep.total() / self.samples, call


def blocked_loop(loops: Sequence[LoopSamples]) -> BlockedLoop | None:
    """The worst loop process, when any judged one (MIN_SAMPLES or more) was blocked more
    than BLOCKED_SHARE of its samples; None otherwise, or when none could be judged."""
    judged = [loop for loop in loops if loop.samples >= MIN_SAMPLES]
    found = [(loop.blocked(), loop.pid) for loop in judged]
    over = [(share, call, pid) for (share, call), pid in found if share > BLOCKED_SHARE]
    if not over:
        return None
    share, call, pid = max(over)
    return BlockedLoop(
        pid=pid, share=round(share, 3), call=call, blocked_loops=len(over), loops=len(judged)
    )


class LoopSampler:
    """Samples the main thread of each process `pids_fn()` names (looked up again every
    PIDS_EVERY_S) every `period_s` in a daemon thread; `loops()` gives what it saw.

    Samples are counts per state, so memory stays bounded however long the run. A machine
    whose syscalls this module cannot name, or a /proc it may not read, gives no samples."""

    def __init__(self, pids_fn: Callable[[], list[int]], period_s: float = SAMPLE_PERIOD_S) -> None:
        self._pids_fn = pids_fn
        self._period_s = period_s
        self._machine = platform.machine()
        self._fds: dict[int, int] = {}
        self._states: dict[int, Counter[str]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _refresh(self) -> None:
        try:
            pids = set(self._pids_fn())
        except Exception:  # noqa: BLE001 - a server that just died has no tree to sample
            pids = set()
        for pid in list(self._fds):
            if pid not in pids:
                os.close(self._fds.pop(pid))
        for pid in pids - set(self._fds):
            try:
                self._fds[pid] = os.open(f"/proc/{pid}/task/{pid}/syscall", os.O_RDONLY)
            except OSError:  # gone already, or not ours to read
                continue

    def sample(self) -> None:
        """One read of every watched thread; one that has exited is dropped."""
        for pid, fd in list(self._fds.items()):
            try:
                text = os.pread(fd, 32, 0).decode("ascii", "replace")
            except OSError:
                os.close(self._fds.pop(pid))
                continue
            field = text.split(" ", 1)[0].strip()
            if not field:
                continue
            state = syscall_name(field, self._machine)
            with self._lock:
                self._states.setdefault(pid, Counter())[state] += 1

    def _run(self) -> None:
        refreshed = time.monotonic()
        while not self._stop.wait(self._period_s):
            if time.monotonic() - refreshed >= PIDS_EVERY_S:
                self._refresh()
                refreshed = time.monotonic()
            self.sample()

    def loops(self) -> list[LoopSamples]:
        with self._lock:
            return [LoopSamples(pid, dict(states)) for pid, states in self._states.items()]

    def result(self) -> BlockedLoop | None:
        return blocked_loop(self.loops())

    def __enter__(self) -> LoopSampler:
        if self._machine in _SYSCALLS:
            self._refresh()
            self._thread = threading.Thread(target=self._run, name="loop-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def cmdline(pid: int) -> str:
    """A process's command line as one string ("" once it is gone)."""
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return ""
