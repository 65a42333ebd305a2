"""A confirmation run whose CPUs lost too much is measured again once, and the cleaner kept.

Repeated, not discounted: a req/s scaled up for the time the CPUs lost would be an estimate of
what the config would have done; a repeat is a measurement. One repeat at most per run, so a
machine that is always busy costs at most twice the rounds and the rounds still end. The
repeat takes the run's place in its round, so the pairs of rounds are as before. Where the
rounds are budgeted (`compare --budget`), a `RunAllowance` holds the runs the budget has time
for beyond the planned rounds: repeats as they come, then a verdict's more rounds (all of
them or none); a lossy run past it is kept, and said to be.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.metrics.coreshare import causes_text
from tuner.metrics.lossy import Loss, worst_loss
from tuner.metrics.measurement import Measurement


@dataclass(frozen=True)
class Repeat:
    """One round's run measured twice because the first run's CPUs lost too much."""

    round_index: int
    first: Loss  # what the first run lost (its worst CPU set)
    # What the repeat lost; None when it failed, or recorded no loss (then it is kept).
    second: Loss | None
    kept_first: bool  # the repeat lost more, or failed: the first run was kept
    made: bool = True  # False: the budget held no more repeats for it, the first run was kept

    def text(self) -> str:
        """For the run's line: "repeated: server CPUs lost 18% to steal"."""
        if not self.made:
            return f"not repeated, the budget holding no more repeats for it: {self.first.text()}"
        said = f"repeated: {self.first.text()}"
        if not self.kept_first:
            return said
        if self.second is None:
            return said + "; the repeat failed, the first kept"
        return said + f"; the repeat lost more ({self.second.text()}), the first kept"

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.round_index,
            "first": self.first.to_json(),
            "repeat": self.second.to_json() if self.second else None,
            "kept": "first" if self.kept_first else "repeat",
            "made": self.made,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Repeat:
        second = data.get("repeat")
        return cls(
            int(data.get("round") or 0),
            Loss.from_json(data.get("first") or {}),
            Loss.from_json(second) if isinstance(second, Mapping) else None,
            data.get("kept") == "first",
            bool(data.get("made", True)),
        )


class RunAllowance:
    """How many runs beyond the planned rounds a budget has time left for. A repeat of a lossy
    run takes one (past the last, a lossy run is kept as it is); a verdict's more rounds take
    all of theirs or none, as a look with only some of its rounds would pair nothing new. With
    `servers`, only their configs' runs are repeated: compare's finalists, whose runs decide
    its answer and its files (the other servers' defaults are in the final for the table)."""

    def __init__(self, runs: int, servers: Collection[str] | None = None) -> None:
        self.left = max(0, runs)
        self.servers = frozenset(servers) if servers is not None else None

    def for_runs_of(self, server: str) -> RunAllowance:
        """What `server`'s runs may draw on: this allowance, or none."""
        return self if self.servers is None or server in self.servers else _NOTHING

    def take(self) -> bool:
        return self.take_all(1)

    def take_all(self, runs: int) -> bool:
        if runs > self.left:
            return False
        self.left -= runs
        return True


_NOTHING = RunAllowance(0)


def lossy_loss(run: Measurement) -> Loss | None:
    """What the run lost when that is too much to keep it unrepeated; None otherwise."""
    loss = worst_loss(run)
    return loss if loss is not None and loss.lossy else None


def cleaner(
    first: Measurement, loss: Loss, second: Measurement | None, round_index: int
) -> tuple[Measurement, Repeat]:
    """The run to keep of `first` (which lost `loss`) and its repeat (None: it failed), and
    the record of the repeat. The repeat is kept unless it lost as much or more."""
    again = worst_loss(second) if second is not None else None
    if second is None or (again is not None and again.severity >= loss.severity):
        return first, Repeat(round_index, loss, again, kept_first=True)
    return second, Repeat(round_index, loss, again, kept_first=False)


def measured_cleanly(
    attempt: Callable[[], Measurement | None],
    round_index: int,
    allowance: RunAllowance | None = None,
) -> tuple[Measurement | None, Repeat | None]:
    """One run by `attempt` (None: it failed); when its CPUs lost too much, a second at once,
    and the cleaner kept, with the record of the repeat (without one left in `allowance`, the
    first kept, and the record says it was not made)."""
    run = attempt()
    if run is None or (loss := lossy_loss(run)) is None:
        return run, None
    if allowance is not None and not allowance.take():
        return run, Repeat(round_index, loss, None, kept_first=True, made=False)
    return cleaner(run, loss, attempt(), round_index)


def repeats_text(label: str, runs: int, repeats: Sequence[Repeat]) -> str:
    """For the study's noise line: "server CPUs lost 18% to steal in 2 of 5 runs of trial 7
    (repeated, the cleaner run kept)", each cause's most over the repeated runs; "" when none
    was."""
    unmade = [repeat for repeat in repeats if not repeat.made]
    made = [repeat for repeat in repeats if repeat.made]
    left = (
        f"{len(unmade)} lossy run(s) of {label} not repeated: the budget held no more repeats "
        "for it"
        if unmade
        else ""
    )
    if not made:
        return left
    said = []
    for where in ("server", "load"):
        losses = [repeat.first for repeat in made if repeat.first.where == where]
        if not losses:
            continue
        most = causes_text(max(x.stolen for x in losses), max(x.other for x in losses))
        up_to = "up to " if len(losses) > 1 else ""
        said.append(f"{where} CPUs lost {up_to}{most or 'too much'}")
    kept_first = sum(repeat.kept_first for repeat in made)
    kept = "the cleaner run kept" + (
        f"; in {kept_first} the first, its repeat losing as much or more, or failing"
        if kept_first
        else ""
    )
    said_made = f"{', '.join(said)} in {len(made)} of {runs} runs of {label} (repeated, {kept})"
    return f"{said_made}; {left}" if left else said_made
