"""A stop signal, remembered as well as raised.

The CLI's handler raises KeyboardInterrupt at once, which stops whatever runs. But Python drops
an exception raised while a finalizer runs (a `__del__` or weakref callback: it prints
"Exception ignored in ..." and goes on), and a tuner that ignores Ctrl-C for a whole study is
worse than one that stops a moment late. So the handler also records the signal, and the long
loops check it at their safe points (after each trial, before each confirmation run).
"""

from __future__ import annotations

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
