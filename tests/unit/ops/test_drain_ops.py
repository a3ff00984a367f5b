"""kctl.ops.drain as a library: it works on the API it is given, outside any command, and prints nothing."""

from __future__ import annotations

import pytest

from kctl.ops import drain


def _pod(name: str, *, node: str = "n1", owner: bool = True) -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "uid-web",
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox:1.36"}]}}


@pytest.fixture
def node(api):
    """Node n1 with pods a and b (owned by a ReplicaSet) and bare (no owner); pod elsewhere on n2."""
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    for p in (_pod("b"), _pod("a"), _pod("bare", owner=False), _pod("elsewhere", node="n2")):
        api.create(p)
    return api


def test_cordon_through_the_given_api(node, capsys):
    """set_unschedulable cordons once (True), then reports it already was (False); dry_run writes nothing."""
    assert drain.set_unschedulable(node, "n1", True, dry_run=True) is True
    assert not node.get(node.resource("nodes"), "n1").get("spec", {}).get("unschedulable")
    assert drain.set_unschedulable(node, "n1", True) is True
    assert drain.set_unschedulable(node, "n1", True) is False
    assert node.get(node.resource("nodes"), "n1")["spec"]["unschedulable"] is True
    assert capsys.readouterr() == ("", "")


def test_verdicts_of_the_pods_on_a_node(node):
    """pods_on_node lists the node's pods by name; the filters refuse the bare pod unless forced."""
    pods = drain.pods_on_node(node, "n1")
    assert [p["metadata"]["name"] for p in pods] == ["a", "b", "bare"]
    verdicts = drain.pods_for_deletion(pods, drain.DrainOptions(), drain.daemonset_lookup(node))
    assert drain.drain_errors(verdicts) == [f"cannot delete {drain.UNMANAGED_FATAL}: default/bare"]
    forced = drain.pods_for_deletion(pods, drain.DrainOptions(force=True), drain.daemonset_lookup(node))
    assert drain.drain_errors(forced) == [] and all(v.delete for v in forced)


def test_evict_and_wait_reports_through_callbacks(node, capsys):
    """evict_and_wait deletes the pods to evict and reports each through its callbacks, printing nothing."""
    verdicts = [v for v in drain.pods_for_deletion(drain.pods_on_node(node, "n1"), drain.DrainOptions(),
                                                   drain.daemonset_lookup(node)) if v.delete]
    evicting: list[str] = []
    evicted: list[str] = []
    drain.evict_and_wait(node, verdicts, grace_period=0, timeout=60,
                         on_evicting=evicting.append, on_evicted=evicted.append)
    assert evicting == ["default/a", "default/b"]
    assert sorted(evicted) == ["a", "b"]
    items, _ = node.list(node.resource("pods"), namespace="default")
    assert sorted(p["metadata"]["name"] for p in items) == ["bare", "elsewhere"]
    assert capsys.readouterr() == ("", "")


def test_evict_and_wait_times_out_with_the_pending_pods(node):
    """A pod that never goes (grace period, no node agent) ends in DrainTimeout naming it."""
    verdicts = [drain.PodVerdict(p, True) for p in drain.pods_on_node(node, "n1") if p["metadata"]["name"] == "a"]
    with pytest.raises(drain.DrainTimeout) as caught:
        drain.evict_and_wait(node, verdicts, grace_period=30, timeout=0.5)
    assert caught.value.pending == ["a"]
