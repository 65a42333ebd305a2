"""What a run's CPUs gave: the shares of their time lost to steal and to other processes.

Measured by `tuner.metrics.cores.CoresClock`; kept in the measurement and its JSON.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# A loss a trial's line names: a twentieth of a CPU set's time.
NOTABLE = 0.05


@dataclass(frozen=True)
class CoreShare:
    """What one set of CPUs did over a run, as shares of its time (0..1)."""

    cpus: int  # how many CPUs the set has
    stolen: float
    other: float
    # The server's set only: the share of the run the server's busy threads sat runnable
    # waiting for a CPU (tuner.metrics.runqueue); None where not read (the load's set, a kernel
    # without schedstat, a measurement stored before it was kept).
    waited: float | None = None
    # The share of the set's time with nothing to run (idle and iowait); None where not kept
    # (a measurement stored before it was).
    idle: float | None = None

    def describe(self) -> str:
        text = f"{self.stolen:.0%} stolen, {self.other:.0%} other processes"
        return text + (f", the server waited {self.waited:.0%}" if self.waited is not None else "")

    def to_json(self) -> dict[str, float]:
        data = {"cpus": self.cpus, "stolen": round(self.stolen, 4), "other": round(self.other, 4)}
        if self.waited is not None:
            data["waited"] = round(self.waited, 4)
        if self.idle is not None:
            data["idle"] = round(self.idle, 4)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CoreShare:
        waited, idle = data.get("waited"), data.get("idle")
        return cls(
            int(data.get("cpus") or 0),
            float(data.get("stolen") or 0.0),
            float(data.get("other") or 0.0),
            float(waited) if isinstance(waited, int | float) else None,
            float(idle) if isinstance(idle, int | float) else None,
        )


@dataclass(frozen=True)
class CoresGot:
    """The server's CPUs and the load's CPUs over one run. `load` is None when the two sets
    overlap (then the server's set holds everything)."""

    server: CoreShare
    load: CoreShare | None

    def notable(self) -> str | None:
        """The losses a reader of a trial's line should see (`NOTABLE` or more of a set's
        time), e.g. "server CPUs lost 18% to steal"; None when every one is smaller."""
        said = []
        for where, share in (("server", self.server), ("load", self.load)):
            if share is not None and (causes := causes_text(share.stolen, share.other)):
                said.append(f"{where} CPUs lost {causes}")
        return ", ".join(said) or None

    def describe(self) -> str:
        text = f"server CPUs {self.server.describe()}"
        return text + (f"; load CPUs {self.load.describe()}" if self.load else "")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"server": self.server.to_json()}
        if self.load is not None:
            data["load"] = self.load.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CoresGot:
        load = data.get("load")
        return cls(
            CoreShare.from_json(data.get("server") or {}),
            CoreShare.from_json(load) if isinstance(load, Mapping) else None,
        )


def causes_text(stolen: float, other: float) -> str:
    """The causes of a set's loss of `NOTABLE` or more: "18% to steal and 6% to other
    processes"; "" when neither is."""
    causes = [
        f"{value:.0%} to {cause}"
        for cause, value in (("steal", stolen), ("other processes", other))
        if value >= NOTABLE
    ]
    return " and ".join(causes)


def losses_text(runs: Sequence[CoresGot]) -> list[str]:
    """What the runs' CPUs lost, for a study's noise line: per cause, per CPU set, the median
    share over the runs and the most ("steal in those runs: server CPUs 1% (up to 5%), load
    CPUs 3% (up to 24%)"). A cause that took under half a percent in every run is left out."""
    causes = []
    for cause, field in (("steal", "stolen"), ("other processes", "other")):
        sets = []
        for where in ("server", "load"):
            found = [getattr(got, where) for got in runs]
            shares = [getattr(share, field) for share in found if share is not None]
            if shares and max(shares) >= _NOTHING:
                middle = statistics.median(shares)
                sets.append(f"{where} CPUs {middle:.0%} (up to {max(shares):.0%})")
        if sets:
            causes.append(f"{cause} in those runs: {', '.join(sets)}")
    return causes


# Below this share in every run, a cause is not worth a word.
_NOTHING = 0.005
