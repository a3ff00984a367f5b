"""The HPA controller acts on an HPA written as autoscaling/v1 (kubectl 1.32's `autoscale`), stored as v2."""

from __future__ import annotations

from hpa_harness import Clock, FakeMetrics, controller, deployment, hpa_status, replicas_of, running_pod

from kctl.machinery import conversion

KEY = "default/web"


def test_v1_hpa_scales_its_target_and_reads_back_as_v1(api):
    """A v1 HPA (cpu target 50 %) at 90 % usage doubles one pod; its status reads at v1 as currentCPUUtilization 90."""
    clock = Clock()
    metrics = FakeMetrics(clock)
    deployment(api, replicas=1)
    running_pod(api, "web-0", clock)
    metrics.cpu["web-0"] = 90
    api.create({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                         "minReplicas": 1, "maxReplicas": 10, "targetCPUUtilizationPercentage": 50}})
    ctl = controller(api, clock, metrics)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 2
    assert hpa_status(api)["desiredReplicas"] == 2
    as_v1 = conversion.convert(api.get(api.resource("hpa"), "web", namespace="default"), "autoscaling/v1")
    assert as_v1["status"]["currentCPUUtilizationPercentage"] == 90
    assert as_v1["status"]["desiredReplicas"] == 2
    assert as_v1["spec"]["targetCPUUtilizationPercentage"] == 50
