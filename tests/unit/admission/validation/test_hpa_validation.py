"""Kubernetes' semantic checks on a HorizontalPodAutoscaler (kctl/admission/validation/autoscaling.py)."""

from __future__ import annotations

import copy

import pytest

from kctl.admission.defaults import apply_defaults
from kctl.admission.validation import validate
from kctl.machinery.resources import builtin_registry

HPA = builtin_registry().lookup("hpa")
GOOD = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 5,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                     "type": "Utilization", "averageUtilization": 70}}}]}}


def _with(path: tuple, value) -> dict:
    obj = copy.deepcopy(GOOD)
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return obj


def _errors(obj: dict) -> list[str]:
    return [f"{e.path}: {e.message}" for e in validate(apply_defaults(obj, HPA), HPA)]


def test_a_good_hpa_passes():
    """kubectl autoscale's object, with and without a behavior, is valid."""
    assert _errors(GOOD) == []
    assert _errors(_with(("spec", "behavior"), {"scaleDown": {"stabilizationWindowSeconds": 60}})) == []


@pytest.mark.parametrize("path,value,expected", [
    (("spec", "minReplicas"), 0, "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1"),
    (("spec", "maxReplicas"), 0, "spec.maxReplicas: Invalid value: 0: must be greater than 0"),
    (("spec", "minReplicas"), 9, "spec.maxReplicas: Invalid value: 5: must be greater than or equal to `minReplicas`"),
    (("spec", "scaleTargetRef", "name"), "", "spec.scaleTargetRef.name: Required value"),
    (("spec", "scaleTargetRef", "name"), "a/b",
     "spec.scaleTargetRef.name: Invalid value: \"a/b\": may not contain '/'"),
    (("spec", "metrics", 0, "resource", "target", "averageUtilization"), 0,
     "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"),
    (("spec", "metrics", 0, "resource", "target"), {"type": "AverageValue", "averageValue": "0"},
     'spec.metrics[0].resource.target.averageValue: Invalid value: "0": must be positive'),
    (("spec", "metrics", 0, "resource", "target"), {"type": "Utilization"},
     "spec.metrics[0].resource.target.averageUtilization: Required value: must set either a target raw value or a "
     "target utilization"),
    (("spec", "metrics", 0, "type"), "Pods",
     "spec.metrics[0].pods: Required value: must populate information for the given metric source"),
    (("spec", "behavior"), {"scaleUp": {"policies": []}},
     "spec.behavior.scaleUp.policies: Required value: must specify at least one Policy"),
    (("spec", "behavior"), {"scaleDown": {"stabilizationWindowSeconds": 4000}},
     "spec.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 4000: must be less than or equal to 3600"),
    (("spec", "behavior"), {"scaleUp": {"policies": [{"type": "Pods", "value": 0, "periodSeconds": 15}]}},
     "spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero"),
    (("spec", "behavior"), {"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 1801}]}},
     "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 1801: must be less than or equal to 1800"),
], ids=["min-zero", "max-zero", "max-below-min", "no-target-name", "bad-target-name", "zero-utilization",
        "zero-average-value", "no-target-value", "source-missing", "no-policies", "window-too-long",
        "zero-policy-value", "period-too-long"])
def test_invalid_hpa_is_refused_with_kubernetes_wording(path, value, expected):
    """Each broken field is one error with its path and Kubernetes' message."""
    assert expected in _errors(_with(path, value))
