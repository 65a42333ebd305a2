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
    """What one CPU set of a run lost (`got`), against the share at which a run counts as
    lossy."""

    where: str  # "server" or "load"
    got: CoreShare
    limit: float

    @property
    def stolen(self) -> float:
        return self.got.stolen

    @property
    def other(self) -> float:
        return self.got.other

    @property
    def waited(self) -> float | None:
        """The server's set: the share its busy threads waited for a CPU (None: not read, or
        the load's)."""
        return self.got.waited

    @property
    def share(self) -> float:
        """What the set lost that the config needed: steal, and other processes' time up to
        what the server waited for a CPU (beside a busy neighbour, a server asleep on I/O is
        woken ahead of it and loses little; a CPU-bound one waits about the neighbour's
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
        return {"where": self.where, **self.got.to_json(), "limit": self.limit}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Loss:
        return cls(
            str(data.get("where") or "server"),
            CoreShare.from_json(data),
            float(data.get("limit") or LOSSY),
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
    losses = [Loss(where, share, limit) for where, share, limit in sets if share is not None]
    return max(losses, key=lambda loss: loss.severity)
