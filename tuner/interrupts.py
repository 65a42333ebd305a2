"""A stop signal, remembered as well as raised.

The CLI's handler raises KeyboardInterrupt at once, which stops whatever runs. But Python drops
an exception raised while a finalizer runs (a `__del__` or weakref callback: it prints
"Exception ignored in ..." and goes on), and a tuner that ignores Ctrl-C for a whole study is
worse than one that stops a moment late. So the handler also records the signal, and the long
loops check it at their safe points (after each trial, before each confirmation run).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

# Ctrl-C, and what a service manager or a closed terminal sends: each stops the tuner alike.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_requested: str | None = None


def request(signal_name: str) -> None:
    global _requested
    _requested = signal_name


def clear() -> None:
    global _requested
    _requested = None


def raise_if_requested() -> None:
    """Raise the KeyboardInterrupt a stop signal asked for, if one arrived and was lost."""
    if _requested is not None:
        raise KeyboardInterrupt(_requested)


def on_stop_signal(signum: int, _frame: object) -> None:
    """The handler: raise KeyboardInterrupt named after the signal, and remember it."""
    name = signal.Signals(signum).name
    request(name)  # kept, in case the exception lands in a finalizer and is lost
    raise KeyboardInterrupt(name)


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """Inside: every stop signal raises KeyboardInterrupt in the main thread (the running
    server is stopped on the way out) and is remembered for the loops' safe points. The
    handlers before are restored, and the request cleared, on the way out. Off the main
    thread, where no handler can be set, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, on_stop_signal) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        clear()
