"""Whether a pod's toleration tolerates a node's taint (v1 Toleration.ToleratesTaint).

One definition for every reader of taints: the scheduler's TaintToleration and
NodeUnschedulable plugins (kctl/scheduler/plugins/), the DaemonSet controller's node
eligibility and the taint manager's NoExecute evictions (kctl/controllers/).
"""

from __future__ import annotations


def tolerates(toleration: dict, taint: dict) -> bool:
    """Whether one toleration tolerates one taint, as Kubernetes' Toleration.ToleratesTaint.

    An empty effect matches every effect, an empty key with Exists every key; the
    operator is Equal when absent. An empty key with Equal (which validation rejects)
    and an unknown operator tolerate nothing.
    """
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator != "Equal" or not key:
        return False
    return (toleration.get("value") or "") == (taint.get("value") or "")


__all__ = ["tolerates"]
