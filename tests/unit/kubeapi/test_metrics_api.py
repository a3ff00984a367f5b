"""metrics.k8s.io over the HTTPS API: discovery lists it, GET/LIST serve PodMetrics and NodeMetrics, and the real
`kubectl top pod|node` prints what `kctl top` prints (tests/cli/test_top.py holds kctl's side of the same rows)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _pod_metrics(name: str, *containers: tuple[str, str, str], namespace: str = "default",
                 labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "timestamp": "2026-12-04T22:00:00Z", "window": "15s",
            "containers": [{"name": c, "usage": {"cpu": cpu, "memory": memory}} for c, cpu, memory in containers]}


def _node(name: str, *, labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "status": {"allocatable": {"cpu": "2", "memory": "8Gi"}, "capacity": {"cpu": "4", "memory": "16Gi"}}}


def _node_metrics(name: str, cpu: str, memory: str, *, labels: dict[str, str] | None = None) -> dict:
    """A NodeMetrics as the node agent writes it (with the Node's labels, as metrics-server's)."""
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
            "metadata": {"name": name, "labels": labels or {}},
            "timestamp": "2026-12-04T22:00:00Z", "window": "15s", "usage": {"cpu": cpu, "memory": memory}}


@pytest.fixture
def metrics(kubeapi):
    """The pods and nodes of tests/cli/test_top.py, with their metrics, written through the API."""
    api = kubeapi.api
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}})
    for obj in (
        _pod_metrics("web-1", ("app", "12345678n", "3Mi"), ("side", "1m", "460Ki"), labels={"app": "web"}),
        _pod_metrics("db-0", ("db", "250m", "100Mi"), labels={"app": "db"}),
        _pod_metrics("coredns-7d8f", ("coredns", "2m", "12Mi"), namespace="kube-system"),
        _node("h1", labels={"zone": "a"}), _node("h2", labels={"zone": "b"}), _node("h3"),
        _node_metrics("h1", "329087452n", "2748180Ki", labels={"zone": "a"}),
        _node_metrics("h2", "1500m", "6Gi", labels={"zone": "b"}),
    ):
        api.create(obj)
    return kubeapi


def test_discovery_lists_the_metrics_group(metrics) -> None:
    """/apis names metrics.k8s.io/v1beta1, and its resource list has pods and nodes (get, list)."""
    groups = {g["name"]: g for g in metrics.request("GET", "/apis").json()["groups"]}
    assert groups["metrics.k8s.io"]["preferredVersion"]["groupVersion"] == "metrics.k8s.io/v1beta1"
    resources = {r["name"]: r for r in metrics.request("GET", "/apis/metrics.k8s.io/v1beta1").json()["resources"]}
    assert resources["pods"]["kind"] == "PodMetrics" and resources["pods"]["namespaced"] is True
    assert resources["nodes"]["kind"] == "NodeMetrics" and resources["nodes"]["namespaced"] is False
    assert {"get", "list"} <= set(resources["pods"]["verbs"])


@pytest.mark.parametrize(("path", "kind", "names"), [
    ("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", "PodMetricsList", ["db-0", "web-1"]),
    ("/apis/metrics.k8s.io/v1beta1/pods", "PodMetricsList", ["coredns-7d8f", "db-0", "web-1"]),
    ("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb", "PodMetricsList", ["web-1"]),
    ("/apis/metrics.k8s.io/v1beta1/nodes", "NodeMetricsList", ["h1", "h2"]),
], ids=["namespaced", "all-namespaces", "selector", "nodes"])
def test_metrics_lists(metrics, path: str, kind: str, names: list[str]) -> None:
    """LIST of PodMetrics/NodeMetrics: metrics-server's list kinds, the stored items."""
    body = metrics.request("GET", path).json()
    assert body["kind"] == kind and body["apiVersion"] == "metrics.k8s.io/v1beta1"
    assert sorted(item["metadata"]["name"] for item in body["items"]) == names


def test_metrics_get(metrics) -> None:
    """GET of one PodMetrics gives its containers' usage."""
    body = metrics.request("GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/db-0").json()
    assert body["kind"] == "PodMetrics"
    assert body["containers"] == [{"name": "db", "usage": {"cpu": "250m", "memory": "100Mi"}}]


@pytest.mark.parametrize(("args", "expected"), [
    (("top", "pod"),
     "NAME    CPU(cores)   MEMORY(bytes)   \n"
     "db-0    250m         100Mi           \n"
     "web-1   14m          3Mi             \n"),
    (("top", "pods", "-A"),
     "NAMESPACE     NAME           CPU(cores)   MEMORY(bytes)   \n"
     "default       db-0           250m         100Mi           \n"
     "default       web-1          14m          3Mi             \n"
     "kube-system   coredns-7d8f   2m           12Mi            \n"),
    (("top", "po", "--containers"),
     "POD     NAME   CPU(cores)   MEMORY(bytes)   \n"
     "db-0    db     250m         100Mi           \n"
     "web-1   app    13m          3Mi             \n"
     "web-1   side   1m           0Mi             \n"),
    (("top", "pod", "-A", "--sort-by", "cpu", "--no-headers"),
     "default       db-0           250m   100Mi   \n"
     "default       web-1          14m    3Mi     \n"
     "kube-system   coredns-7d8f   2m     12Mi    \n"),
    (("top", "pod", "-l", "app=web"),
     "NAME    CPU(cores)   MEMORY(bytes)   \n"
     "web-1   14m          3Mi             \n"),
    (("top", "node"),
     "NAME   CPU(cores)   CPU(%)      MEMORY(bytes)   MEMORY(%)   \n"
     "h1     330m         16%         2683Mi          32%         \n"
     "h2     1500m        75%         6144Mi          75%         \n"
     "h3     <unknown>    <unknown>   <unknown>       <unknown>   \n"),
    (("top", "nodes", "--sort-by", "cpu", "-l", "zone"),
     "NAME   CPU(cores)   CPU(%)   MEMORY(bytes)   MEMORY(%)   \n"
     "h2     1500m        75%      6144Mi          75%         \n"
     "h1     330m         16%      2683Mi          32%         \n"),
    (("top", "no", "h1", "--no-headers", "--show-capacity"),
     "h1    330m   8%    2683Mi   16%   \n"),
], ids=["pods", "pods-all-namespaces", "containers", "sort-cpu-no-headers", "selector", "nodes", "nodes-selector",
        "one-node-capacity"])
def test_kubectl_top_prints_as_kctl_top(metrics, args: tuple[str, ...], expected: str) -> None:
    """The real kubectl top against the HTTPS API prints these rows, and kctl top prints the same on the store."""
    result = metrics.kubectl(*args)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == expected
    env = {**os.environ, "KCTL_STORE": str(metrics.kubeconfig.parent / "kctl.db")}
    ours = subprocess.run([sys.executable, "-m", "kctl", *args], capture_output=True, text=True, env=env, timeout=60)
    assert (ours.returncode, ours.stderr, ours.stdout) == (0, "", expected)
