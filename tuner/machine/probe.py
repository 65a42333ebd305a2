"""A fixed CPU probe on the server's CPUs, repeated during a study to see how noisy the machine is.

The same pure-Python loop should take the same time; when it does not, the machine is busy
or throttled, and figures measured meanwhile are less comparable.
"""

from __future__ import annotations

import subprocess
import sys

from tuner.errors import TunerError

_PROBE = """
import os, statistics, sys, time
os.sched_setaffinity(0, {cpus!r})
def work():
    total = 0
    for i in range(200_000):
        total = (total + i * i) % 1_000_003
    return total
times = []
for _ in range(7):
    start = time.perf_counter_ns()
    work()
    times.append((time.perf_counter_ns() - start) / 1e6)
print(statistics.median(times))
"""


def cpu_probe_ms(cpus: tuple[int, ...], timeout_s: float = 30.0) -> float:
    """Median time in ms of a fixed CPU loop, run in a fresh process pinned to `cpus[0]`."""
    try:
        done = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [sys.executable, "-c", _PROBE.format(cpus={cpus[0]})],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=True,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        raise TunerError(f"CPU probe failed: {exc}") from exc
    return float(done.stdout.strip())
