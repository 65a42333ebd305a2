"""What a study and its trials keep in Optuna's user_attrs: one typed field per stored key.

A field's name is its key in the database. Studies written by earlier versions, and
optuna-dashboard, read these keys as they are: a field is never renamed. None means "not
stored": a trial writes its attrs as it goes (its settings first, its figures once measured),
so a record read back holds what was written so far.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Protocol, TypeVar

_Attrs = TypeVar("_Attrs", bound="_Stored")


class Keeper(Protocol):
    """An Optuna Study or Trial: what user attrs are written to."""

    def set_user_attr(self, key: str, value: Any) -> None: ...


class _Stored:
    # Every subclass is a dataclass, which mypy cannot know of a class bound to a TypeVar:
    # the two `fields` calls below carry an ignore for that reason alone.
    @classmethod
    def read(cls: type[_Attrs], stored: Mapping[str, Any]) -> _Attrs:
        """The fields found in `stored` (a study's or trial's user_attrs); other keys are left."""
        return cls(**{f.name: stored.get(f.name) for f in fields(cls)})  # type: ignore[arg-type]

    def stored(self) -> dict[str, Any]:
        """The fields set, by their stored key (for `enqueue_trial(user_attrs=...)`)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]
        return {key: value for key, value in values.items() if value is not None}

    def write(self, keeper: Keeper) -> None:
        """Store the fields set; the ones left None stay as they were."""
        for key, value in self.stored().items():
            keeper.set_user_attr(key, value)


@dataclass(frozen=True)
class TrialAttrs(_Stored):
    """One trial's user attrs."""

    settings: dict[str, Any] | None = None  # as the server runs them (tuner.servers resolve)
    host: dict[str, Any] | None = None  # the tuner's host and pid (tuner.machine.hosts)
    metrics: dict[str, Any] | None = None  # Measurement.to_json(), in any stored version
    context: dict[str, Any] | None = None  # server, versions, machine, CPUs, front, clients
    constraints: list[float] | None = None  # SLO excesses, <= 0 where met
    fail_reason: str | None = None  # one line: why it failed, was pruned or cannot win
    fail_detail: str | None = None  # the end of the error message
    baseline: str | None = None  # a Baseline.label, queued as a baseline
    baseline_settings: dict[str, Any] | None = None  # a baseline the space cannot express
    covers_for: int | None = None  # queued with a thread per connection after that trial
    duplicate_of: int | None = None  # the same config as that trial: its result reused
    branch_start: bool | None = None  # queued at the start to measure one concurrency model
    # A start queued at this many requests at once, learnt from servers raced before it.
    carried: int | None = None
    # Queued in the shape phase: a neighbour of this trial's shape (tuner.search.shapes).
    shape_of: int | None = None


@dataclass(frozen=True)
class StudyAttrs(_Stored):
    """A study's user attrs."""

    setup: dict[str, Any] | None = None  # StudySetup.metadata(): a resumed study must match it
    hardware: dict[str, Any] | None = None  # the host that created it (tuner.machine.hosts)
    created: str | None = None  # ISO time, UTC
    cpu_probe_ms: list[list[float]] | None = None  # [trial number, ms] of each CPU probe
    result: dict[str, Any] | None = None  # the confirmation and verdict of the last `tune`
    # The config `tune` chose and its file's header, kept before the file is written, so that
    # `tuner emit --study` can write it again (a variant's settings are no trial's).
    pick: dict[str, Any] | None = None
    # `multi`: the rate its front is measured at and where it came from ({"rps", "source"}),
    # so that a resumed study measures at the same rate.
    offered_rate: dict[str, Any] | None = None
