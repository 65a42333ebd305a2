"""Hand grids for one-process servers: every combination of a few levers an engineer would try.

`benchmarks/grid_vs_tuner.py` measures a server's whole hand grid to see whether the tuner
finds as good a config; a one-process server has no process counts to vary, so its grid
crosses its thread counts with the switches its docs and traps point at.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from tuner.settings import Value

# Thread counts worth a try by hand: dense where CPU-bound apps peak, sparse where I/O-bound
# apps keep gaining.
THREAD_STEPS: tuple[int, ...] = (1, 2, 4, 6, 8, 12, 16, 24, 32, 64)


def product_grid(axes: Mapping[str, Sequence[Value]]) -> list[dict[str, Value]]:
    """Every combination of the axes' values, the first axis varying slowest."""
    names = list(axes)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*axes.values())]
