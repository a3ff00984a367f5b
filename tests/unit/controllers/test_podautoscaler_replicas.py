"""Tests of the HPA replica calculator (kctl/controllers/podautoscaler/replicas.py), after Kubernetes' cases."""

from __future__ import annotations

import datetime as dt

import pytest

from kctl.controllers.podautoscaler import replicas as rc
from kctl.machinery.times import format_time

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


def ago(seconds: float) -> str:
    return format_time(NOW - dt.timedelta(seconds=seconds))


def pod(name: str, *, cpu: str | None = "1", memory: str | None = None, phase: str = "Running",
        ready: bool | None = True, started_ago: float | None = 3600, ready_ago: float | None = None,
        deleted: bool = False) -> dict:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    status: dict = {"phase": phase}
    if started_ago is not None:
        status["startTime"] = ago(started_ago)
    if ready_ago is None:  # a ready pod became Ready long ago; an unready one never was (since start)
        ready_ago = 3500 if ready else (started_ago or 3600) - 10
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False",
                                 "lastTransitionTime": ago(ready_ago)}]
    meta: dict = {"name": name, "namespace": "default", "labels": {"app": "web"}}
    if deleted:
        meta["deletionTimestamp"] = ago(1)
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
            "status": status}


def metrics(values: dict[str, int], *, sampled_ago: float = 1, window: float = 15) -> dict[str, rc.PodMetric]:
    return {name: rc.PodMetric(value, NOW - dt.timedelta(seconds=sampled_ago), window)
            for name, value in values.items()}


def names(count: int) -> list[str]:
    return [f"p{i}" for i in range(count)]


@pytest.mark.parametrize("current,levels,pods_kw,target,expected,utilization,average", [
    (3, [300, 500, 700], [{}, {}, {}], 30, 5, 50, 500),
    (5, [100, 300, 500, 250, 250], [{}] * 5, 50, 3, 28, 280),
    (3, [1010, 1030, 1020], [{"cpu": "900m"}, {}, {"cpu": "1100m"}], 100, 3, 102, 1020),
    (3, [300, 500, 700], [{"ready": False}, {}, {}], 30, 4, 60, 600),
    (3, [100, 500, 700], [{"phase": "Pending"}, {}, {}], 30, 4, 60, 600),
    (3, [300, 500, 700], [{"phase": "Failed"}, {}, {}], 30, 4, 60, 600),
    (3, [300, 500, 700], [{"deleted": True}, {}, {}], 30, 4, 60, 600),
    (2, [900, 900], [{}, {}], 50, 4, 90, 900),
], ids=["scale-up", "scale-down", "within-tolerance", "unready-pod-counts-zero-on-scale-up",
        "pending-pod-counts-zero-on-scale-up", "failed-pod-ignored", "deleted-pod-ignored", "double"])
def test_resource_replicas_utilization(current, levels, pods_kw, target, expected, utilization, average):
    """A Utilization target proposes ceil(ratio x counted pods), as Kubernetes' replica calculator."""
    pods = [pod(n, **kw) for n, kw in zip(names(len(levels)), pods_kw)]
    got = rc.resource_replicas(current, target, "cpu", pods, metrics(dict(zip(names(len(levels)), levels))), now=NOW)
    assert (got.replicas, got.utilization, got.average) == (expected, utilization, average)


@pytest.mark.parametrize("current,levels,target,expected", [
    (4, [900, 900, 900], 50, 6),
    (4, [100, 100, 100], 50, 3),
    (4, [600, 600, 600], 50, 4),
], ids=["missing-counts-zero-on-scale-up", "missing-counts-full-request-on-scale-down",
        "missing-flips-direction-keeps-current"])
def test_resource_replicas_missing_metrics(current, levels, target, expected):
    """A pod without a metric counts as 0 on a scale-up and as its request on a scale-down; a flip keeps current."""
    pods = [pod(n) for n in names(current)]
    got = rc.resource_replicas(current, target, "cpu", pods, metrics(dict(zip(names(current), levels))), now=NOW)
    assert got.replicas == expected


def test_resource_replicas_unready_scale_down_ignores_unready():
    """On a scale-down an unready pod is left out (not counted as 0), so the count follows the ready pods."""
    pods = [pod("p0", ready=False), pod("p1"), pod("p2")]
    got = rc.resource_replicas(3, 50, "cpu", pods, metrics({"p0": 0, "p1": 100, "p2": 100}), now=NOW)
    assert (got.replicas, got.utilization) == (1, 10)


@pytest.mark.parametrize("pod_kw,sampled_ago,unready", [
    ({"started_ago": 60, "ready_ago": 5}, 1, True),
    ({"started_ago": 60, "ready_ago": 40}, 1, False),
    ({"started_ago": 60, "ready": False, "ready_ago": 40}, 1, True),
    ({"started_ago": 600, "ready": False, "ready_ago": 590}, 1, True),
    ({"started_ago": 600, "ready": False, "ready_ago": 100}, 1, False),
    ({"started_ago": None}, 1, True),
    ({"ready": None}, 1, True),
], ids=["initializing-sample-before-a-window-after-ready", "initializing-ready-for-a-window",
        "initializing-not-ready", "never-ready-since-readiness-delay", "was-ready-later-not-ready",
        "no-start-time", "no-ready-condition"])
def test_group_pods_cpu_readiness(pod_kw, sampled_ago, unready):
    """cpu samples of starting pods count only as Kubernetes' cpu-initialization and readiness rules say."""
    groups = rc.group_pods([pod("p0", **pod_kw)], metrics({"p0": 500}, sampled_ago=sampled_ago), "cpu", now=NOW)
    assert ("p0" in groups.unready) is unready
    assert groups.ready == (0 if unready else 1)


def test_group_pods_memory_ignores_readiness():
    """Readiness rules apply to cpu only: an unready pod's memory sample counts."""
    groups = rc.group_pods([pod("p0", ready=False, started_ago=10, ready_ago=5)], metrics({"p0": 5}), "memory",
                           now=NOW)
    assert groups.ready == 1 and not groups.unready


@pytest.mark.parametrize("current,levels,target_milli,expected,average", [
    (3, [300, 500, 700], 200, 8, 500),
    (3, [190, 200, 210], 200, 3, 200),
    (4, [100, 100, 100, 100], 200, 2, 100),
], ids=["scale-up", "within-tolerance", "scale-down"])
def test_raw_resource_replicas_average_value(current, levels, target_milli, expected, average):
    """An AverageValue target compares the average usage per pod with the target."""
    pods = [pod(n) for n in names(len(levels))]
    got = rc.raw_resource_replicas(current, target_milli, "cpu", pods, metrics(dict(zip(names(len(levels)), levels))),
                                   now=NOW)
    assert (got.replicas, got.utilization, got.average) == (expected, None, average)


def test_raw_resource_replicas_missing_counts_target_on_scale_down():
    """For an AverageValue target a pod without a metric counts as using the target on a scale-down."""
    pods = [pod(n) for n in names(4)]
    got = rc.raw_resource_replicas(4, 200, "cpu", pods, metrics({"p0": 0, "p1": 0, "p2": 0}), now=NOW)
    assert got.replicas == 1  # (0+0+0+200)/4 = 50 -> ratio .25 -> ceil(1.0)


def test_memory_utilization():
    """Memory requests and usage are compared in milli-bytes, as Kubernetes' MilliValue."""
    pods = [pod(n, cpu=None, memory="100Mi") for n in names(2)]
    usage = rc.milli_value("150Mi")
    got = rc.resource_replicas(2, 50, "memory", pods, metrics({"p0": usage, "p1": usage}), now=NOW)
    assert (got.replicas, got.utilization) == (6, 150)


@pytest.mark.parametrize("pods,values,message", [
    ([], {}, "no pods returned by selector while calculating replica count"),
    ([pod("p0", ready=False)], {"p0": 100}, "did not receive metrics for targeted pods (pods might be unready)"),
    ([pod("p0", cpu=None)], {"p0": 100}, "missing request for cpu in container c of Pod p0"),
    ([pod("p0")], {"other": 100}, "no metrics returned matched known pods"),
], ids=["no-pods", "all-unready", "missing-request", "metrics-of-other-pods"])
def test_resource_replicas_errors(pods, values, message):
    """The calculator's errors carry Kubernetes' wording (they become Events and conditions)."""
    with pytest.raises(rc.MetricsError, match=None) as caught:
        rc.resource_replicas(1, 50, "cpu", pods, metrics(values), now=NOW)
    assert str(caught.value) == message


def test_pod_metrics_info_sums_containers_and_skips_incomplete_pods():
    """PodMetrics become per-pod sums in milli-units; a pod with a container lacking the resource is left out."""
    items = [
        {"metadata": {"name": "a"}, "timestamp": ago(3), "window": "15s",
         "containers": [{"name": "x", "usage": {"cpu": "120m", "memory": "3Mi"}},
                        {"name": "y", "usage": {"cpu": "5000000n", "memory": "1Ki"}}]},
        {"metadata": {"name": "b"}, "timestamp": ago(2), "window": "2s",
         "containers": [{"name": "x", "usage": {"memory": "1Mi"}}]},
        {"metadata": {"name": "c"}, "timestamp": ago(2), "window": "2s", "containers": []},
    ]
    info, first = rc.pod_metrics_info(items, "cpu")
    assert set(info) == {"a"} and info["a"].value == 125 and info["a"].window == 15.0
    assert first == NOW - dt.timedelta(seconds=3)
    memory, _ = rc.pod_metrics_info(items, "memory")
    assert memory["a"].value == (3 * 1024 * 1024 + 1024) * 1000 and memory["b"].value == 1024 * 1024 * 1000
