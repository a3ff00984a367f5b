"""The checks Kubernetes makes on an autoscaling/v2 HorizontalPodAutoscaler that its schema cannot say.

After pkg/apis/autoscaling/validation (validateHorizontalPodAutoscalerSpec): replica bounds,
the scale target reference, each metric (a supported type whose source is the one given,
a target of Utilization > 0 or a positive AverageValue/Value) and the behavior's rules
(windows 0..3600 s, at least one policy, Pods/Percent policies with a positive value and a
period of 1..1800 s, selectPolicy Max/Min/Disabled). Registered in
kctl.admission.validation.kinds' KIND_CHECKS; runs after defaulting, as Kubernetes'.
"""

from __future__ import annotations

from typing import Any

from kctl.admission.validation.fields import Path, invalid_value, join_path, required_value, unsupported_value
from kctl.machinery.errors import FieldError
from kctl.machinery.quantity import parse_quantity

METRIC_SOURCES = {"Object": "object", "Pods": "pods", "Resource": "resource", "ContainerResource": "containerResource",
                  "External": "external"}
SELECT_POLICIES = ("Disabled", "Max", "Min")
POLICY_TYPES = ("Pods", "Percent")
MAX_STABILIZATION_WINDOW_SECONDS = 3600
MAX_PERIOD_SECONDS = 1800


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _positive_quantity(value: Any) -> bool:
    try:
        return parse_quantity(value) > 0
    except ValueError:
        return True  # a malformed quantity is the schema's error, not ours


def _path_segment_problems(value: str) -> list[str]:
    """IsValidPathSegmentName: not `.` or `..`, no `/` or `%`."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in "/%" if c in value]


def _target_errors(target: Any, path: Path) -> list[FieldError]:
    if not isinstance(target, dict):
        return [required_value(path, "must specify a metric target")]
    errors: list[FieldError] = []
    if not target.get("type"):
        errors.append(required_value((*path, "type"), "must specify a metric target type"))
    elif target["type"] not in ("Utilization", "Value", "AverageValue"):
        errors.append(invalid_value((*path, "type"), target["type"], "must be either Utilization, Value, or "
                                                                      "AverageValue"))
    for key in ("value", "averageValue"):
        if target.get(key) is not None and not _positive_quantity(target[key]):
            errors.append(invalid_value((*path, key), target[key], "must be positive"))
    utilization = _int(target.get("averageUtilization"))
    if utilization is not None and utilization < 1:
        errors.append(invalid_value((*path, "averageUtilization"), utilization, "must be greater than 0"))
    return errors


def _resource_source_errors(source: dict, path: Path, *, container: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    if not source.get("name"):
        errors.append(required_value((*path, "name"), "must specify a resource name"))
    if container and not source.get("container"):
        errors.append(required_value((*path, "container"), "must specify a container"))
    target = source.get("target")
    errors.extend(_target_errors(target, (*path, "target")))
    if isinstance(target, dict):
        if target.get("averageUtilization") is None and target.get("averageValue") is None:
            errors.append(required_value((*path, "target", "averageUtilization"),
                                         "must set either a target raw value or a target utilization"))
        if target.get("averageUtilization") is not None and target.get("averageValue") is not None:
            errors.append(FieldError(join_path((*path, "target", "averageValue")),
                                     "Forbidden: may not set both a target raw value and a target utilization"))
    return errors


def _metric_errors(metric: Any, path: Path) -> list[FieldError]:
    if not isinstance(metric, dict):
        return []
    kind = metric.get("type")
    if not kind:
        return [required_value((*path, "type"), "must specify a metric source type")]
    if kind not in METRIC_SOURCES:
        return [unsupported_value((*path, "type"), kind, sorted(METRIC_SOURCES))]
    errors: list[FieldError] = []
    field = METRIC_SOURCES[kind]
    source = metric.get(field)
    if not isinstance(source, dict):
        errors.append(required_value((*path, field), "must populate information for the given metric source"))
    elif kind in ("Resource", "ContainerResource"):
        errors.extend(_resource_source_errors(source, (*path, field), container=kind == "ContainerResource"))
    for other in METRIC_SOURCES.values():
        if other != field and metric.get(other) is not None:
            errors.append(FieldError(join_path((*path, other)),
                                     "Forbidden: must populate the given metric source only"))
    return errors


def _rules_errors(rules: Any, path: Path) -> list[FieldError]:
    if not isinstance(rules, dict):
        return []
    errors: list[FieldError] = []
    window = _int(rules.get("stabilizationWindowSeconds"))
    if window is not None and window < 0:
        errors.append(invalid_value((*path, "stabilizationWindowSeconds"), window,
                                    "must be greater than or equal to zero"))
    if window is not None and window > MAX_STABILIZATION_WINDOW_SECONDS:
        errors.append(invalid_value((*path, "stabilizationWindowSeconds"), window,
                                    f"must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"))
    if rules.get("selectPolicy") is not None and rules["selectPolicy"] not in SELECT_POLICIES:
        errors.append(unsupported_value((*path, "selectPolicy"), rules["selectPolicy"], SELECT_POLICIES))
    policies = rules.get("policies")
    if not policies:
        errors.append(required_value((*path, "policies"), "must specify at least one Policy"))
    for i, policy in enumerate(policies if isinstance(policies, list) else ()):
        if not isinstance(policy, dict):
            continue
        where = (*path, "policies", i)
        if policy.get("type") not in POLICY_TYPES:
            errors.append(unsupported_value((*where, "type"), policy.get("type"), POLICY_TYPES))
        value, period = _int(policy.get("value")), _int(policy.get("periodSeconds"))
        if value is not None and value <= 0:
            errors.append(invalid_value((*where, "value"), value, "must be greater than zero"))
        if period is not None and period <= 0:
            errors.append(invalid_value((*where, "periodSeconds"), period, "must be greater than zero"))
        if period is not None and period > MAX_PERIOD_SECONDS:
            errors.append(invalid_value((*where, "periodSeconds"), period,
                                        f"must be less than or equal to {MAX_PERIOD_SECONDS}"))
    return errors


def hpa_errors(obj: dict) -> list[FieldError]:
    """validateHorizontalPodAutoscalerSpec's errors for a (defaulted) HorizontalPodAutoscaler."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    errors: list[FieldError] = []
    least, most = _int(spec.get("minReplicas")), _int(spec.get("maxReplicas"))
    if least is not None and least < 1:
        errors.append(invalid_value(("spec", "minReplicas"), least, "must be greater than or equal to 1"))
    if most is not None and most < 1:
        errors.append(invalid_value(("spec", "maxReplicas"), most, "must be greater than 0"))
    if least is not None and most is not None and most < least:
        errors.append(invalid_value(("spec", "maxReplicas"), most, "must be greater than or equal to `minReplicas`"))
    ref = spec.get("scaleTargetRef")
    ref_errors: list[FieldError] = []
    if isinstance(ref, dict):
        for key in ("kind", "name"):
            if not ref.get(key):
                ref_errors.append(required_value(("spec", "scaleTargetRef", key)))
            else:
                ref_errors.extend(invalid_value(("spec", "scaleTargetRef", key), ref[key], problem)
                                  for problem in _path_segment_problems(str(ref[key])))
    if ref_errors:
        return errors + ref_errors
    metrics = spec.get("metrics") if isinstance(spec.get("metrics"), list) else []
    metric_errors = [e for i, m in enumerate(metrics) for e in _metric_errors(m, ("spec", "metrics", i))]
    if metric_errors:
        return errors + metric_errors
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        errors.extend(_rules_errors(behavior.get("scaleUp"), ("spec", "behavior", "scaleUp")))
        errors.extend(_rules_errors(behavior.get("scaleDown"), ("spec", "behavior", "scaleDown")))
    return errors


__all__ = ["hpa_errors"]
