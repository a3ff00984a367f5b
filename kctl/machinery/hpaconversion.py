"""HorizontalPodAutoscaler between autoscaling/v1 and autoscaling/v2 (the stored version), as Kubernetes converts it.

Registered in kctl.machinery.conversion; the API server converts a v1 object to v2 before
admission and storage, and the HTTPS API (kctl.kubeapi) converts stored objects to v1 for a
client that asks for v1. As Kubernetes (pkg/apis/autoscaling/v1/conversion.go):

- v1 `spec.targetCPUUtilizationPercentage` <-> the v2 metric `Resource cpu Utilization`; a v1
  object without it and without other metrics gets the default target of 80 %.
- v1 `status.currentCPUUtilizationPercentage` <-> the v2 current metric of cpu utilization.
- What v1 cannot say travels in annotations: the other metrics (`autoscaling.alpha.kubernetes.io/metrics`,
  in autoscaling/v1's MetricSpec form), the current metrics (`.../current-metrics`), the status
  conditions (`.../conditions`) and the scaling behavior (`.../behavior`, with Go's field names,
  as Kubernetes writes its internal type). Converting back reads and removes them.
"""

from __future__ import annotations

import copy
import json
from typing import Any

__all__ = ["ANNOTATIONS", "BEHAVIOR_ANNOTATION", "CONDITIONS_ANNOTATION", "CURRENT_METRICS_ANNOTATION",
           "DEFAULT_CPU_UTILIZATION", "METRICS_ANNOTATION", "v1_to_v2", "v2_to_v1"]

METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
ANNOTATIONS = (METRICS_ANNOTATION, CURRENT_METRICS_ANNOTATION, CONDITIONS_ANNOTATION, BEHAVIOR_ANNOTATION)
#: the cpu utilization target of a v1 HPA that names none (autoscaling.DefaultCPUUtilization)
DEFAULT_CPU_UTILIZATION = 80
V1_SPEC = ("scaleTargetRef", "minReplicas", "maxReplicas", "targetCPUUtilizationPercentage")
V1_STATUS = ("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas",
             "currentCPUUtilizationPercentage")


def _clean(d: dict) -> dict:
    """d without its None values (Go's omitempty of unset pointers)."""
    return {k: v for k, v in d.items() if v is not None}


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _go_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _annotation_list(annotations: dict, key: str) -> list | None:
    """The JSON list in an annotation; None when absent or unreadable (Kubernetes ignores a bad one)."""
    raw = annotations.get(key)
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def _is_cpu_utilization(metric: dict) -> bool:
    resource = _dict(metric.get("resource"))
    return metric.get("type") == "Resource" and resource.get("name") == "cpu" \
        and _dict(resource.get("target")).get("averageUtilization") is not None


# -- metric specs and statuses: v1 (the v2beta1 form) <-> v2 --------------------------------

def _metric_to_v1(metric: dict) -> dict:
    kind = metric.get("type")
    out: dict = {"type": kind}
    if kind in ("Resource", "ContainerResource"):
        src = _dict(metric.get("resource" if kind == "Resource" else "containerResource"))
        target = _dict(src.get("target"))
        body = _clean({"name": src.get("name"), "targetAverageUtilization": target.get("averageUtilization"),
                       "targetAverageValue": target.get("averageValue")})
        if kind == "ContainerResource":
            body["container"] = src.get("container", "")
        out["resource" if kind == "Resource" else "containerResource"] = body
    elif kind == "Pods":
        src = _dict(metric.get("pods"))
        ident, target = _dict(src.get("metric")), _dict(src.get("target"))
        out["pods"] = _clean({"metricName": ident.get("name", ""),
                              "targetAverageValue": target.get("averageValue", "0"), "selector": ident.get("selector")})
    elif kind == "Object":
        src = _dict(metric.get("object"))
        ident, target = _dict(src.get("metric")), _dict(src.get("target"))
        out["object"] = _clean({"target": src.get("describedObject") or {}, "metricName": ident.get("name", ""),
                                "targetValue": target.get("value", "0"), "selector": ident.get("selector"),
                                "averageValue": target.get("averageValue")})
    elif kind == "External":
        src = _dict(metric.get("external"))
        ident, target = _dict(src.get("metric")), _dict(src.get("target"))
        out["external"] = _clean({"metricName": ident.get("name", ""), "metricSelector": ident.get("selector"),
                                  "targetValue": target.get("value"), "targetAverageValue": target.get("averageValue")})
    return out


def _metric_to_v2(metric: dict) -> dict:
    kind = metric.get("type")
    out: dict = {"type": kind}
    if kind in ("Resource", "ContainerResource"):
        key = "resource" if kind == "Resource" else "containerResource"
        src = _dict(metric.get(key))
        utilization = src.get("targetAverageUtilization")
        target = _clean({"type": "AverageValue" if utilization is None else "Utilization",
                         "averageValue": src.get("targetAverageValue"), "averageUtilization": utilization})
        body = {"name": src.get("name", ""), "target": target}
        if kind == "ContainerResource":
            body["container"] = src.get("container", "")
        out[key] = body
    elif kind == "Pods":
        src = _dict(metric.get("pods"))
        out["pods"] = {"metric": _clean({"name": src.get("metricName", ""), "selector": src.get("selector")}),
                       "target": {"type": "AverageValue", "averageValue": src.get("targetAverageValue", "0")}}
    elif kind == "Object":
        src = _dict(metric.get("object"))
        average = src.get("averageValue")
        out["object"] = {
            "describedObject": _dict(src.get("target")),
            "metric": _clean({"name": src.get("metricName", ""), "selector": src.get("selector")}),
            "target": _clean({"type": "Value" if average is None else "AverageValue",
                              "value": src.get("targetValue", "0"), "averageValue": average})}
    elif kind == "External":
        src = _dict(metric.get("external"))
        value = src.get("targetValue")
        out["external"] = {
            "metric": _clean({"name": src.get("metricName", ""), "selector": src.get("metricSelector")}),
            "target": _clean({"type": "AverageValue" if value is None else "Value", "value": value,
                              "averageValue": src.get("targetAverageValue")})}
    return out


def _status_to_v1(metric: dict) -> dict:
    kind = metric.get("type")
    out: dict = {"type": kind}
    if kind in ("Resource", "ContainerResource"):
        key = "resource" if kind == "Resource" else "containerResource"
        src = _dict(metric.get(key))
        current = _dict(src.get("current"))
        body = _clean({"name": src.get("name", ""), "currentAverageUtilization": current.get("averageUtilization"),
                       "currentAverageValue": current.get("averageValue", "0")})
        if kind == "ContainerResource":
            body["container"] = src.get("container", "")
        out[key] = body
    elif kind == "Pods":
        src = _dict(metric.get("pods"))
        ident, current = _dict(src.get("metric")), _dict(src.get("current"))
        out["pods"] = _clean({"metricName": ident.get("name", ""),
                              "currentAverageValue": current.get("averageValue", "0"),
                              "selector": ident.get("selector")})
    elif kind == "Object":
        src = _dict(metric.get("object"))
        ident, current = _dict(src.get("metric")), _dict(src.get("current"))
        out["object"] = _clean({"target": _dict(src.get("describedObject")), "metricName": ident.get("name", ""),
                                "currentValue": current.get("value", "0"), "selector": ident.get("selector"),
                                "averageValue": current.get("averageValue")})
    elif kind == "External":
        src = _dict(metric.get("external"))
        ident, current = _dict(src.get("metric")), _dict(src.get("current"))
        out["external"] = _clean({"metricName": ident.get("name", ""), "metricSelector": ident.get("selector"),
                                  "currentValue": current.get("value", "0"),
                                  "currentAverageValue": current.get("averageValue")})
    return out


def _status_to_v2(metric: dict) -> dict:
    kind = metric.get("type")
    out: dict = {"type": kind}
    if kind in ("Resource", "ContainerResource"):
        key = "resource" if kind == "Resource" else "containerResource"
        src = _dict(metric.get(key))
        body = {"name": src.get("name", ""),
                "current": _clean({"averageValue": src.get("currentAverageValue", "0"),
                                   "averageUtilization": src.get("currentAverageUtilization")})}
        if kind == "ContainerResource":
            body["container"] = src.get("container", "")
        out[key] = body
    elif kind == "Pods":
        src = _dict(metric.get("pods"))
        out["pods"] = {"metric": _clean({"name": src.get("metricName", ""), "selector": src.get("selector")}),
                       "current": {"averageValue": src.get("currentAverageValue", "0")}}
    elif kind == "Object":
        src = _dict(metric.get("object"))
        out["object"] = {"describedObject": _dict(src.get("target")),
                         "metric": _clean({"name": src.get("metricName", ""), "selector": src.get("selector")}),
                         "current": _clean({"value": src.get("currentValue", "0"),
                                            "averageValue": src.get("averageValue")})}
    elif kind == "External":
        src = _dict(metric.get("external"))
        out["external"] = {"metric": _clean({"name": src.get("metricName", ""), "selector": src.get("metricSelector")}),
                           "current": _clean({"value": src.get("currentValue", "0"),
                                              "averageValue": src.get("currentAverageValue")})}
    return out


# -- behavior: v2's JSON <-> the Go field names of Kubernetes' internal type ------------------

def _go_name(name: str) -> str:
    return name[:1].upper() + name[1:]


def _json_name(name: str) -> str:
    return name[:1].lower() + name[1:]


_RULE_FIELDS = ("stabilizationWindowSeconds", "selectPolicy", "policies")
_POLICY_FIELDS = ("type", "value", "periodSeconds")


def _behavior_to_go(behavior: dict) -> dict:
    out: dict = {}
    for direction in ("scaleUp", "scaleDown"):
        rules = behavior.get(direction)
        if not isinstance(rules, dict):
            out[_go_name(direction)] = None
            continue
        go_rules: dict = {_go_name(f): rules.get(f) for f in _RULE_FIELDS}
        if isinstance(rules.get("policies"), list):
            go_rules["Policies"] = [{_go_name(f): _dict(p).get(f) for f in _POLICY_FIELDS} for p in rules["policies"]]
        for extra in rules:  # fields newer than these keep their names in Go's form
            if extra not in _RULE_FIELDS:
                go_rules[_go_name(extra)] = rules[extra]
        out[_go_name(direction)] = go_rules
    return out


def _behavior_from_go(raw: str) -> dict | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    out: dict = {}
    for direction, rules in value.items():
        if not isinstance(rules, dict):
            continue
        converted = {}
        for key, field_value in rules.items():
            if field_value is None:
                continue
            if key == "Policies" and isinstance(field_value, list):
                field_value = [_clean({_json_name(k): v for k, v in _dict(p).items()}) for p in field_value]
            converted[_json_name(key)] = field_value
        out[_json_name(direction)] = converted
    return out or None


# -- whole objects ------------------------------------------------------------------------

def _without_round_trip(meta: dict) -> None:
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        kept = {k: v for k, v in annotations.items() if k not in ANNOTATIONS}
        if kept:
            meta["annotations"] = kept
        else:
            meta.pop("annotations")


def v2_to_v1(obj: dict) -> dict:
    """An autoscaling/v2 HorizontalPodAutoscaler as autoscaling/v1 (a new dict; obj is not changed)."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = "autoscaling/v1"
    meta = out.get("metadata") if isinstance(out.get("metadata"), dict) else {}
    _without_round_trip(meta)
    extra: dict[str, str] = {}
    if isinstance(out.get("spec"), dict):
        spec = out["spec"]
        metrics = [m for m in _list(spec.get("metrics")) if isinstance(m, dict)]
        new_spec = {k: spec[k] for k in ("scaleTargetRef", "minReplicas", "maxReplicas") if k in spec}
        cpu = next((m for m in metrics if _is_cpu_utilization(m)), None)
        if cpu is not None:
            new_spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"]["averageUtilization"]
        others = [_metric_to_v1(m) for m in metrics if not _is_cpu_utilization(m)]
        if others:
            extra[METRICS_ANNOTATION] = _go_json(others)
        if isinstance(spec.get("behavior"), dict):
            extra[BEHAVIOR_ANNOTATION] = _go_json(_behavior_to_go(spec["behavior"]))
        out["spec"] = new_spec
    if isinstance(out.get("status"), dict):
        status = out["status"]
        new_status = {k: status[k] for k in V1_STATUS[:-1] if k in status}
        current = [m for m in _list(status.get("currentMetrics")) if isinstance(m, dict)]
        for metric in current:  # (the last cpu utilization wins, as Kubernetes' loop)
            resource = _dict(metric.get("resource"))
            if metric.get("type") == "Resource" and resource.get("name") == "cpu" \
                    and _dict(resource.get("current")).get("averageUtilization") is not None:
                new_status["currentCPUUtilizationPercentage"] = resource["current"]["averageUtilization"]
        if current:
            extra[CURRENT_METRICS_ANNOTATION] = _go_json([_status_to_v1(m) for m in current])
        conditions = [c for c in _list(status.get("conditions")) if isinstance(c, dict)]
        if conditions:
            extra[CONDITIONS_ANNOTATION] = _go_json([
                _clean({k: c.get(k) for k in ("type", "status", "lastTransitionTime", "reason", "message")})
                for c in conditions])
        out["status"] = new_status
    if extra:
        meta["annotations"] = {**_dict(meta.get("annotations")), **extra}
        out["metadata"] = meta
    return out


def v1_to_v2(obj: dict) -> dict:
    """An autoscaling/v1 HorizontalPodAutoscaler as autoscaling/v2 (a new dict; obj is not changed).

    Fields v1 does not have are kept where they are, so that validation names them.
    """
    out = copy.deepcopy(obj)
    out["apiVersion"] = "autoscaling/v2"
    meta = out.get("metadata") if isinstance(out.get("metadata"), dict) else {}
    annotations = _dict(meta.get("annotations"))
    if isinstance(out.get("spec"), dict):
        spec = out["spec"]
        new_spec = {k: v for k, v in spec.items() if k != "targetCPUUtilizationPercentage"}
        metrics = [_metric_to_v2(m) for m in _annotation_list(annotations, METRICS_ANNOTATION) or ()
                   if isinstance(m, dict)]
        if spec.get("targetCPUUtilizationPercentage") is not None:
            metrics.append(_cpu_metric(spec["targetCPUUtilizationPercentage"]))
        new_spec["metrics"] = metrics or [_cpu_metric(DEFAULT_CPU_UTILIZATION)]
        behavior = annotations.get(BEHAVIOR_ANNOTATION)
        if isinstance(behavior, str) and _behavior_from_go(behavior):
            new_spec["behavior"] = _behavior_from_go(behavior)
        out["spec"] = new_spec
    if isinstance(out.get("status"), dict):
        status = out["status"]
        new_status = {k: v for k, v in status.items() if k != "currentCPUUtilizationPercentage"}
        current = _annotation_list(annotations, CURRENT_METRICS_ANNOTATION)
        if current is not None:
            new_status["currentMetrics"] = [_status_to_v2(m) for m in current if isinstance(m, dict)]
        elif status.get("currentCPUUtilizationPercentage") is not None:
            new_status["currentMetrics"] = [{"type": "Resource", "resource": {
                "name": "cpu", "current": {"averageUtilization": status["currentCPUUtilizationPercentage"]}}}]
        conditions = _annotation_list(annotations, CONDITIONS_ANNOTATION)
        if conditions is not None:
            new_status["conditions"] = [c for c in conditions if isinstance(c, dict)]
        out["status"] = new_status
    if meta:
        _without_round_trip(meta)
    return out


def _cpu_metric(utilization: Any) -> dict:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                      "averageUtilization": utilization}}}
