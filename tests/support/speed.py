"""How slow this machine is, measured with the tuner's own CPU probe, so that a timing which is
part of a test's premise (a trial window long enough to be caught under load, ...) grows on a
slower or busier machine instead of being fixed in seconds."""

from __future__ import annotations

import functools
import os

from tuner.machine.probe import cpu_probe_ms

# The probe's median on the machine these timings were chosen on (a 2-core VM, no test running).
REFERENCE_PROBE_MS = 11.0


@functools.cache
def slowness() -> float:
    """How many times slower than the reference this machine runs the probe; never below 1, so
    a faster machine keeps the timings the tests were written with. Measured once per session,
    on the server's CPU (the first one), where a trial's server runs."""
    return max(1.0, cpu_probe_ms((min(os.sched_getaffinity(0)),)) / REFERENCE_PROBE_MS)


def scaled(seconds: float) -> float:
    """`seconds` as long as it takes on this machine: what the reference did in that time."""
    return round(seconds * slowness(), 2)
