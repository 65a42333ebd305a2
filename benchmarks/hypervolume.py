"""The hypervolume of a front of two figures to minimise (PSS, p99): the area of the plane it
dominates up to a reference point. One front's area over another's, against the same
reference, says how much of the other's trade-off it reaches (1.0: all of it). Pure logic."""

from __future__ import annotations

from collections.abc import Sequence

Point = tuple[float, float]  # (PSS MB, p99 ms): lower is better on both
MARGIN = 1.1  # the reference: the worst of each figure over the fronts compared, x1.1


def hypervolume(points: Sequence[Point], reference: Point) -> float:
    """The area of the points dominated by any of `points` and bounded by `reference`; points
    not better than `reference` on both figures add nothing. Dominated points may be given:
    they add nothing either."""
    ref_x, ref_y = reference
    inside = sorted((x, y) for x, y in points if x < ref_x and y < ref_y)
    if not inside:
        return 0.0
    area, lowest = 0.0, ref_y
    # Swept along the first figure: between one point and the next, the area is as high as
    # the lowest second figure of the points so far.
    nexts = [x for x, _ in inside[1:]] + [ref_x]
    for (x, y), next_x in zip(inside, nexts, strict=True):
        lowest = min(lowest, y)
        area += (next_x - x) * (ref_y - lowest)
    return area


def reference_point(*fronts: Sequence[Point], margin: float = MARGIN) -> Point:
    """The worst of each figure over every point of `fronts`, times `margin`: a front's
    extreme points then add area too (at the worst figure itself they would add none)."""
    every = [point for front in fronts for point in front]
    if not every:
        raise ValueError("reference_point needs at least one point")
    return (max(x for x, _ in every) * margin, max(y for _, y in every) * margin)


def non_dominated(points: Sequence[Point]) -> list[int]:
    """Indexes of the points no other point dominates (as good on both figures, better on
    one), in their order; equal points are all kept."""
    return [
        i
        for i, (x, y) in enumerate(points)
        if not any(a <= x and b <= y and (a < x or b < y) for a, b in points)
    ]
