"""The HTTP load generator: closed loop (like wrk) or open loop (like wrk2), on pinned cores.

The engine (multiprocessing, httptools) loads on first use, so modules that only need the
workload and load specs (the CLI's option parsing, `tuner --help`) stay light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tuner.loadgen.spec import ClientModel, LoadSpec, RequestSpec, Workload, load_workload_file

if TYPE_CHECKING:  # NOTE: lets type checkers and editors follow the lazy names
    from tuner.loadgen.engine import WindowStats, run_load

__all__ = [
    "ClientModel",
    "LoadSpec",
    "RequestSpec",
    "WindowStats",
    "Workload",
    "load_workload_file",
    "run_load",
]
_LAZY = {"WindowStats": "tuner.loadgen.engine", "run_load": "tuner.loadgen.engine"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
