"""What a study remembers of each trial, as plain data (no Optuna types past the study layer)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from tuner.metrics.measurement import Measurement
from tuner.search.objectives import Figures
from tuner.servers.base import BASELINE_DEFAULT
from tuner.servers.base import BASELINE_FORK_RULE as BASELINE_RULE

__all__ = ["BASELINE_DEFAULT", "BASELINE_RULE", "TrialRecord", "TrialStatus"]


class TrialStatus(str, Enum):
    """Where a trial stands, by the names Optuna stores (a str, so `state == "COMPLETE"` and
    `state.lower()` read as they did when the state was the bare name)."""

    WAITING = "WAITING"  # queued (a baseline, a start), not run yet
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    PRUNED = "PRUNED"
    FAIL = "FAIL"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class TrialRecord:
    number: int
    state: TrialStatus  # a name is accepted too ("COMPLETE"), and read as its status
    settings: dict[str, Any]
    measurement: Measurement | None = None  # None: the trial failed before it was measured
    context: dict[str, Any] = field(default_factory=dict)  # server, versions, machine, CPUs
    values: tuple[float, ...] = ()
    baseline: str = ""  # a Baseline.label ("default", "2*cpus+1"), "" for a searched config
    fail_reason: str = ""
    feasible: bool = True
    covers_for: int | None = None  # queued with a thread per connection after that trial starved
    duplicate_of: int | None = None  # the same config as that trial: its result, not measured
    branch_start: bool = False  # queued at the start to measure one concurrency model
    carried: int | None = None  # a start at this concurrency, learnt from servers raced before
    shape_of: int | None = None  # queued as a neighbour of that trial's shape (search.shapes)

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", TrialStatus(self.state))

    @property
    def origin(self) -> str:
        """Why this config was measured, when not by the sampler's choice."""
        if self.baseline:
            return self.baseline
        if self.covers_for is not None:
            return f"a thread per connection, after trial {self.covers_for}"
        if self.duplicate_of is not None:
            return f"same config as trial {self.duplicate_of}, not measured again"
        if self.branch_start and self.carried is not None:
            return f"a start at {self.carried} requests at once, carried over from the race"
        if self.branch_start:
            return "a start in its concurrency model"
        if self.shape_of is not None:
            return f"its model's shape, next to trial {self.shape_of}"
        return ""

    @property
    def label(self) -> str:
        return self.baseline or f"trial {self.number}"

    @property
    def why_infeasible(self) -> str:
        """A short tag for a measured trial that cannot win: "unfair" or "violates SLO"."""
        if self.feasible:
            return ""
        return "unfair" if self.fail_reason.startswith("unfair") else "violates SLO"

    @property
    def measured(self) -> bool:
        """Completed with its figures (a complete trial of a broken record has none)."""
        return self.state is TrialStatus.COMPLETE and self.measurement is not None

    @property
    def figures(self) -> Figures:
        """What the objective ranks; every figure nan (worst) when not measured."""
        if self.measurement is None:
            return Figures(math.nan, math.nan, math.nan, math.nan)
        return Figures.of(self.measurement)

    # The headline figures for display: 0.0 when not measured.
    @property
    def rps(self) -> float:
        """Median of the one-second windows."""
        return self.measurement.median_rps if self.measurement else 0.0

    @property
    def p99_ms(self) -> float:
        return self.measurement.latency.p99_ms if self.measurement else 0.0

    @property
    def pss_mb(self) -> float:
        return self.measurement.pss_mean_mb if self.measurement else 0.0
