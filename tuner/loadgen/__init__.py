"""The HTTP load generator: closed loop (like wrk) or open loop (like wrk2), on pinned cores."""

from tuner.loadgen.engine import WindowStats, run_load
from tuner.loadgen.spec import LoadSpec, RequestSpec, Workload, load_workload_file

__all__ = [
    "LoadSpec",
    "RequestSpec",
    "WindowStats",
    "Workload",
    "load_workload_file",
    "run_load",
]
