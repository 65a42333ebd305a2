"""CPU sets: parse `0,2-3` lists, check they exist, split the machine, pin a thread to them."""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import Iterator, Sequence

from tuner.errors import ConfigError


def available_cpus() -> tuple[int, ...]:
    return tuple(sorted(os.sched_getaffinity(0)))


def parse_cpu_list(text: str, option: str) -> tuple[int, ...]:
    """`"0,2-3"` -> (0, 2, 3); every CPU must be one this process may run on."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            first, _, last = part.strip().partition("-")
            low, high = int(first), int(last or first)
            if low > high:
                raise ValueError
            cpus.update(range(low, high + 1))
    except ValueError:
        raise ConfigError(f"{option} {text!r}: expected CPU numbers like 0 or 0,2-3") from None
    missing = sorted(cpus - set(available_cpus()))
    if missing:
        raise ConfigError(
            f"{option} {text!r}: CPU {missing[0]} is not available; "
            f"this machine offers {format_cpu_list(available_cpus())}"
        )
    return tuple(sorted(cpus))


def format_cpu_list(cpus: tuple[int, ...]) -> str:
    return ",".join(str(cpu) for cpu in cpus)


def default_split() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Server on the first half of the CPUs, load generator on the rest (0 | 1 on 2 cores)."""
    cpus = available_cpus()
    if len(cpus) < 2:
        raise ConfigError(
            "this machine offers one CPU; the server and the load generator need one each "
            "(a shared CPU would measure the load generator, not the server)"
        )
    half = len(cpus) // 2
    return cpus[:half], cpus[half:]


def spare_cpus(
    server: Sequence[int], load: Sequence[int], available: Sequence[int] | None = None
) -> int:
    """The CPUs this process may use that are in neither the server's set nor the load's."""
    cpus = available_cpus() if available is None else available
    return len(set(cpus) - set(server) - set(load))


def check_disjoint(server: tuple[int, ...], load: tuple[int, ...]) -> None:
    shared = sorted(set(server) & set(load))
    if shared:
        raise ConfigError(
            f"--server-cpus and --load-cpus share CPU {shared[0]}; give them disjoint sets "
            "(a shared CPU would measure the load generator, not the server)"
        )


@contextlib.contextmanager
def pinned(cpus: Sequence[int]) -> Iterator[None]:
    """Pin the calling thread to `cpus` for the block (empty = leave it), then restore it.

    sched_setaffinity(0) applies to the calling thread only, so other tuner threads keep
    running where they were, and a child forked inside the block inherits the set. The kernel
    silently drops CPUs outside this cgroup's cpuset, so what was granted is checked.
    """
    if not cpus:
        yield
        return
    wanted = set(cpus)
    previous = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, wanted)
        granted = os.sched_getaffinity(0)
    except (OSError, ValueError):  # EINVAL: not one of them is available
        granted = set()
    try:
        if granted != wanted:
            raise ConfigError(
                f"CPUs {sorted(wanted - granted)} are not available; "
                f"CPUs available here: {sorted(previous)}"
            )
        yield
    finally:
        os.sched_setaffinity(0, previous)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
