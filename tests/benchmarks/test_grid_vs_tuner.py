"""benchmarks/grid_vs_tuner.py without a server: the pick against the grid's winner round by
round, the figure that says whether a ratio of medians under the target is a measured loss."""

from __future__ import annotations

from benchmarks.grid_vs_tuner import _in_rounds, _in_rounds_text, in_space
from tests.support.measurements import measurement
from tuner.search.space import default_space_path, load_space
from tuner.servers import get_adapter
from tuner.workflow.confirm import Candidate, Confirmed


def remeasured(label: str, rps: list[float]) -> Confirmed:
    return Confirmed(Candidate(label, None, {}), [measurement(value) for value in rps])


def test_a_pick_lower_on_medians_inside_the_rounds_noise_is_no_difference() -> None:
    grid = remeasured("grid", [1500, 1650, 1440, 1688, 1622])
    tuner = remeasured("tuner", [1231, 1723, 1444, 1500, 1700])
    found = _in_rounds(tuner, grid)
    assert found is not None
    assert (found["wins"], found["rounds"], found["verdict"]) == (3, 5, "tie")
    assert _in_rounds_text(found) == (
        "x0.82-x1.05 within rounds, better in 3 of 5; by the pairs at 5%: no difference"
    )


def test_a_pick_below_the_grid_in_every_round_is_worse_beyond_the_noise() -> None:
    grid = remeasured("grid", [1500, 1650, 1440, 1688, 1622])
    tuner = remeasured("tuner", [1400, 1500, 1300, 1600, 1500])
    found = _in_rounds(tuner, grid)
    assert found is not None and found["verdict"] == "worse" and found["wins"] == 0
    assert _in_rounds_text(found).endswith("by the pairs at 5%: worse beyond the noise")


def test_a_grid_point_is_inside_the_space_unless_a_searched_setting_is_past_it() -> None:
    """A setting at the server's default is inside (the tuner measures its picks with their
    other settings at the defaults): gunicorn's keepalive 2 is no choice of the space, yet a
    grid point that keeps it is one the tuner can write. 11 workers on one CPU are not."""
    adapter = get_adapter("gunicorn")
    space = load_space(default_space_path("gunicorn"), adapter.table, "gunicorn")
    defaults = adapter.table.defaults()
    point = adapter.resolve({"workers": 1, "worker_class": "gthread", "threads": 8})
    assert point["keepalive"] == 2
    assert in_space(space, point, 1, defaults)
    assert not in_space(space, {**point, "workers": 11}, 1, defaults)
    assert not in_space(space, {**point, "keepalive": 7}, 1, defaults)
