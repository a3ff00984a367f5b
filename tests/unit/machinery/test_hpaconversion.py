"""HorizontalPodAutoscaler autoscaling/v1 <-> autoscaling/v2 conversion (kctl.machinery.hpaconversion, .conversion)."""

from __future__ import annotations

import copy
import json

import pytest

from kctl.machinery import conversion, hpaconversion
from kctl.machinery.errors import BadRequest, ClientSideError
from kctl.machinery.resources import builtin_registry

META = {"name": "web", "namespace": "default", "labels": {"app": "web"}}
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def v2(spec: dict, status: dict | None = None, annotations: dict | None = None) -> dict:
    meta = dict(META, annotations=annotations) if annotations else dict(META)
    obj = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta,
           "spec": {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 5, **spec}}
    if status is not None:
        obj["status"] = status
    return obj


def cpu(n: int) -> dict:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": n}}}


MEMORY_VALUE = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue",
                                                                             "averageValue": "500Mi"}}}
PODS = {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}}
OBJECT = {"type": "Object", "object": {"describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                                                            "name": "main"},
                                       "metric": {"name": "requests"}, "target": {"type": "Value", "value": "10k"}}}
EXTERNAL = {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchLabels": {"q": "a"}}},
                                             "target": {"type": "AverageValue", "averageValue": "30"}}}
CONTAINER = {"type": "ContainerResource", "containerResource": {
    "name": "cpu", "container": "app", "target": {"type": "Utilization", "averageUtilization": 60}}}
BEHAVIOR = {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                        "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                     {"type": "Percent", "value": 100, "periodSeconds": 15}]},
            "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
                          "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}
STATUS = {"observedGeneration": 2, "currentReplicas": 3, "desiredReplicas": 4,
          "lastScaleTime": "2026-01-01T00:00:00Z",
          "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {
              "averageUtilization": 91, "averageValue": "455m"}}},
              {"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "900"}}}],
          "conditions": [{"type": "AbleToScale", "status": "True", "reason": "SucceededRescale",
                          "message": "the HPA controller was able to update the target scale to 4",
                          "lastTransitionTime": "2026-01-01T00:00:00Z"}]}


@pytest.mark.parametrize("obj", [
    v2({"metrics": [cpu(80)]}),
    v2({"metrics": [MEMORY_VALUE, cpu(50)]}),
    v2({"metrics": [PODS, OBJECT, EXTERNAL, CONTAINER, cpu(70)]}),
    v2({"metrics": [cpu(80)], "behavior": BEHAVIOR}),
    v2({"metrics": [PODS, cpu(80)]}, status=STATUS),
    v2({"metrics": [cpu(80)]}, status={"currentReplicas": 1, "desiredReplicas": 1}),
    v2({"metrics": [cpu(80)]}, annotations={"owner": "team-a"}),
], ids=["cpu", "memory+cpu", "every-source", "behavior", "status", "empty-status", "user-annotation"])
def test_v2_round_trips_through_v1(obj):
    """v2 -> v1 -> v2 gives back the same object (what v1 cannot say travels in annotations; the cpu metric last)."""
    before = copy.deepcopy(obj)
    back = hpaconversion.v1_to_v2(hpaconversion.v2_to_v1(obj))
    assert obj == before  # (the input is not changed)
    assert back == obj


@pytest.mark.parametrize("v1_spec, v2_metrics", [
    ({"targetCPUUtilizationPercentage": 60}, [cpu(60)]),
    ({}, [cpu(hpaconversion.DEFAULT_CPU_UTILIZATION)]),
], ids=["target", "default-80"])
def test_v1_spec_to_v2(v1_spec, v2_metrics):
    """v1's targetCPUUtilizationPercentage becomes the cpu Utilization metric; none means Kubernetes' default 80 %."""
    obj = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": dict(META),
           "spec": {"scaleTargetRef": REF, "maxReplicas": 5, **v1_spec}}
    out = hpaconversion.v1_to_v2(obj)
    assert out["apiVersion"] == "autoscaling/v2"
    assert out["spec"] == {"scaleTargetRef": REF, "maxReplicas": 5, "metrics": v2_metrics}


def test_cpu_metric_comes_back_last():
    """As Kubernetes: after a trip through v1 the cpu utilization metric follows the other metrics."""
    back = hpaconversion.v1_to_v2(hpaconversion.v2_to_v1(v2({"metrics": [cpu(50), MEMORY_VALUE]})))
    assert back["spec"]["metrics"] == [MEMORY_VALUE, cpu(50)]


def test_v1_round_trips_through_v2():
    """v1 -> v2 -> v1 gives back the v1 object (spec and status)."""
    obj = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": dict(META),
           "spec": {"scaleTargetRef": REF, "minReplicas": 2, "maxReplicas": 5, "targetCPUUtilizationPercentage": 75},
           "status": {"currentReplicas": 2, "desiredReplicas": 2, "currentCPUUtilizationPercentage": 30}}
    back = hpaconversion.v2_to_v1(hpaconversion.v1_to_v2(obj))
    assert back["spec"] == obj["spec"]
    assert back["status"] == obj["status"]


def test_v2_to_v1_annotations_as_kubernetes_writes_them():
    """Other metrics in v1's MetricSpec form, behavior with Go's field names, the cpu status as a v1 field."""
    out = hpaconversion.v2_to_v1(v2({"metrics": [cpu(80), PODS], "behavior": BEHAVIOR}, status=STATUS))
    annotations = out["metadata"]["annotations"]
    assert out["spec"]["targetCPUUtilizationPercentage"] == 80
    assert "metrics" not in out["spec"] and "behavior" not in out["spec"]
    assert json.loads(annotations[hpaconversion.METRICS_ANNOTATION]) == [
        {"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "1k"}}]
    behavior = json.loads(annotations[hpaconversion.BEHAVIOR_ANNOTATION])
    assert behavior["ScaleDown"] == {"StabilizationWindowSeconds": 300, "SelectPolicy": "Max",
                                     "Policies": [{"Type": "Percent", "Value": 100, "PeriodSeconds": 15}]}
    assert out["status"]["currentCPUUtilizationPercentage"] == 91
    assert "currentMetrics" not in out["status"] and "conditions" not in out["status"]
    assert json.loads(annotations[hpaconversion.CONDITIONS_ANNOTATION])[0]["reason"] == "SucceededRescale"


def test_stale_round_trip_annotations_are_replaced():
    """A v2 object carrying old round-trip annotations gets only those its conversion makes, and v2 keeps none."""
    stale = {hpaconversion.METRICS_ANNOTATION: json.dumps([{"type": "Pods", "pods": {"metricName": "old",
                                                                                     "targetAverageValue": "1"}}])}
    out = hpaconversion.v2_to_v1(v2({"metrics": [cpu(80)]}, annotations=stale))
    assert "annotations" not in out["metadata"]
    back = hpaconversion.v1_to_v2({**out, "metadata": {**out["metadata"], "annotations": {
        hpaconversion.METRICS_ANNOTATION: "not json"}}})
    assert back["spec"]["metrics"] == [cpu(80)]  # (an unreadable annotation is ignored, as Kubernetes does)
    assert "annotations" not in back["metadata"]


def test_registry_maps_v1_to_the_stored_kind():
    """autoscaling/v1 HPA names the v2 ResourceType; other versions stay unknown; served versions list both."""
    registry = builtin_registry()
    rt = registry.for_object({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler"})
    assert rt.api_version == "autoscaling/v2"
    assert registry.served_versions(rt) == ("v2", "v1")
    with pytest.raises(ClientSideError, match='no matches for kind "HorizontalPodAutoscaler" in version '
                                              '"autoscaling/v2beta2"'):
        registry.for_object({"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler"})
    assert registry.served_versions(registry.lookup("deploy")) == ("v1",)


def test_conversion_dispatch():
    """convert/to_storage: identity at the same version, the registered converter otherwise, BadRequest if none."""
    rt = builtin_registry().lookup("hpa")
    stored = v2({"metrics": [cpu(80)]})
    assert conversion.convert(stored, "autoscaling/v2") is stored
    assert conversion.to_storage(stored, rt) is stored
    assert conversion.convert(stored, "autoscaling/v1")["spec"]["targetCPUUtilizationPercentage"] == 80
    assert conversion.to_storage(hpaconversion.v2_to_v1(stored), rt) == stored
    with pytest.raises(BadRequest, match="no conversion"):
        conversion.convert(stored, "autoscaling/v2beta1")
