"""One run of a config in interleaved rounds: the measure a confirmation is given."""

from __future__ import annotations

from collections.abc import Callable

from tuner.measure.runner import run_bench
from tuner.metrics.measurement import Measurement
from tuner.search.study import StudySetup
from tuner.workflow.confirm import Candidate


def measurer(setup: StudySetup) -> Callable[[Candidate, int], Measurement]:
    """A run of a candidate at `setup`'s CPUs and limits, its log under the study's
    `confirm/` folder, one per candidate and round."""

    def measure(candidate: Candidate, round_index: int) -> Measurement:
        slug = candidate.label.replace(" ", "-").replace("*", "x")
        plan = setup.plan(
            candidate.settings, setup.workdir / "confirm" / f"{slug}-round{round_index}.log"
        )
        return run_bench(plan).measurement

    return measure
