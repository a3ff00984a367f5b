"""`kctl top pod|node`: stored PodMetrics/NodeMetrics printed exactly as kubectl top prints them."""

from __future__ import annotations

import pytest

MI = 1024 * 1024


def _pod_metrics(name: str, *containers: tuple[str, str, str], namespace: str = "default",
                 labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "timestamp": "2026-12-04T22:00:00Z", "window": "15s",
            "containers": [{"name": c, "usage": {"cpu": cpu, "memory": memory}} for c, cpu, memory in containers]}


def _node(name: str, *, cpu: str = "2", memory: str = "8Gi", labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "status": {"allocatable": {"cpu": cpu, "memory": memory}, "capacity": {"cpu": "4", "memory": "16Gi"}}}


def _node_metrics(name: str, cpu: str, memory: str) -> dict:
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": name},
            "timestamp": "2026-12-04T22:00:00Z", "window": "15s", "usage": {"cpu": cpu, "memory": memory}}


def _pod(name: str, namespace: str = "default") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
def stored(server):
    """Three pods' metrics in two namespaces (web-1 has two containers)."""
    server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}})
    for obj in (
        _pod_metrics("web-1", ("app", "12345678n", "3Mi"), ("side", "1m", "460Ki"), labels={"app": "web"}),
        _pod_metrics("db-0", ("db", "250m", "100Mi"), labels={"app": "db"}),
        _pod_metrics("coredns-7d8f", ("coredns", "2m", "12Mi"), namespace="kube-system"),
    ):
        server.create(obj)
    return server


@pytest.mark.parametrize("args, expected", [
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
    (("top", "pod", "--sort-by", "memory", "-A"),
     "NAMESPACE     NAME           CPU(cores)   MEMORY(bytes)   \n"
     "default       db-0           250m         100Mi           \n"
     "kube-system   coredns-7d8f   2m           12Mi            \n"
     "default       web-1          14m          3Mi             \n"),
    (("top", "pod", "-l", "app=web"),
     "NAME    CPU(cores)   MEMORY(bytes)   \n"
     "web-1   14m          3Mi             \n"),
    (("top", "pod", "web-1", "--containers"),
     "POD     NAME   CPU(cores)   MEMORY(bytes)   \n"
     "web-1   app    13m          3Mi             \n"
     "web-1   side   1m           0Mi             \n"),
    (("top", "pod", "-n", "kube-system"),
     "NAME           CPU(cores)   MEMORY(bytes)   \n"
     "coredns-7d8f   2m           12Mi            \n"),
], ids=["default-ns", "all-namespaces", "containers", "sort-cpu-no-headers", "sort-memory", "selector", "one-pod",
        "namespace"])
def test_top_pod_output(kctl, stored, args, expected) -> None:
    """Columns padded as Go's tabwriter (min 6, padding 3, trailing), CPU rounded up in m, memory down in Mi."""
    result = kctl(*args)
    assert (result.code, result.err) == (0, "")
    assert result.out == expected


@pytest.mark.parametrize("objects, args, code, err", [
    ([], ("top", "pod"), 0, "No resources found in default namespace.\n"),
    ([], ("top", "pod", "-A"), 0, "No resources found.\n"),
    ([_pod("web-1")], ("top", "pod"), 1, "error: metrics not available yet\n"),
    ([_pod("web-1")], ("top", "pod", "web-1"), 1, "error: metrics not available yet\n"),
    ([], ("top", "pod", "nope"), 3, 'Error from server (NotFound): pods "nope" not found\n'),
    ([], ("top", "pod", "--sort-by", "disk"), 1, "error: --sort-by accepts only cpu or memory\n"),
    ([], ("top", "pod", "web-1", "-l", "app=web"), 1, "error: only one of NAME or --selector can be provided\n"),
    ([], ("top", "node"), 1, "error: metrics not available yet\n"),
    ([_node("h1")], ("top", "node"), 1, "error: metrics not available yet\n"),
    ([], ("top", "node", "nope"), 3, 'Error from server (NotFound): nodes "nope" not found\n'),
], ids=["no-pods", "no-pods-anywhere", "pods-without-metrics", "pod-without-metrics", "no-such-pod", "bad-sort",
        "name-and-selector", "no-nodes", "node-without-metrics", "no-such-node"])
def test_top_errors(kctl, server, objects, args, code, err) -> None:
    """Nothing to show is kubectl's line and exit status; nothing goes to stdout."""
    for obj in objects:
        server.create(obj)
    result = kctl(*args)
    assert (result.code, result.err, result.out) == (code, err, "")


@pytest.fixture
def nodes(server):
    """h1 and h2 with metrics (allocatable 2 CPUs, 8Gi), h3 without."""
    server.create(_node("h1", labels={"zone": "a"}))
    server.create(_node("h2", labels={"zone": "b"}))
    server.create(_node("h3"))
    server.create(_node_metrics("h1", "329087452n", "2748180Ki"))
    server.create(_node_metrics("h2", "1500m", "6Gi"))
    return server


@pytest.mark.parametrize("args, expected", [
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
], ids=["all", "sort-selector", "one-capacity"])
def test_top_node_output(kctl, nodes, args, expected) -> None:
    """Node rows: usage and truncated percent of allocatable (or capacity); <unknown> for a node without metrics."""
    result = kctl(*args)
    assert (result.code, result.err) == (0, "")
    assert result.out == expected
