"""A HorizontalPodAutoscaler as kubectl shows it: the `get hpa` row (printHorizontalPodAutoscaler) and
`describe hpa` (describeHorizontalPodAutoscalerV2), from the status the HPA controller writes."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import builtin_registry
from kctl.output.describe import describe
from kctl.output.tables import TABLES

NOW = datetime(2026, 12, 2, 17, 0, 0, tzinfo=timezone.utc)


def cpu(percent: int) -> dict:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                        "averageUtilization": percent}}}


def memory(value: str) -> dict:
    return {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue",
                                                                           "averageValue": value}}}


def cpu_now(percent: int, value: str) -> dict:
    return {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": percent,
                                                                        "averageValue": value}}}


def _hpa(metrics: list | None, current: list | None = None, *, min_replicas: int | None = 1, **extra) -> dict:
    spec: dict = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5}
    if metrics is not None:
        spec["metrics"] = metrics
    if min_replicas is not None:
        spec["minReplicas"] = min_replicas
    spec.update(extra)
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": "2026-12-02T16:00:00Z"},
            "spec": spec, "status": {"currentReplicas": 2, "desiredReplicas": 3, "currentMetrics": current}}


@pytest.mark.parametrize("metrics,current,min_replicas,targets,min_cell", [
    ([cpu(70)], [cpu_now(12, "12m")], 2, "cpu: 12%/70%", "2"),
    ([cpu(70)], None, 2, "cpu: <unknown>/70%", "2"),
    ([cpu(70), memory("100Mi")], [cpu_now(12, "12m"), {"type": "Resource", "resource": {
        "name": "memory", "current": {"averageValue": "3Mi"}}}], 1, "cpu: 12%/70%, memory: 3Mi/100Mi", "1"),
    ([cpu(70), memory("100Mi"), cpu(50)], None, 1,
     "cpu: <unknown>/70%, memory: <unknown>/100Mi + 1 more...", "1"),
    (None, None, None, "<none>", "<unset>"),
    ([cpu(70)], [{"type": ""}], 1, "cpu: <unknown>/70%", "1"),
], ids=["utilization", "unknown", "two-metrics", "more", "no-metrics-unset-min", "failed-metric"])
def test_get_row_as_kubectl(metrics, current, min_replicas, targets, min_cell):
    """NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE, TARGETS as `cpu: 12%/70%`."""
    table = TABLES["HorizontalPodAutoscaler.autoscaling"]
    assert table.header(wide=False) == ("NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE")
    row = table.row(_hpa(metrics, current, min_replicas=min_replicas), False, NOW)
    assert row == ["web", "Deployment/web", targets, min_cell, "5", "2", "60m"]


def test_describe_hpa_as_kubectl():
    """Reference, each metric `( current / target )`, bounds, behavior, pods and conditions, aligned as kubectl."""
    obj = _hpa([cpu(70), memory("100Mi")], [cpu_now(12, "12m")],
               behavior={"scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                                       "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}})
    obj["status"]["conditions"] = [
        {"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale",
         "message": "recommended size matches current size", "lastTransitionTime": "2026-12-02T16:00:00Z"},
        {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound",
         "message": "the HPA was able to successfully calculate a replica count from cpu resource utilization "
                    "(percentage of request)", "lastTransitionTime": "2026-12-02T16:00:00Z"}]
    text = describe(obj, builtin_registry().lookup("hpa"), [], now=NOW)
    lines = text.splitlines()
    assert lines[0].split() == ["Name:", "web"] and lines[4].startswith("CreationTimestamp:")
    assert lines[5:] == [
        "Reference:                                             Deployment/web",
        "Metrics:                                               ( current / target )",
        "  resource cpu on pods  (as a percentage of request):  12% (12m) / 70%",
        "  resource memory on pods:                             <unknown> / 100Mi",
        "Min replicas:                                          1",
        "Max replicas:                                          5",
        "Behavior:",
        "  Scale Down:",
        "    Stabilization Window: 60 seconds",
        "    Select Policy: Max",
        "    Policies:",
        "      - Type: Percent  Value: 100  Period: 15 seconds",
        "Deployment pods:       2 current / 3 desired",  # one tab block with the policy line, as Go's tabwriter
        "Conditions:",
        "  Type           Status  Reason            Message",
        "  ----           ------  ------            -------",
        "  AbleToScale    True    ReadyForNewScale  recommended size matches current size",
        "  ScalingActive  True    ValidMetricFound  the HPA was able to successfully calculate a replica count from "
        "cpu resource utilization (percentage of request)",
        "Events:          <none>",
    ]
