"""The load the benchmarks put on a server they started: one path, closed loop, on the load
CPUs of the default split. The port is a placeholder; the runner fills in the server's own."""

from __future__ import annotations

import argparse

from tuner.loadgen import LoadSpec, Workload
from tuner.procs.process import LOOPBACK


def path_load(path: str, args: argparse.Namespace, load_cpus: tuple[int, ...]) -> LoadSpec:
    """The benchmark's `--connections`, `--duration` and `--warmup` on `path`."""
    return LoadSpec(
        host=LOOPBACK,
        port=1,
        workload=Workload.single(path),
        connections=args.connections,
        duration_s=args.duration,
        warmup_s=args.warmup,
        load_cpus=load_cpus,
    )
