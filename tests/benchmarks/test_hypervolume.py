"""The hypervolume of a front of (PSS, p99), its reference point and the non-dominated
filter, on fronts whose areas are worked out by hand."""

from __future__ import annotations

import pytest

from benchmarks.hypervolume import hypervolume, non_dominated, reference_point


def test_one_point_dominates_the_rectangle_up_to_the_reference() -> None:
    assert hypervolume([(2.0, 3.0)], (10.0, 10.0)) == pytest.approx(8.0 * 7.0)


def test_a_staircase_counts_each_step_once() -> None:
    # (1, 8), (4, 4), (6, 1) up to (10, 10): 3 x 2, 2 x 6, 4 x 9 (swept along PSS).
    front = [(6.0, 1.0), (1.0, 8.0), (4.0, 4.0)]
    assert hypervolume(front, (10.0, 10.0)) == pytest.approx(6 + 12 + 36)


def test_dominated_and_outside_points_add_nothing() -> None:
    front = [(1.0, 8.0), (4.0, 4.0), (6.0, 1.0)]
    more = front + [(5.0, 5.0), (4.0, 4.0), (12.0, 0.5), (0.5, 11.0)]
    assert hypervolume(more, (10.0, 10.0)) == pytest.approx(hypervolume(front, (10.0, 10.0)))
    assert hypervolume([], (10.0, 10.0)) == 0.0


def test_a_front_short_of_another_has_the_smaller_share_of_the_same_reference() -> None:
    grid = [(1.0, 8.0), (4.0, 4.0), (6.0, 1.0)]
    tuner = [(1.0, 8.0), (6.0, 1.0)]  # the middle point missed: from PSS 4 to 6, 8 - 4 less
    reference = reference_point(grid, tuner, margin=10 / 6)
    assert reference == pytest.approx((10.0, 8 * 10 / 6))
    assert hypervolume(tuner, reference) < hypervolume(grid, reference)
    assert hypervolume(grid, reference) - hypervolume(tuner, reference) == pytest.approx(2 * 4)


def test_the_reference_is_the_worst_of_each_figure_times_the_margin() -> None:
    assert reference_point([(100.0, 5.0)], [(50.0, 20.0)]) == pytest.approx((110.0, 22.0))
    with pytest.raises(ValueError):
        reference_point([], [])


def test_non_dominated_keeps_the_front_and_equal_points() -> None:
    points = [(4.0, 4.0), (5.0, 5.0), (1.0, 8.0), (4.0, 4.0), (4.0, 9.0), (6.0, 1.0)]
    assert non_dominated(points) == [0, 2, 3, 5]
