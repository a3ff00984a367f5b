"""RequestedToCapacityRatio: a NodeResourcesFit scoring strategy shaped by a piecewise-linear curve.

The argument `shape` lists points (utilization 0..100 -> score 0..10); a resource's
score is the curve at requested x 100 / allocatable, scaled to 0..100; the node's score
is the weighted mean (kube-scheduler's noderesources/requested_to_capacity_ratio.go).
"""

from __future__ import annotations

from typing import Callable

MAX = 100
MAX_CUSTOM_SCORE = 10


def curve(shape: list[dict]) -> Callable[[int], int]:
    """The piecewise-linear function through the shape's points, flat beyond them."""
    points = sorted((int(p.get("utilization", 0)), int(p.get("score", 0)) * MAX // MAX_CUSTOM_SCORE)
                    for p in shape)
    if not points:
        points = [(0, 0), (100, MAX)]

    def f(utilization: int) -> int:
        if utilization <= points[0][0]:
            return points[0][1]
        for (x0, y0), (x1, y1) in zip(points, points[1:]):
            if utilization <= x1:
                return y0 + (y1 - y0) * (utilization - x0) // (x1 - x0) if x1 != x0 else y1
        return points[-1][1]

    return f


def requested_to_capacity_ratio(shape: list[dict]) -> Callable[[list[int], list[int], list[int]], int]:
    f = curve(shape)

    def score(requested: list[int], allocatable: list[int], weights: list[int]) -> int:
        total = weight_sum = 0
        for req, cap, weight in zip(requested, allocatable, weights):
            if cap == 0:
                continue
            total += f(min(req, cap) * 100 // cap) * weight
            weight_sum += weight
        return round(total / weight_sum) if weight_sum else 0

    return score


__all__ = ["curve", "requested_to_capacity_ratio"]
