"""What a Pod's status says, as Kubernetes' pod utilities read it (pkg/api/v1/pod, podutils).

Pure functions over Pod objects, shared by every reconciler that counts pods: the
ReplicaSet, Deployment and DaemonSet controllers (ready and available replicas), the
EndpointSlice and Endpoints controllers (which pods back a Service), node lifecycle.
"""

from __future__ import annotations

import datetime as dt

from kctl.machinery.times import parse_time


def ready_condition(pod: dict) -> dict | None:
    """GetPodReadyCondition: the pod's Ready condition, or None."""
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond
    return None


def pod_ready(pod: dict) -> bool:
    """IsPodReady: the Ready condition is True."""
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def pod_ready_since(pod: dict) -> dt.datetime | None:
    """When a ready pod became Ready (the condition's lastTransitionTime); None if not ready."""
    if not pod_ready(pod):
        return None
    return parse_time((ready_condition(pod) or {}).get("lastTransitionTime"))


def pod_available(pod: dict, min_ready_seconds: int, now: dt.datetime) -> bool:
    """IsPodAvailable: Ready, and Ready for more than minReadySeconds."""
    if not pod_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = pod_ready_since(pod)
    return since is not None and since + dt.timedelta(seconds=min_ready_seconds) < now


def pod_terminating(pod: dict) -> bool:
    """The pod is being deleted (it has a deletionTimestamp)."""
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def pod_active(pod: dict) -> bool:
    """IsPodActive: not Succeeded or Failed, and not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod_terminating(pod)
