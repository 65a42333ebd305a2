"""Which machine runs a trial, and whether two machines' figures can share one study.

Several hosts may run trials of one study through a shared database (PostgreSQL). Each trial
records the host that measured it; req/s from a different CPU model, core count or CPU split
does not compare, so a host whose hardware differs from the study's is refused unless the user
says the mix is intended.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from tuner.errors import ConfigError
from tuner.machine.cpus import cpu_model

HARDWARE_KEYS = ("cpu_model", "cpus", "server_cpu_count", "load_cpu_count")


def this_host(server_cpus: Sequence[int], load_cpus: Sequence[int]) -> dict[str, Any]:
    """The host, process and hardware of this tuner: recorded with every trial it runs."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        **hardware(server_cpus, load_cpus),
    }


def hardware(server_cpus: Sequence[int], load_cpus: Sequence[int]) -> dict[str, Any]:
    """What makes figures comparable between hosts. CPU counts, not ids: host A may pin the
    server to CPU 0 and host B to CPU 1 and still measure the same thing."""
    return {
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count() or 0,
        "server_cpu_count": len(server_cpus),
        "load_cpu_count": len(load_cpus),
    }


def describe(hw: Mapping[str, Any]) -> str:
    return (
        f"{hw.get('cpu_model')}, {hw.get('cpus')} CPUs, server on {hw.get('server_cpu_count')} "
        f"/ load on {hw.get('load_cpu_count')}"
    )


def check_same_hardware(
    study_name: str, study_hw: Mapping[str, Any], mine: Mapping[str, Any], allow_mixed: bool
) -> None:
    """ConfigError when this host's hardware differs from the study's and no mix was allowed."""
    differs = [key for key in HARDWARE_KEYS if study_hw.get(key) != mine.get(key)]
    if not differs or allow_mixed:
        return
    raise ConfigError(
        f"study {study_name!r} is measured on {describe(study_hw)}; this host has "
        f"{describe(mine)} ({', '.join(differs)} differ), so its figures would not compare; "
        "run it on matching hardware, use another --study-name, or pass --allow-mixed-hosts"
    )
