"""CPU sets: parse `0,2-3` lists, check they exist, split the machine between server and load."""

from __future__ import annotations

import os

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


def check_disjoint(server: tuple[int, ...], load: tuple[int, ...]) -> None:
    shared = sorted(set(server) & set(load))
    if shared:
        raise ConfigError(
            f"--server-cpus and --load-cpus share CPU {shared[0]}; give them disjoint sets "
            "(a shared CPU would measure the load generator, not the server)"
        )
