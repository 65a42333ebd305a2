"""Whether a run's CPUs lost too much of their time for its figures to stand for the config.

A run whose server CPUs the hypervisor or a neighbour took a share of measures about that
share fewer req/s (where the server needed its CPUs): the confirmation rounds measure such a
run again rather than average it in (tuner.workflow.confirm.more_rounds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuner.metrics.coreshare import CoreShare, causes_text
from tuner.metrics.measurement import Measurement

# The server's CPUs: a run that lost more than a tenth of their time (steal + other
# processes) can lose its round by the loss alone against a config 10% better, the smallest
# difference the extra rounds are sized to find (tuner.workflow.confirm.EXTRA_ROUNDS); a
# smaller loss is inside the run-to-run spread the pairs of rounds already absorb.
LOSSY = 0.10
# The load's CPUs: the load generator runs with headroom (client_bound is past 90% of its
# CPUs), and a loss costs the figure only where it cuts into the time the clients needed. So
# a client_bound run's load loss counts at `LOSSY`, any other run's only past half the set's
# time (what a neighbour on the load CPUs cost: docs/pages/benchmarks.md, "What the CPUs
# lost").
LOAD_LOSSY = 0.5


@dataclass(frozen=True)
class Loss:
    """What one CPU set of a run lost, against the share at which a run counts as lossy."""

    where: str  # "server" or "load"
    stolen: float
    other: float
    limit: float
    # The server's set: the share its threads waited for a CPU (None: not read, or the load's).
    waited: float | None = None

    @property
    def share(self) -> float:
        """What the set lost that the config needed: steal, and other processes' time up to
        what the server waited for a CPU (beside a busy neighbour, a server asleep on I/O is
        woken ahead of it and loses nothing; a CPU-bound one waits about the neighbour's
        share)."""
        other = self.other if self.waited is None else min(self.other, self.waited)
        return self.stolen + other

    @property
    def lossy(self) -> bool:
        return self.share > self.limit

    @property
    def severity(self) -> float:
        """The share against its limit (over 1: lossy); what ranks two runs' losses."""
        return self.share / self.limit

    def text(self) -> str:
        """In words: "server CPUs lost 18% to steal"; "..., the server waiting 2% of it" when
        the server waited for less than the other processes took."""
        causes = causes_text(self.stolen, self.other) or f"{self.share:.0%}"
        said = f"{self.where} CPUs lost {causes}"
        if self.waited is not None and self.waited < self.other:
            said += f" (the server waited for a CPU {self.waited:.0%} of the time)"
        return said

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "where": self.where,
            "stolen": round(self.stolen, 4),
            "other": round(self.other, 4),
            "limit": self.limit,
        }
        if self.waited is not None:
            data["waited"] = round(self.waited, 4)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Loss:
        waited = data.get("waited")
        return cls(
            str(data.get("where") or "server"),
            float(data.get("stolen") or 0.0),
            float(data.get("other") or 0.0),
            float(data.get("limit") or LOSSY),
            float(waited) if isinstance(waited, int | float) else None,
        )


def worst_loss(run: Measurement) -> Loss | None:
    """The loss of the run's CPU set that is the largest against its limit; None when the run
    did not record what its CPUs lost (then it is never judged lossy)."""
    if run.cores is None:
        return None
    load_limit = LOSSY if run.client_bound else LOAD_LOSSY
    sets: list[tuple[str, CoreShare | None, float]] = [
        ("server", run.cores.server, LOSSY),
        ("load", run.cores.load, load_limit),
    ]
    losses = [
        Loss(where, share.stolen, share.other, limit, share.waited)
        for where, share, limit in sets
        if share is not None
    ]
    return max(losses, key=lambda loss: loss.severity)
