"""Why streams or a probe beside the load decided the pick, for the written file's header.

A config that cut streams or would have been restarted by its probes cannot win, in a search
trial or in a confirmation round. Where every such config shares a setting value the pick does
not have, that value is what the lanes ruled out, and the header says so ("timeout = 30: with
streams, timeout = 1 cut 4 of 9 streams (4 closed early) in 2 configs"); otherwise it names
them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.metrics.lanes import causes_text
from tuner.metrics.measurement import Measurement
from tuner.search.records import TrialRecord
from tuner.workflow.confirm import Confirmed

# Configs named one by one when no shared setting explains them.
_NAMED = 3


@dataclass(frozen=True)
class _Runs:
    """One config's runs: a search trial's one, or a confirmed candidate's rounds."""

    label: str
    settings: Mapping[str, Any]
    runs: tuple[Measurement, ...]


def lane_decisions(
    records: Sequence[TrialRecord], confirmed: Sequence[Confirmed], pick: Mapping[str, Any]
) -> list[str]:
    """Header lines on what the lanes ruled out; empty when they ruled out nothing."""
    # A trial confirmed again is one config: its search run and its rounds together.
    runs: dict[str, _Runs] = {}
    for label, settings, measured in [
        *((f"trial {r.number}", r.settings, (r.measurement,)) for r in records if r.measurement),
        *((c.candidate.label, c.candidate.settings, tuple(c.runs)) for c in confirmed),
    ]:
        before = runs.get(label)
        runs[label] = _Runs(label, settings, (before.runs if before else ()) + measured)
    configs = list(runs.values())
    cut = [c for c in configs if any(_cut(run) for run in c.runs)]
    restarted = [c for c in configs if any(_restarted(run) for run in c.runs)]
    lines = []
    if cut:
        streams = [run.streams for c in cut for run in c.runs if run.streams is not None]
        what = (
            f"cut {sum(s.cut for s in streams)} of {sum(s.ended for s in streams)} streams "
            f"({causes_text(streams)})"
        )
        lines.append(_line("with streams", what, cut, pick))
    if restarted:
        lines.append(_line("with a health probe", "would have been restarted", restarted, pick))
    return lines


def _cut(measurement: Measurement) -> bool:
    return measurement.streams is not None and measurement.streams.cut > 0


def _restarted(measurement: Measurement) -> bool:
    return measurement.probe is not None and measurement.probe.restart


def _line(lane: str, what: str, ruled_out: Sequence[_Runs], pick: Mapping[str, Any]) -> str:
    shared = _shared_difference(ruled_out, pick)
    count = f"{len(ruled_out)} config{'s' if len(ruled_out) != 1 else ''}"
    if shared:
        mine = ", ".join(f"{name} = {pick.get(name)}" for name in shared)
        theirs = ", ".join(f"{name} = {ruled_out[0].settings[name]}" for name in shared)
        return f"{mine}: {lane}, {theirs} {what} in {count}"
    named = ", ".join(c.label for c in ruled_out[:_NAMED])
    more = f" and {len(ruled_out) - _NAMED} more" if len(ruled_out) > _NAMED else ""
    return f"{lane}, {count} {what} and could not win ({named}{more})"


def _shared_difference(configs: Sequence[_Runs], pick: Mapping[str, Any]) -> list[str]:
    """The settings every config holds at one value that the pick does not hold."""
    first = configs[0].settings
    return [
        name
        for name, value in first.items()
        if all(c.settings.get(name) == value for c in configs) and pick.get(name) != value
    ]
