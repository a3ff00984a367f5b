"""NodeUnschedulable: no new pods on a cordoned node (spec.unschedulable), unless the pod
tolerates the node.kubernetes.io/unschedulable:NoSchedule taint.

PreFilter answers Skip when no node in the snapshot is cordoned. Built by plugins.registry.
"""

from __future__ import annotations

from kctl.client.tolerations import tolerates
from kctl.scheduler.framework import SKIP, ClusterEvent, CycleState, Handle, PreFilterResult, Status, unschedulable
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo, Snapshot

REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


class NodeUnschedulable:
    """Filter: reject cordoned nodes."""

    NAME = "NodeUnschedulable"
    EVENTS = frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_TAINT_CHANGE})

    def __init__(self, args: dict | None = None, handle: Handle | None = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        return None, (SKIP if not snapshot.unschedulable_nodes else None)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not node.unschedulable or any(tolerates(t, UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return None
        return unschedulable(REASON, unresolvable=True)
