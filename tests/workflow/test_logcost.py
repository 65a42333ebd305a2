"""What the per-request log cost, from the pairs of configs that differ in it alone: pure logic."""

from __future__ import annotations

from typing import Any

from tests.support.measurements import measurement
from tuner.workflow.confirm import Candidate, Confirmed
from tuner.workflow.logcost import logging_costs

QUIET = {"accesslog": False}
DEFAULTS = {"workers": 1, "accesslog": True}


def resolve(settings: dict[str, Any]) -> dict[str, Any]:
    return {**DEFAULTS, **settings}


def entry(label: str, rps: list[float], **settings: Any) -> Confirmed:
    return Confirmed(Candidate(label, None, settings), [measurement(r) for r in rps])


def test_a_pair_that_differs_in_the_log_alone_says_what_the_log_cost() -> None:
    default = entry("default", [1000, 1300, 900, 1100, 1200])
    quiet = entry("default, logging off", [1310, 1700, 1200, 1420, 1600], accesslog=False)
    other = entry("trial 3", [1500, 1500, 1500, 1500, 1500], workers=2, accesslog=False)
    lines = logging_costs([default, quiet, other], QUIET, resolve)
    assert lines == [
        "per-request log (accesslog) off, default, logging off against default: x1.31 req/s "
        "on the median round (x1.29-x1.33), better in 5 of 5 interleaved rounds: faster beyond "
        "the noise"
    ]


def test_a_log_that_cost_nothing_measurable_is_said_so_and_no_pair_says_nothing() -> None:
    default = entry("default", [1000, 1300, 900, 1100, 1200])
    quiet = entry("default, logging off", [1010, 1290, 905, 1090, 1210], accesslog=False)
    (line,) = logging_costs([default, quiet], QUIET, resolve)
    assert "better in 3 of 5 interleaved rounds: no difference beyond the noise" in line
    assert logging_costs([default], QUIET, resolve) == []
    assert logging_costs([default, quiet], {}, resolve) == []
