"""NodePorts: a pod's hostPorts must be free on the node (same port and protocol, and the
same or a wildcard host IP, conflict).

PreFilter answers Skip for pods without hostPorts (most pods). Built by plugins.registry.
"""

from __future__ import annotations

from kctl.scheduler.framework import SKIP, ClusterEvent, CycleState, Handle, PreFilterResult, Status, unschedulable
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo, Snapshot

REASON = "node(s) didn't have free ports for the requested pod ports"


class NodePorts:
    """Filter: no host port conflict with the pods already on the node."""

    NAME = "NodePorts"
    EVENTS = frozenset({ClusterEvent.NODE_ADD, ClusterEvent.ASSIGNED_POD_DELETE})

    def __init__(self, args: dict | None = None, handle: Handle | None = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        return None, (SKIP if not pod.host_ports else None)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        used = node.used_ports
        if used and any(want.conflicts(have) for want in pod.host_ports for have in used):
            return unschedulable(REASON)
        return None
