"""An HPA's status as Kubernetes' controller writes it: replicas, current metrics, lastScaleTime, conditions.

After horizontal.go's setCondition / setStatus / setCurrentReplicasAndMetricsInStatus and the
metric statuses of computeStatusForResourceMetric. Called by the HorizontalPodAutoscaler
controller (controller.py), which builds the new status on a copy of the HPA and writes it
only when it differs (updateStatusIfNeeded). Conditions: AbleToScale, ScalingActive and
ScalingLimited; a condition's lastTransitionTime changes only when its status does.
"""

from __future__ import annotations

import datetime as dt

from kctl.machinery.times import format_time

#: the condition types, in the order Kubernetes adds them
ABLE_TO_SCALE = "AbleToScale"
SCALING_ACTIVE = "ScalingActive"
SCALING_LIMITED = "ScalingLimited"

_SUFFIXES = {-3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def milli_quantity(milli: int) -> str:
    """resource.NewMilliQuantity(milli, DecimalSI).String(): 250 -> "250m", 2000 -> "2", 3000000 -> "3k"."""
    if milli == 0:
        return "0"
    sign = "-" if milli < 0 else ""
    mantissa, exponent = abs(milli), -3
    while mantissa % 1000 == 0 and exponent < 18:
        mantissa //= 1000
        exponent += 3
    return f"{sign}{mantissa}{_SUFFIXES[exponent]}"


def set_condition(status: dict, type_: str, value: str, reason: str, message: str, now: dt.datetime) -> None:
    """setCondition: add or change a condition; its lastTransitionTime moves only when its status changes."""
    conditions = status.setdefault("conditions", [])
    for cond in conditions:
        if cond.get("type") == type_:
            if cond.get("status") != value:
                cond["lastTransitionTime"] = format_time(now)
            cond.update(status=value, reason=reason, message=message)
            return
    conditions.append({"type": type_, "status": value, "lastTransitionTime": format_time(now), "reason": reason,
                       "message": message})


def resource_metric_status(name: str, *, average_milli: int, utilization: int | None) -> dict:
    """A MetricStatus of type Resource: the current average value (and utilization for a Utilization target)."""
    current: dict = {"averageValue": milli_quantity(average_milli)}
    if utilization is not None:
        current["averageUtilization"] = utilization
    return {"type": "Resource", "resource": {"name": name, "current": current}}


def set_status(status: dict, *, current: int, desired: int, metrics: list[dict] | None, rescaled: bool,
               now: dt.datetime) -> dict:
    """setStatus: currentReplicas, desiredReplicas, currentMetrics; lastScaleTime when it rescaled; conditions kept."""
    new: dict = {}
    if status.get("lastScaleTime"):
        new["lastScaleTime"] = status["lastScaleTime"]
    if rescaled:
        new["lastScaleTime"] = format_time(now)
    new["currentReplicas"] = current
    new["desiredReplicas"] = desired
    new["currentMetrics"] = metrics if metrics else None
    if status.get("conditions"):
        new["conditions"] = status["conditions"]
    return new


def scaling_reason(metric: str, desired: int, current: int) -> str:
    """The rescale reason of the SuccessfulRescale Event: `<metric> above target` or `All metrics below target`."""
    if desired > current:
        return f"{metric} above target"
    if desired < current:
        return "All metrics below target"
    return ""


__all__ = ["ABLE_TO_SCALE", "SCALING_ACTIVE", "SCALING_LIMITED", "milli_quantity", "resource_metric_status",
           "scaling_reason", "set_condition", "set_status"]
