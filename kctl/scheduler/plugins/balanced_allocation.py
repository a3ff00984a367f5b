"""NodeResourcesBalancedAllocation: favour nodes whose CPU and memory use stay in balance.

kube-scheduler's noderesources/balanced_allocation.go: per resource the fraction
requested / allocatable (with the pod, capped at 1); the score is (1 - standard
deviation of the fractions) x 100. Counts actual requests (not the 100m/200Mi
defaults); a pod that requests nothing is not scored by it (PreScore skips).
Argument `resources` (default cpu and memory).
"""

from __future__ import annotations

import math

from kctl.scheduler.framework import SKIP, CycleState, Handle, Status
from kctl.scheduler.nodeinfo import CPU, MEMORY, NodeInfo, PodInfo, per_usage
from kctl.scheduler.plugins.node_resources_fit import requested_and_allocatable

MAX = 100


def balanced_score(requested: list[int], allocatable: list[int]) -> int:
    fractions = [min(req / cap, 1.0) for req, cap in zip(requested, allocatable) if cap]
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    else:
        std = 0.0
    return int((1 - std) * MAX)


class NodeResourcesBalancedAllocation:
    NAME = "NodeResourcesBalancedAllocation"
    EVENTS = frozenset()  # scores only: never the reason a pod is unschedulable

    def __init__(self, args: dict | None = None, handle: Handle | None = None) -> None:
        resources = (args or {}).get("resources")
        self.resources = (tuple((str(r["name"]), int(r.get("weight", 1))) for r in resources)
                          if resources else ((CPU, 1), (MEMORY, 1)))
        self._fast = self.resources == ((CPU, 1), (MEMORY, 1))

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        return SKIP if pod.requests.is_zero() else None

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        """score() for many nodes at once (the framework prefers it), once per distinct NodeInfo.usage."""
        return per_usage(nodes, lambda n: self.score(state, pod, n), lambda ns: self._score_each(state, pod, ns),
                         state=state)

    def _score_each(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        if not self._fast:
            return [self.score(state, pod, n) for n in nodes]
        pc, pm = pod.requests.milli_cpu, pod.requests.memory
        out = []
        append = out.append
        for n in nodes:
            a, used = n.allocatable, n.requested
            cap_c, cap_m = a.milli_cpu, a.memory
            if cap_c and cap_m:
                c = (used.milli_cpu + pc) / cap_c
                m = (used.memory + pm) / cap_m
                append(int((1 - abs((c if c < 1 else 1.0) - (m if m < 1 else 1.0)) / 2) * MAX))
            else:
                append(self.score(state, pod, n))
        return out

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        if self._fast:
            a, used, p = node.allocatable, node.requested, pod.requests
            if a.milli_cpu and a.memory:
                c = (used.milli_cpu + p.milli_cpu) / a.milli_cpu
                m = (used.memory + p.memory) / a.memory
                return int((1 - abs((c if c < 1 else 1.0) - (m if m < 1 else 1.0)) / 2) * MAX)
        requested, allocatable = requested_and_allocatable(pod, node, self.resources, non_zero=False)
        return balanced_score(requested, allocatable)


__all__ = ["NodeResourcesBalancedAllocation", "balanced_score"]
