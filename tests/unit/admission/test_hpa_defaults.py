"""The API's defaults for an autoscaling/v2 HorizontalPodAutoscaler (SetDefaults_HorizontalPodAutoscaler)."""

from __future__ import annotations

from kctl.admission.defaults import apply_defaults
from kctl.machinery.resources import builtin_registry

HPA = builtin_registry().lookup("hpa")


def _hpa(**spec) -> dict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "maxReplicas": 5, **spec}}


def test_min_replicas_and_cpu_metric_default():
    """No minReplicas is 1; no metrics is cpu at 80% of requests; given ones are kept."""
    spec = apply_defaults(_hpa(), HPA)["spec"]
    assert spec["minReplicas"] == 1
    assert spec["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    assert "behavior" not in spec
    given = apply_defaults(_hpa(minReplicas=3, metrics=[{"type": "Resource", "resource": {
        "name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}]), HPA)["spec"]
    assert given["minReplicas"] == 3 and given["metrics"][0]["resource"]["name"] == "memory"


def test_a_given_behavior_gets_the_default_rules():
    """A behavior's missing directions and fields get Kubernetes' default rules; scale-down's window stays unset."""
    spec = apply_defaults(_hpa(behavior={"scaleDown": {"stabilizationWindowSeconds": 60}}), HPA)["spec"]
    assert spec["behavior"] == {
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                 {"type": "Percent", "value": 100, "periodSeconds": 15}]},
        "scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                      "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}
    bare = apply_defaults(_hpa(behavior={}), HPA)["spec"]["behavior"]
    assert "stabilizationWindowSeconds" not in bare["scaleDown"]
