"""Tests of the HorizontalPodAutoscaler controller on a real store: scaling, bounds, conditions, Events, status."""

from __future__ import annotations

import pytest

from hpa_harness import (Clock, FakeMetrics, condition, controller, cpu_utilization, deployment, events, hpa,
                         hpa_status, replicas_of, running_pod)

KEY = "default/web"


def setup(api, *, replicas: int = 1, pods: int | None = None, cpu: int = 90, **hpa_kw):
    """A Deployment of `replicas`, `pods` running pods each using `cpu` millicores of 100m, an HPA, a controller."""
    clock = Clock()
    metrics = FakeMetrics(clock)
    deployment(api, replicas=replicas)
    for i in range(replicas if pods is None else pods):
        running_pod(api, f"web-{i}", clock)
        metrics.cpu[f"web-{i}"] = cpu
    hpa_kw.setdefault("metrics", cpu_utilization(50))
    hpa(api, **hpa_kw)
    return clock, metrics, controller(api, clock, metrics)


def test_scale_up_writes_scale_status_and_event(api):
    """90% of requests against a 50% target doubles one pod: the Deployment's replicas, status and an Event."""
    clock, metrics, ctl = setup(api)
    assert ctl.reconcile(KEY) == 15.0
    assert replicas_of(api) == 2
    status = hpa_status(api)
    assert status["currentReplicas"] == 1 and status["desiredReplicas"] == 2 and status["lastScaleTime"]
    assert status["currentMetrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "current": {"averageValue": "90m", "averageUtilization": 90}}}]
    assert condition(status, "AbleToScale") == ("True", "SucceededRescale",
                                                "the HPA controller was able to update the target scale to 2")
    assert condition(status, "ScalingActive") == (
        "True", "ValidMetricFound",
        "the HPA was able to successfully calculate a replica count from cpu resource utilization "
        "(percentage of request)")
    assert condition(status, "ScalingLimited") == ("False", "DesiredWithinRange",
                                                   "the desired count is within the acceptable range")
    assert ("Normal", "SuccessfulRescale",
            "New size: 2; reason: cpu resource utilization (percentage of request) above target") in events(api)


def test_within_tolerance_leaves_target_alone(api):
    """Usage within 10% of the target changes nothing and records no rescale."""
    clock, metrics, ctl = setup(api, replicas=2, cpu=53)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 2
    status = hpa_status(api)
    assert status["desiredReplicas"] == 2 and "lastScaleTime" not in status
    assert condition(status, "AbleToScale")[1] == "ReadyForNewScale"
    assert not [e for e in events(api) if e[1] == "SuccessfulRescale"]


def test_scale_down_waits_for_the_stabilization_window(api):
    """Without a behavior, a lower recommendation waits out --horizontal-pod-autoscaler-downscale-stabilization."""
    clock, metrics, ctl = setup(api, replicas=4, cpu=10)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 4
    assert condition(hpa_status(api), "AbleToScale") == (
        "True", "ScaleDownStabilized",
        "recent recommendations were higher than current one, applying the highest recent recommendation")
    clock.advance(299)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 4
    clock.advance(2)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 1
    assert ("Normal", "SuccessfulRescale", "New size: 1; reason: All metrics below target") in events(api)


def test_shortened_downscale_stabilization_setting(api):
    """The controller's downscale window is a setting (the daemon's flag)."""
    clock = Clock()
    metrics = FakeMetrics(clock)
    deployment(api, replicas=2)
    for name in ("web-0", "web-1"):
        running_pod(api, name, clock)
        metrics.cpu[name] = 5
    hpa(api, metrics=cpu_utilization(50))
    ctl = controller(api, clock, metrics, downscale_stabilization=10)
    ctl.reconcile(KEY)
    clock.advance(11)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 1


def test_scale_up_without_behavior_is_limited_to_double_or_four(api):
    """Without a behavior one sync goes at most to max(2 x current, 4): ScalingLimited ScaleUpLimit."""
    clock, metrics, ctl = setup(api, replicas=1, cpu=1000, max_replicas=20)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 4
    assert condition(hpa_status(api), "ScalingLimited") == (
        "True", "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")


def test_default_behavior_policies_limit_each_period(api):
    """With a (default) behavior: at most +4 pods or +100% per 15 s, the larger; the next period allows more."""
    clock, metrics, ctl = setup(api, replicas=1, cpu=1000, max_replicas=30, behavior={})
    ctl.reconcile(KEY)
    assert replicas_of(api) == 5  # max(1 + 4, 1 x 2)
    clock.advance(5)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 5, "the period that started at 1 allows no more yet"
    assert condition(hpa_status(api), "ScalingLimited")[1] == "ScaleUpLimit"
    clock.advance(11)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 10  # max(5 + 4, 5 x 2); the pods' metric still asks for 10 (1 pod at 1000%)


def test_user_behavior_stabilization_and_disabled_scale_down(api):
    """A user's scaleDown selectPolicy Disabled keeps the count; a scaleUp window holds a rise back."""
    clock, metrics, ctl = setup(api, replicas=3, cpu=5, behavior={"scaleDown": {"selectPolicy": "Disabled"}})
    ctl.reconcile(KEY)
    clock.advance(400)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 3
    assert condition(hpa_status(api), "ScalingLimited")[1] == "ScaleDownLimit"


def test_scale_up_stabilization_window(api):
    """scaleUp.stabilizationWindowSeconds: the lowest recommendation of the window wins."""
    clock, metrics, ctl = setup(api, replicas=2, cpu=50, behavior={"scaleUp": {"stabilizationWindowSeconds": 60}})
    ctl.reconcile(KEY)  # recommends 2
    for name in metrics.cpu:
        metrics.cpu[name] = 100
    clock.advance(10)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 2
    assert condition(hpa_status(api), "AbleToScale")[1] == "ScaleUpStabilized"
    clock.advance(61)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 4


@pytest.mark.parametrize("replicas,min_replicas,max_replicas,expected,reason", [
    (8, 1, 5, 5, "Current number of replicas above Spec.MaxReplicas"),
    (1, 3, 5, 3, "Current number of replicas below Spec.MinReplicas"),
], ids=["above-max", "below-min"])
def test_out_of_bounds_goes_to_the_bound(api, replicas, min_replicas, max_replicas, expected, reason):
    """A target outside [min, max] is set to the bound without reading metrics."""
    clock, metrics, ctl = setup(api, replicas=replicas, pods=0, min_replicas=min_replicas, max_replicas=max_replicas)
    ctl.reconcile(KEY)
    assert replicas_of(api) == expected
    assert ("Normal", "SuccessfulRescale", f"New size: {expected}; reason: {reason}") in events(api)


def test_zero_replicas_disables_scaling(api):
    """A target scaled to 0 by hand is left alone: ScalingActive False ScalingDisabled."""
    clock, metrics, ctl = setup(api, replicas=0, pods=0)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 0
    assert condition(hpa_status(api), "ScalingActive") == (
        "False", "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")


def test_missing_metrics_is_failed_get_resource_metric(api):
    """No PodMetrics: Warning FailedGetResourceMetric, ScalingActive False, nothing scaled, TARGETS unknown."""
    clock, metrics, ctl = setup(api, replicas=2)
    metrics.cpu.clear()
    ctl.reconcile(KEY)
    assert replicas_of(api) == 2
    error = ("failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from "
             "resource metrics API")
    status = hpa_status(api)
    assert condition(status, "ScalingActive") == ("False", "FailedGetResourceMetric",
                                                  f"the HPA was unable to compute the replica count: {error}")
    assert status["currentReplicas"] == 2
    found = events(api)
    assert ("Warning", "FailedGetResourceMetric", error) in found
    assert ("Warning", "FailedComputeMetricsReplicas",
            f"invalid metrics (1 invalid out of 1), first error is: {error}") in found


def test_several_metrics_take_the_highest(api):
    """Several metrics: each proposes a count, the highest wins and names the reason."""
    memory = [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue",
                                                                             "averageValue": "1Mi"}}}]
    clock, metrics, ctl = setup(api, replicas=1, cpu=60, metrics=cpu_utilization(50) + memory)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 4  # memory: 10Mi per pod against 1Mi -> 10, limited to max(2 x 1, 4)
    status = hpa_status(api)
    assert [m["resource"]["name"] for m in status["currentMetrics"]] == ["cpu", "memory"]
    assert status["currentMetrics"][1]["resource"]["current"] == {"averageValue": "10485760"}
    assert ("Normal", "SuccessfulRescale", "New size: 4; reason: memory resource above target") in events(api)


def test_no_metrics_in_spec_defaults_to_cpu_80_percent(api):
    """An HPA naming no metric targets cpu at 80% of requests, as the API's defaulting makes it."""
    clock, metrics, ctl = setup(api, replicas=1, cpu=170, metrics=None)
    ctl.reconcile(KEY)
    assert replicas_of(api) == 3  # 170% / 80% = 2.125 -> 3


@pytest.mark.parametrize("target,message", [
    ({"apiVersion": "apps/v1", "kind": "Deployment", "name": "nope"}, 'deployments.apps "nope" not found'),
    ({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "web"},
     "could not find scale subresource for apps/v1, Resource=daemonsets in discovery information"),
], ids=["missing-target", "unscalable-kind"])
def test_failed_get_scale(api, target, message):
    """A target that is missing or has no scale subresource: AbleToScale False FailedGetScale and a Warning."""
    clock, metrics, ctl = setup(api, target=target)
    ctl.reconcile(KEY)
    assert condition(hpa_status(api), "AbleToScale") == (
        "False", "FailedGetScale", f"the HPA controller was unable to get the target's current scale: {message}")
    assert ("Warning", "FailedGetScale", message) in events(api)


def test_statefulset_and_replicaset_targets(api):
    """StatefulSets and ReplicaSets are scaled through the same scale subresource."""
    clock = Clock()
    metrics = FakeMetrics(clock)
    deployment(api, replicas=1, kind="StatefulSet")
    running_pod(api, "web-0", clock)
    metrics.cpu["web-0"] = 100
    hpa(api, metrics=cpu_utilization(50), target={"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web"})
    controller(api, clock, metrics).reconcile(KEY)
    assert replicas_of(api, "statefulsets") == 2


def test_deleted_hpa_is_forgotten(api):
    """A key whose HPA is gone is success and its history is dropped."""
    clock, metrics, ctl = setup(api)
    ctl.reconcile(KEY)
    assert KEY in ctl.history.recommendations
    api.delete(api.resource("hpa"), "web", namespace="default")
    assert ctl.reconcile(KEY) is None
    assert KEY not in ctl.history.recommendations


def test_pod_metrics_read_through_the_api(api):
    """Without a fake, the controller lists stored PodMetrics (metrics.k8s.io) by the target's selector."""
    clock = Clock()
    deployment(api, replicas=1)
    running_pod(api, "web-0", clock)
    source = FakeMetrics(clock)
    source.cpu["web-0"] = 95
    for item in source.pod_metrics("default", None):
        api.create(item)
    api.create(dict(source.pod_metrics("default", None)[0], metadata={"name": "other", "namespace": "default",
                                                                        "labels": {"app": "other"}}))
    hpa(api, metrics=cpu_utilization(50))
    controller(api, clock).reconcile(KEY)
    assert replicas_of(api) == 2
    assert hpa_status(api)["currentMetrics"][0]["resource"]["current"]["averageUtilization"] == 95


PODS_METRIC = [{"type": "Pods", "pods": {"metric": {"name": "requests_per_second"},
                                         "target": {"type": "AverageValue", "averageValue": "10"}}}]


@pytest.mark.parametrize("cpu,expected,active", [
    (90, 2, ("True", "ValidMetricFound")),
    (5, 2, ("False", "FailedGetPodsMetric")),
], ids=["valid-metric-scales-up", "invalid-metric-blocks-scale-down"])
def test_one_invalid_metric_of_several(api, cpu, expected, active):
    """An unreadable metric does not stop a scale-up the others ask for, but does stop a scale-down."""
    clock, metrics, ctl = setup(api, replicas=1 if cpu > 50 else 2, cpu=cpu,
                                metrics=cpu_utilization(50) + PODS_METRIC)
    ctl.reconcile(KEY)
    clock.advance(400)
    ctl.reconcile(KEY)
    assert replicas_of(api) == expected
    status = hpa_status(api)
    assert condition(status, "ScalingActive")[:2] == active
    assert status["currentMetrics"][1] == {"type": ""}
    assert any(e[:2] == ("Warning", "FailedGetPodsMetric") for e in events(api))
