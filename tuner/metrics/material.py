"""How large a difference beyond the noise must be to be worth a change of config.

The pairs of interleaved rounds can separate differences too small to matter: PSS barely moves
from run to run, so a config a tenth of a megabyte lighter than the default in every round is
"clearly" lighter, and buys nothing. A difference counts for a choice only when it is beyond the
noise (tuner.metrics.stats.clearly_lower) and at least these shares of the reference's median.
"""

from __future__ import annotations

# Memory (PSS): a hundredth of the reference's; under it no one sizes a box by the saving (it
# let a config 2x slower at p99 stand for the default on a front).
MATERIAL_MEMORY = 0.01
# p99: a tenth of the reference's, when it is to replace a config that is as fast, or to stand
# as a point of its own on a latency-memory front.
MATERIAL_TAIL = 0.10
