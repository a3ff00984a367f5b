"""The DaemonSet controller with the manager and fake nodes: placement, node changes, rolling update."""

from __future__ import annotations

import copy

import pytest

from lifecycle_harness import fake_kubelet, running, wait_for

from kctl.machinery.errors import Conflict
from kctl.controllers.daemonset import HASH_LABEL, DaemonSetController, template_hash


def daemonset(*, pod_spec: dict | None = None, strategy: dict | None = None, name: str = "agent") -> dict:
    spec = {"containers": [{"name": "agent", "image": "busybox:1"}], **(pod_spec or {})}
    body = {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}
    if strategy is not None:
        body["updateStrategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "default"},
            "spec": body}


def live_pods(api, app: str = "agent") -> list[dict]:
    pods, _ = api.list(api.resource("pods"), namespace="default")
    return [p for p in pods if (p["metadata"].get("labels") or {}).get("app") == app
            and not p["metadata"].get("deletionTimestamp")]


def placement(api, app: str = "agent") -> list[str]:
    return sorted(p["spec"]["nodeName"] for p in live_pods(api, app))


def mark_failed(api, pod: dict) -> dict:
    """Write phase Failed, retrying when the fake kubelet wrote the pod's status meanwhile."""
    for _ in range(20):
        failed = copy.deepcopy(api.get(api.resource("pods"), pod["metadata"]["name"], namespace="default"))
        failed["status"] = {"phase": "Failed"}
        try:
            return api.update_status(failed)
        except Conflict:
            continue
    raise AssertionError("could not mark the pod Failed: 20 conflicts")


def add_node(api, name: str, *, labels: dict | None = None, taints: list | None = None) -> dict:
    return api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
                       "spec": {"taints": taints or []}})


def ds_status(api, name: str = "agent") -> dict:
    return api.get(api.resource("ds"), name, namespace="default").get("status") or {}


def test_one_pod_per_node_follows_nodes(api):
    """Every node gets one bound pod; a new node gets one; a removed node's pod goes; status counts."""
    with fake_kubelet(api, ["n1", "n2", "n3"]):
        with running(api, [DaemonSetController()]):
            api.create(daemonset())
            wait_for(lambda: placement(api) == ["n1", "n2", "n3"], what="a pod on each node")
            wait_for(lambda: ds_status(api).get("numberReady") == 3, what="status counts ready pods")
            status = ds_status(api)
            assert status["desiredNumberScheduled"] == 3 and status["currentNumberScheduled"] == 3
            assert status["updatedNumberScheduled"] == 3 and status["numberMisscheduled"] == 0
            assert status["numberAvailable"] == 3 and status["observedGeneration"] == 1
            pod = live_pods(api)[0]
            terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [pod["spec"]["nodeName"]]
            add_node(api, "n4")
            wait_for(lambda: placement(api) == ["n1", "n2", "n3", "n4"], what="the new node gets a pod")
            api.delete(api.resource("nodes"), "n2")
            wait_for(lambda: placement(api) == ["n1", "n3", "n4"], what="the removed node's pod goes")
            wait_for(lambda: ds_status(api).get("desiredNumberScheduled") == 3, what="status follows nodes")


def test_node_selector_and_label_changes(api):
    """Only labelled nodes run the pod; relabelling a node adds or removes its pod."""
    with fake_kubelet(api, ["n1", "n2"]):
        node = api.get(api.resource("nodes"), "n1")
        node["metadata"].setdefault("labels", {})["disk"] = "ssd"
        api.update(node)
        with running(api, [DaemonSetController()]):
            api.create(daemonset(pod_spec={"nodeSelector": {"disk": "ssd"}}))
            wait_for(lambda: placement(api) == ["n1"], what="pod on the ssd node only")
            n2 = api.get(api.resource("nodes"), "n2")
            n2["metadata"].setdefault("labels", {})["disk"] = "ssd"
            api.update(n2)
            wait_for(lambda: placement(api) == ["n1", "n2"], what="relabelled node gets a pod")
            n1 = api.get(api.resource("nodes"), "n1")
            n1["metadata"]["labels"]["disk"] = "hdd"
            api.update(n1)
            wait_for(lambda: placement(api) == ["n2"], what="pod leaves the node that lost the label")


@pytest.mark.parametrize("taint, tolerations, expected", [
    ({"key": "dedicated", "value": "db", "effect": "NoSchedule"}, None, ["n1"]),
    ({"key": "dedicated", "value": "db", "effect": "NoSchedule"},
     [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}], ["n1", "tainted"]),
    ({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}, None, ["n1", "tainted"]),
], ids=["untolerated", "tolerated", "default-toleration"])
def test_taints(api, taint, tolerations, expected):
    """A tainted node runs the pod only when the taint is tolerated (defaults included)."""
    with fake_kubelet(api, ["n1"]):
        add_node(api, "tainted", taints=[taint])
        with running(api, [DaemonSetController()]):
            api.create(daemonset(pod_spec={"tolerations": tolerations} if tolerations else None))
            wait_for(lambda: ds_status(api).get("desiredNumberScheduled") == len(expected)
                     and placement(api) == expected, what=f"pods on {expected}")


def test_noexecute_taint_evicts_running_pod(api):
    """A NoExecute taint added to a node removes its daemon pod; NoSchedule would not."""
    with fake_kubelet(api, ["n1", "n2"]):
        with running(api, [DaemonSetController()]):
            api.create(daemonset())
            wait_for(lambda: placement(api) == ["n1", "n2"], what="pods on both nodes")
            node = api.get(api.resource("nodes"), "n1")
            node.setdefault("spec", {})["taints"] = [{"key": "x", "effect": "NoSchedule"}]
            api.update(node)
            wait_for(lambda: ds_status(api).get("desiredNumberScheduled") == 1, what="n1 no longer desired")
            assert placement(api) == ["n1", "n2"], "NoSchedule keeps the running pod"
            assert ds_status(api)["numberMisscheduled"] == 1
            node = api.get(api.resource("nodes"), "n1")
            node["spec"]["taints"] = [{"key": "x", "effect": "NoExecute"}]
            api.update(node)
            wait_for(lambda: placement(api) == ["n2"], what="NoExecute evicts")


def _unavailable_over_time(api, initial: list[dict], since: int, nodes: int) -> list[int]:
    """Replay the change log from `initial` pods: after each pod change, nodes without a Ready live pod."""
    pods: dict[str, dict] = {p["metadata"]["name"]: p for p in initial}
    counts = []
    for change in api.store.changes(since, limit=1_000_000):
        if change.kind != "Pod":
            continue
        if change.type == "DELETED":
            pods.pop(change.name, None)
        else:
            pods[change.name] = change.obj
        ready_nodes = {p["spec"].get("nodeName") for p in pods.values()
                       if not p["metadata"].get("deletionTimestamp")
                       and any(c.get("type") == "Ready" and c.get("status") == "True"
                               for c in (p.get("status") or {}).get("conditions") or ())}
        counts.append(nodes - len(ready_nodes))
    return counts


@pytest.mark.parametrize("max_unavailable, nodes", [(1, 4), (2, 5), ("50%", 4)], ids=["one", "two", "percent"])
def test_rolling_update_never_exceeds_max_unavailable(api, max_unavailable, nodes):
    """A new image rolls to every node; at no change are more than maxUnavailable nodes without a Ready pod."""
    names = [f"n{i}" for i in range(nodes)]
    with fake_kubelet(api, names):
        with running(api, [DaemonSetController()]):
            api.create(daemonset(strategy={"type": "RollingUpdate",
                                           "rollingUpdate": {"maxUnavailable": max_unavailable}}))
            wait_for(lambda: ds_status(api).get("numberAvailable") == nodes, what="first rollout ready")
            initial, start = api.list(api.resource("pods"), namespace="default")
            ds = api.get(api.resource("ds"), "agent", namespace="default")
            ds["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"
            new_hash = template_hash(ds)
            api.update(ds)
            wait_for(lambda: ds_status(api).get("updatedNumberScheduled") == nodes
                     and ds_status(api).get("numberAvailable") == nodes
                     and all(p["metadata"]["labels"][HASH_LABEL] == new_hash for p in live_pods(api))
                     and len(live_pods(api)) == nodes, what="rolled to the new template")
    limit = max_unavailable if isinstance(max_unavailable, int) else -(-nodes * int(max_unavailable[:-1]) // 100)
    counts = _unavailable_over_time(api, initial, start, nodes)
    assert counts and max(counts) <= limit, counts
    assert max(counts) >= 1, "the rollout did replace pods"
    assert all(p["spec"]["containers"][0]["image"] == "busybox:2" for p in live_pods(api))


def test_on_delete_replaces_only_deleted_pods(api):
    """OnDelete: a template change leaves pods alone until one is deleted; its replacement is new."""
    with fake_kubelet(api, ["n1", "n2"]):
        with running(api, [DaemonSetController()]):
            api.create(daemonset(strategy={"type": "OnDelete"}))
            wait_for(lambda: ds_status(api).get("numberReady") == 2, what="pods ready")
            ds = api.get(api.resource("ds"), "agent", namespace="default")
            ds["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"
            api.update(ds)
            wait_for(lambda: ds_status(api).get("observedGeneration") == 2, what="new generation seen")
            assert ds_status(api)["updatedNumberScheduled"] == 0
            victim = next(p for p in live_pods(api) if p["spec"]["nodeName"] == "n1")
            api.delete(api.resource("pods"), victim["metadata"]["name"], namespace="default")
            wait_for(lambda: ds_status(api).get("updatedNumberScheduled") == 1
                     and placement(api) == ["n1", "n2"], what="n1's pod replaced with the new template")
    images = {p["spec"]["nodeName"]: p["spec"]["containers"][0]["image"] for p in live_pods(api)}
    assert images == {"n1": "busybox:2", "n2": "busybox:1"}


def test_adopts_orphans_and_replaces_failed_pods(api):
    """A matching orphan pod on a node is adopted (no second pod there); a Failed pod is replaced."""
    with fake_kubelet(api, ["n1", "n2"]):
        orphan = api.create({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": "hand-made", "namespace": "default", "labels": {"app": "agent"}},
                             "spec": {"nodeName": "n1", "containers": [{"name": "agent", "image": "busybox:1"}]}})
        with running(api, [DaemonSetController()]):
            api.create(daemonset(strategy={"type": "OnDelete"}))
            wait_for(lambda: placement(api) == ["n1", "n2"], what="one pod per node")
            adopted = api.get(api.resource("pods"), "hand-made", namespace="default")
            assert adopted["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
            assert adopted["metadata"]["uid"] == orphan["metadata"]["uid"]
            failed = mark_failed(api, next(p for p in live_pods(api) if p["spec"]["nodeName"] == "n2"))
            wait_for(lambda: "n2" in placement(api) and failed["metadata"]["name"] not in
                     [p["metadata"]["name"] for p in live_pods(api)], what="failed pod replaced")
