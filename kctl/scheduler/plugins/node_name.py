"""NodeName: a pod that names its node (spec.nodeName) fits only there.

Pods the scheduler sees have no nodeName (those that do are already placed), so the
PreFilter usually answers Skip and the Filter never runs; kept for kube parity and for
preemption's what-if checks. Built by kctl.scheduler.plugins.registry.
"""

from __future__ import annotations

from kctl.scheduler.framework import SKIP, ClusterEvent, CycleState, Handle, PreFilterResult, Status, unschedulable
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo, Snapshot

REASON = "node(s) didn't match the requested node name"


class NodeName:
    """Filter: node.name == pod.spec.nodeName when the pod names one."""

    NAME = "NodeName"
    EVENTS = frozenset({ClusterEvent.NODE_ADD})

    def __init__(self, args: dict | None = None, handle: Handle | None = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.node_name:
            return None, SKIP
        return PreFilterResult(frozenset({pod.node_name})), None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if pod.node_name and pod.node_name != node.name:
            return unschedulable(REASON, unresolvable=True)
        return None
