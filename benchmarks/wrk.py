"""wrk, the reference load generator, as the benchmarks run it: its command line pinned to the
load CPUs and its report read into figures (req/s, latency percentiles, errors).

loadgen_vs_wrk.py compares our load generator with it; vs_techempower.py measures one row per
test type with it too, as a cross-check of the ratios ours reports.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

# wrk's latency units, in milliseconds
_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


@dataclass(frozen=True)
class WrkFigures:
    rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    errors: int  # socket errors (connect, read, write, timeout) and non-2xx/3xx answers


def wrk_command(
    url: str, connections: int, duration_s: float, load_cpus: Sequence[int], timeout_s: float
) -> list[str]:
    """wrk on `load_cpus` (one thread each), for whole seconds: wrk reads no fraction."""
    seconds = max(1, math.ceil(duration_s))
    threads = max(1, min(len(load_cpus), connections))
    cpus = ",".join(map(str, load_cpus))
    return [
        "taskset", "-c", cpus, "wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s",
        f"--timeout={math.ceil(timeout_s)}s", "--latency", url,
    ]  # fmt: skip


def ms(text: str) -> float:
    """A wrk latency ("812.00us", "1.20ms", "2.00s") in milliseconds."""
    found = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if found is None:
        raise ValueError(f"not a wrk latency: {text!r}")
    return float(found.group(1)) * _UNITS[found.group(2)]


def parse_report(text: str) -> WrkFigures:
    """The figures of a `wrk --latency` report; ValueError naming what is missing."""

    def field(pattern: str) -> str:
        found = re.search(pattern, text)
        if found is None:
            raise ValueError(f"wrk's report has no {pattern!r}: {text[-300:]!r}")
        return found.group(1)

    socket = re.search(r"connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    errors = sum(map(int, socket.groups())) if socket else 0
    return WrkFigures(
        rps=float(field(r"Requests/sec:\s+([\d.]+)")),
        p50_ms=ms(field(r"\s50%\s+(\S+)")),
        p90_ms=ms(field(r"\s90%\s+(\S+)")),
        p99_ms=ms(field(r"\s99%\s+(\S+)")),
        errors=errors + (int(bad.group(1)) if bad else 0),
    )
