"""TaintToleration: a pod goes only where it tolerates every NoSchedule/NoExecute taint,
and prefers nodes with fewer PreferNoSchedule taints it does not tolerate.

Filter rejects with "node(s) had untolerated taint {key: value}" (kube's wording; the
node is then UnschedulableAndUnresolvable, preemption cannot help). Score counts the
untolerated PreferNoSchedule taints and normalizes reversed (fewest = 100). PreFilter and
PreScore answer Skip when no node in the snapshot has such taints, so plain clusters pay
nothing. `tolerates` is kctl.client.tolerations'. Built by plugins.registry.
"""

from __future__ import annotations

from kctl.client.tolerations import tolerates
from kctl.scheduler.framework import (MAX_NODE_SCORE, SKIP, ClusterEvent, CycleState, Handle, PreFilterResult,
                                      Status, unschedulable)
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo, Snapshot

FILTER_EFFECTS = ("NoSchedule", "NoExecute")


def untolerated(tolerations: list[dict], taints: tuple[dict, ...], effects: tuple[str, ...]) -> dict | None:
    """The first taint with one of `effects` that no toleration tolerates."""
    for taint in taints:
        if taint.get("effect") in effects and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


class TaintToleration:
    """Filter on NoSchedule/NoExecute taints; Score on PreferNoSchedule ones."""

    NAME = "TaintToleration"
    EVENTS = frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_TAINT_CHANGE})

    def __init__(self, args: dict | None = None, handle: Handle | None = None) -> None:
        self.handle = handle

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        return None, (SKIP if not snapshot.tainted_nodes else None)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not node.taints:
            return None
        taint = untolerated(pod.tolerations, node.taints, FILTER_EFFECTS)
        if taint is None:
            return None
        return unschedulable(f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}",
                             unresolvable=True)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        if self.handle is not None and not self.handle.snapshot.prefer_no_schedule_nodes:
            return SKIP  # the snapshot's count: no node at all has such a taint (no scan per pod)
        if not any(t.get("effect") == "PreferNoSchedule" for n in nodes for t in n.taints):
            return SKIP
        state.write("TaintToleration/prefer", [t for t in pod.tolerations
                                               if (t.get("effect") or "PreferNoSchedule") == "PreferNoSchedule"])
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        tolerations = state.read("TaintToleration/prefer") or []
        return sum(1 for taint in node.taints if taint.get("effect") == "PreferNoSchedule"
                   and not any(tolerates(t, taint) for t in tolerations))

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """Fewest untolerated taints -> 100 (kube's DefaultNormalizeScore, reversed)."""
        top = max(scores, default=0)
        for i, s in enumerate(scores):
            scores[i] = MAX_NODE_SCORE if top == 0 else MAX_NODE_SCORE - s * MAX_NODE_SCORE // top
