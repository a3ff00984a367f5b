"""MostAllocated: NodeResourcesFit's bin-packing scoring strategy, favouring the fullest nodes.

score = sum_r weight_r * requested_r * 100 / allocatable_r / sum(weights) (kube's
noderesources/most_allocated.go). Used by NodeResourcesFit when the config sets
scoringStrategy.type: MostAllocated.
"""

from __future__ import annotations

from kctl.scheduler.framework import MAX_NODE_SCORE
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo
from kctl.scheduler.plugins.least_allocated import DEFAULT_RESOURCES, requested_and_allocatable


def most_allocated_scores(pod: PodInfo, nodes: list[NodeInfo],
                          resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES) -> list[int]:
    """Each node's MostAllocated score (0..100)."""
    total_weight = sum(w for _, w in resources) or 1
    out = []
    for n in nodes:
        s = 0
        for name, weight in resources:
            requested, allocatable = requested_and_allocatable(pod, n, name)
            if allocatable:
                s += min(requested, allocatable) * MAX_NODE_SCORE // allocatable * weight
        out.append(s // total_weight)
    return out
