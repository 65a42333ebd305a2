"""A Linux timerfd, through ctypes: a file descriptor that becomes readable at a given
CLOCK_MONOTONIC instant, to the microsecond.

Why: epoll's own timeout is in whole milliseconds. An open-loop load sends each request at its
intended time and counts latency from then, so a timer that fires up to 1 ms late adds about
0.5 ms to every latency it reports. (`os.timerfd_create` only exists from Python 3.13.)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


_TFD_TIMER_ABSTIME = 1


class TimerFd:
    """One-shot alarm at an absolute `time.monotonic_ns()` instant."""

    __slots__ = ("fd", "_settime", "_spec", "_spec_ref")

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.timerfd_create(time.CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"timerfd_create: {os.strerror(code)}")
        self.fd: int = fd
        self._settime = libc.timerfd_settime
        self._spec = _Itimerspec()  # reused: arming allocates nothing
        self._spec_ref = ctypes.byref(self._spec)

    def arm(self, when_ns: int) -> None:
        """Become readable at `when_ns` (at once if that has passed)."""
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = divmod(max(when_ns, 1), 1_000_000_000)
        if self._settime(self.fd, _TFD_TIMER_ABSTIME, self._spec_ref, None) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"timerfd_settime: {os.strerror(code)}")

    def clear(self) -> None:
        """Consume the expiry, so the fd is no longer readable."""
        # Re-armed for later since it fired: nothing to consume.
        with contextlib.suppress(BlockingIOError):
            os.read(self.fd, 8)

    def close(self) -> None:
        os.close(self.fd)


def open_timerfd() -> TimerFd | None:
    """A TimerFd, or None where the system has none (the loop then uses epoll's ms timeout)."""
    try:
        return TimerFd()
    except (OSError, AttributeError):
        return None
