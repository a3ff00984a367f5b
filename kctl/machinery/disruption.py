"""What a PodDisruptionBudget means, shared by the disruption controller and the Eviction subresource.

Kubernetes keeps these in pkg/apis/policy and pkg/util/pod: which pods a budget selects
(`selects`: policy/v1's selector, a nil one selecting nothing and `{}` everything in the
budget's namespace), what counts as healthy (`pod_ready`: the Ready condition is True),
the DisruptionAllowed condition (`set_disruption_allowed`, pdbhelper's
UpdateDisruptionAllowedCondition with apimachinery's SetStatusCondition) and an
intstr's scaled value (`scaled_value`, GetScaledValueFromIntOrPercent). Called by
kctl.controllers.disruption and kctl.apiserver.eviction; pure functions over dicts.
"""

from __future__ import annotations

import math
import re

#: how long an eviction's entry in status.disruptedPods holds before the controller forgets it (seconds)
DELETION_TIMEOUT = 120.0
#: the condition the disruption controller and the eviction subresource keep up to date
CONDITION = "DisruptionAllowed"
SUFFICIENT_PODS, INSUFFICIENT_PODS, SYNC_FAILED = "SufficientPods", "InsufficientPods", "SyncFailed"

_PERCENT = re.compile(r"^(\d+)%$")


def pod_ready(pod: dict) -> bool:
    """podutil.IsPodReady: the pod's Ready condition is True."""
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def selects(pdb: dict, pod: dict) -> bool:
    """Does the budget cover the pod: same namespace and its selector matches (an invalid selector matches none)."""
    from kctl.machinery.errors import APIError
    from kctl.machinery.selectors import from_label_selector_object

    if (pdb.get("metadata") or {}).get("namespace") != (pod.get("metadata") or {}).get("namespace"):
        return False
    try:
        selector = from_label_selector_object((pdb.get("spec") or {}).get("selector"))
    except APIError:
        return False
    return selector.matches((pod.get("metadata") or {}).get("labels") or {})


def scaled_value(value: object, total: int, *, round_up: bool = True) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an int as is, `N%` of total (rounded up); ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"invalid value for IntOrString: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        found = _PERCENT.match(value)
        if found:
            scaled = int(found.group(1)) * total / 100
            return math.ceil(scaled) if round_up else math.floor(scaled)
        raise ValueError('invalid value for IntOrString: invalid type: string is not a percentage')
    raise ValueError(f"invalid value for IntOrString: {value!r}")


def set_condition(status: dict, *, condition_status: str, reason: str, message: str, now: str) -> None:
    """apimachinery's SetStatusCondition for DisruptionAllowed: lastTransitionTime moves only when status does."""
    conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    old = next((c for c in conditions if c.get("type") == CONDITION), None)
    new = {"type": CONDITION, "status": condition_status, "reason": reason, "message": message,
           "observedGeneration": status.get("observedGeneration", 0),
           "lastTransitionTime": old.get("lastTransitionTime", now)
           if old is not None and old.get("status") == condition_status else now}
    status["conditions"] = [new if c is old else c for c in conditions] if old is not None else [*conditions, new]


def set_disruption_allowed(status: dict, *, now: str) -> None:
    """pdbhelper.UpdateDisruptionAllowedCondition: True/SufficientPods when disruptions are allowed, else
    False/InsufficientPods."""
    if int(status.get("disruptionsAllowed") or 0) > 0:
        set_condition(status, condition_status="True", reason=SUFFICIENT_PODS, message="", now=now)
    else:
        set_condition(status, condition_status="False", reason=INSUFFICIENT_PODS, message="", now=now)


def conditions_up_to_date(status: dict) -> bool:
    """pdbhelper.ConditionsAreUpToDate: the condition exists, agrees with disruptionsAllowed and the generation."""
    cond = next((c for c in status.get("conditions") or () if isinstance(c, dict) and c.get("type") == CONDITION),
                None)
    if cond is None or cond.get("observedGeneration", 0) != status.get("observedGeneration", 0):
        return False
    allowed = int(status.get("disruptionsAllowed") or 0) > 0
    return (cond.get("status"), cond.get("reason")) == (("True", SUFFICIENT_PODS) if allowed
                                                        else ("False", INSUFFICIENT_PODS))


__all__ = ["CONDITION", "DELETION_TIMEOUT", "INSUFFICIENT_PODS", "SUFFICIENT_PODS", "SYNC_FAILED",
           "conditions_up_to_date", "pod_ready", "scaled_value", "selects", "set_condition",
           "set_disruption_allowed"]
