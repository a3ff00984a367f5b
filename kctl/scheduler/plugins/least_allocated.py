"""LeastAllocated: NodeResourcesFit's default scoring strategy, favouring the emptiest nodes.

score = sum_r weight_r * (allocatable_r - requested_r) * 100 / allocatable_r / sum(weights),
where requested_r counts what is placed plus this pod, in the non-zero form for cpu and
memory (a container without requests counts 100m / 200Mi), as kube's
noderesources/least_allocated.go. Used by NodeResourcesFit (node_resources_fit.py).
"""

from __future__ import annotations

from kctl.scheduler.framework import MAX_NODE_SCORE
from kctl.scheduler.nodeinfo import CPU, MEMORY, NodeInfo, PodInfo

#: the strategy's resources and weights when the config names none
DEFAULT_RESOURCES: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))


def requested_and_allocatable(pod: PodInfo, node: NodeInfo, resource: str) -> tuple[int, int]:
    """What `resource` on the node would be requested with the pod there, and its allocatable."""
    if resource == CPU:
        return node.non_zero_requested.milli_cpu + pod.non_zero_requests.milli_cpu, node.allocatable.milli_cpu
    if resource == MEMORY:
        return node.non_zero_requested.memory + pod.non_zero_requests.memory, node.allocatable.memory
    return node.requested.get(resource) + pod.requests.get(resource), node.allocatable.get(resource)


def least_allocated_scores(pod: PodInfo, nodes: list[NodeInfo],
                           resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES) -> list[int]:
    """Each node's LeastAllocated score (0..100)."""
    if resources == DEFAULT_RESOURCES:  # the common case, written out for speed
        pc, pm = pod.non_zero_requests.milli_cpu, pod.non_zero_requests.memory
        out = []
        for n in nodes:
            ac, am = n.allocatable.milli_cpu, n.allocatable.memory
            rc, rm = n.non_zero_requested.milli_cpu + pc, n.non_zero_requested.memory + pm
            sc = (ac - rc) * MAX_NODE_SCORE // ac if ac and rc <= ac else 0
            sm = (am - rm) * MAX_NODE_SCORE // am if am and rm <= am else 0
            out.append((sc + sm) // 2)
        return out
    total_weight = sum(w for _, w in resources) or 1
    out = []
    for n in nodes:
        s = 0
        for name, weight in resources:
            requested, allocatable = requested_and_allocatable(pod, n, name)
            if allocatable and requested <= allocatable:
                s += (allocatable - requested) * MAX_NODE_SCORE // allocatable * weight
        out.append(s // total_weight)
    return out
