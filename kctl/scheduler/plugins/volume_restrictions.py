"""VolumeRestrictions: a ReadWriteOncePod claim is used by one pod at a time (kube-scheduler's volumerestrictions).

Built by plugins.registry. PreFilter reads the pod's claims (kctl.scheduler.volumelisters);
for those with access mode ReadWriteOncePod it counts the other pods the scheduler has
placed (or assumed) that use the same claim. None (or no such claim, or no claims at all):
Skip. Some: Filter rejects every node, "node has pod using PersistentVolumeClaim with the
same name and ReadWriteOncePod access mode" (Unschedulable, as in kube; kctl's preemption
runs no PreFilter extensions, so it finds no victim for it). The pod is tried again when a
pod is deleted or a claim changes.

A claim that does not exist is left to VolumeBinding, which says so
(`persistentvolumeclaim "x" not found`). The disk conflicts of cloud volume types (GCE PD,
EBS, RBD, iSCSI) have no kctl counterpart.
"""

from __future__ import annotations

from kctl.scheduler.framework import SKIP, ClusterEvent, CycleState, Handle, PreFilterResult, Status, unschedulable
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo, Snapshot
from kctl.scheduler.volumelisters import VolumeListers, claim_names, listers_for

RWOP_CONFLICT = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
_STATE = "VolumeRestrictions/conflicts"


def _pod_claims(pi: PodInfo) -> list[str]:
    """The pod's claim names, parsed once per PodInfo."""
    parsed = pi.parsed.get("claims")
    if parsed is None:
        parsed = pi.parsed["claims"] = claim_names(pi.pod)
    return parsed  # type: ignore[return-value]


class VolumeRestrictions:
    """PreFilter + Filter: ReadWriteOncePod (see the module docstring)."""

    NAME = "VolumeRestrictions"
    EVENTS = frozenset({ClusterEvent.ASSIGNED_POD_DELETE, ClusterEvent.PVC_ADD, ClusterEvent.PVC_UPDATE})

    def __init__(self, args: dict | None = None, handle: Handle | None = None, *,
                 listers: VolumeListers | None = None) -> None:
        self.handle = handle or Handle()
        self.listers = listers if listers is not None else listers_for(self.handle)

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        names = _pod_claims(pod)
        if not names:
            return None, SKIP
        exclusive = set()
        for name in names:
            claim = self.listers.claim(pod.namespace, name)
            if claim is not None and READ_WRITE_ONCE_POD in ((claim.get("spec") or {}).get("accessModes") or ()):
                exclusive.add(name)
        if not exclusive:
            return None, SKIP
        conflicts = 0
        for node in snapshot.node_info_list:
            for other in node.pods.values():
                if other.uid != pod.uid and other.namespace == pod.namespace and \
                        exclusive.intersection(_pod_claims(other)):
                    conflicts += 1
        if not conflicts:
            return None, SKIP
        state.write(_STATE, conflicts)
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if state.read(_STATE):
            return unschedulable(RWOP_CONFLICT)
        return None


__all__ = ["RWOP_CONFLICT", "VolumeRestrictions"]
