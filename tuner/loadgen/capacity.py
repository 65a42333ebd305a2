"""How many load CPUs a client_bound run would have needed, from what the run measured.

A client_bound figure is the load generator's limit. The run itself says how far off the
server's was: the load generator's req/s per fully busy core, against what the server would
serve with its CPUs fully busy. Pure arithmetic; the callers bring the figures and the split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tuner.loadgen.checks import CLIENT_BOUND_CPU_PCT

if TYPE_CHECKING:
    from tuner.metrics.measurement import Measurement


@dataclass(frozen=True)
class LoadNeed:
    """The estimate: what one load core sends, what the server would take, the cores for it."""

    per_core_rps: float  # req/s the load generator sent per fully busy core
    server_rps: float  # req/s the server would serve with all its CPUs busy
    load_cpus: int  # load CPUs to send that with each under the client_bound line

    def to_json(self) -> dict[str, Any]:
        return {
            "per_core_rps": round(self.per_core_rps, 1),
            "server_rps": round(self.server_rps, 1),
            "load_cpus": self.load_cpus,
        }

    @classmethod
    def from_json(cls, data: object) -> LoadNeed | None:
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                float(data["per_core_rps"]), float(data["server_rps"]), int(data["load_cpus"])
            )
        except (KeyError, TypeError, ValueError):
            return None


def load_need(rps: float, load_busy_cpus: float, server_busy_share: float) -> LoadNeed | None:
    """The load CPUs a run at `rps` would have needed to stay under the client_bound line.

    `load_busy_cpus`: the load processes' CPU use, summed, in cores (1.0 = one core busy the
    whole window); `server_busy_share`: the share of its CPUs the server kept busy (0..1).
    None when a figure is missing or zero (nothing to scale from).

    Assumes req/s grows in proportion to the CPU each side spends: true of a server bound by
    its CPU (it would serve rps / share at every CPU busy); a server that waits on its app's
    I/O reaches less, so the estimate is then an upper one. Assumes too that more load
    processes share the connections evenly, as the load generator spreads them.
    """
    if not (rps > 0 and load_busy_cpus > 0 and server_busy_share > 0):
        return None
    if not all(map(math.isfinite, (rps, load_busy_cpus, server_busy_share))):
        return None
    per_core = rps / load_busy_cpus
    server_rps = rps / min(1.0, server_busy_share)
    # Each load core kept under the line where its figure would be judged client_bound again.
    cores = server_rps / (per_core * CLIENT_BOUND_CPU_PCT / 100)
    return LoadNeed(per_core, server_rps, max(1, math.ceil(cores - 1e-9)))


def need_of(measurement: Measurement) -> LoadNeed | None:
    """The estimate for one run: None unless it was client_bound and recorded both CPU
    figures (the server's, started by us; the load's, since loadgen_busy_cpus exists)."""
    cpu, load = measurement.server_cpu, measurement.loadgen_busy_cpus
    if not measurement.client_bound or cpu is None or load is None:
        return None
    return load_need(measurement.median_rps, load, cpu.utilisation)


def need_text(need: LoadNeed | None, load_cpus: int, spare: int) -> str:
    """The sentence after a client_bound line: how many load CPUs, and whether this machine has
    them (`load_cpus`: the load CPUs the run had; `spare`: CPUs in neither the server's set nor
    the load's). "" without an estimate."""
    if need is None:
        return ""
    said = (
        f"about {need.load_cpus} load CPUs would have been needed (the load generator sent "
        f"{need.per_core_rps:,.0f} req/s per busy core; the server would serve about "
        f"{need.server_rps:,.0f} req/s with its CPUs fully busy)"
    )
    more = need.load_cpus - load_cpus
    if more <= 0:
        return (
            f"{said}: no more than the {load_cpus} it had, so its busiest process was the "
            "limit (an uneven share of connections)"
        )
    if spare >= more:
        return (
            f"{said}; this machine has {spare} to spare: give the load {need.load_cpus} CPUs "
            "with --load-cpus"
        )
    if spare > 0:
        return (
            f"{said}; this machine has only {spare} to spare: run on a bigger box or give the "
            "server fewer CPUs"
        )
    return (
        f"{said}; this machine has none to spare: run on a bigger box or give the server fewer CPUs"
    )
