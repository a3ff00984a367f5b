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


def _budget(api, allowed: int) -> None:
    """Budget `web` over the pods labelled app=web, its status allowing `allowed` disruptions."""
    pdb = api.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                      "metadata": {"name": "web", "namespace": "default"},
                      "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    api.update_status({**pdb, "status": {"disruptionsAllowed": allowed, "currentHealthy": 1 + allowed,
                                         "desiredHealthy": 1, "expectedPods": 1 + allowed, "observedGeneration": 1}})


def _ready(api, name: str) -> None:
    pod = api.get(api.resource("pods"), name, namespace="default")
    api.update_status({**pod, "metadata": {**pod["metadata"]},
                       "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})


@pytest.mark.parametrize("flow", ["evict_and_wait", "delete_and_wait"])
def test_evict_and_wait_reports_through_callbacks(node, capsys, flow):
    """Both flows remove the pods to evict and report each through their callbacks, printing nothing."""
    verdicts = [v for v in drain.pods_for_deletion(drain.pods_on_node(node, "n1"), drain.DrainOptions(),
                                                   drain.daemonset_lookup(node)) if v.delete]
    evicting: list[str] = []
    evicted: list[str] = []
    getattr(drain, flow)(node, verdicts, grace_period=0, timeout=60,
                         on_evicting=evicting.append, on_evicted=evicted.append)
    assert evicting == ["default/a", "default/b"]
    assert sorted(evicted) == ["a", "b"]
    items, _ = node.list(node.resource("pods"), namespace="default")
    assert sorted(p["metadata"]["name"] for p in items) == ["bare", "elsewhere"]
    assert capsys.readouterr() == ("", "")


def test_delete_and_wait_times_out_with_the_pending_pods(node):
    """A deleted pod that never goes (grace period, no node agent) ends in DrainTimeout naming it."""
    verdicts = [drain.PodVerdict(p, True) for p in drain.pods_on_node(node, "n1") if p["metadata"]["name"] == "a"]
    with pytest.raises(drain.DrainTimeout) as caught:
        drain.delete_and_wait(node, verdicts, grace_period=30, timeout=0.5)
    assert caught.value.pending == ["a"]


def test_evict_and_wait_times_out_with_kubectls_errors(node):
    """An evicted pod that never goes ends in EvictionFailed (timed out) with kubectl's per-pod error."""
    verdicts = [drain.PodVerdict(p, True) for p in drain.pods_on_node(node, "n1") if p["metadata"]["name"] == "a"]
    with pytest.raises(drain.EvictionFailed) as caught:
        drain.evict_and_wait(node, verdicts, grace_period=30, timeout=0.5)
    assert caught.value.timed_out
    assert caught.value.errors == ['error when waiting for pod "a" terminating: global timeout reached: 500ms']


def test_a_refused_eviction_is_retried_and_reported(api):
    """The budget refuses: on_refused gets kubectl's message, the pod is tried again; once allowed it goes."""
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    pod = _pod("a")
    pod["metadata"]["labels"] = {"app": "web"}
    api.create(pod)
    _ready(api, "a")
    _budget(api, 0)
    refusals: list[tuple[str, str]] = []
    evicting: list[str] = []

    def refused(key: str, message: str) -> None:
        refusals.append((key, message))
        if len(refusals) == 2:  # the budget allows once the pod was refused twice
            pdb = api.get(api.resource("pdb"), "web", namespace="default")
            api.update_status({**pdb, "status": {**pdb["status"], "disruptionsAllowed": 1}})

    drain.evict_and_wait(api, [drain.PodVerdict(api.get(api.resource("pods"), "a", namespace="default"), True)],
                         grace_period=0, timeout=60, on_evicting=evicting.append, on_refused=refused,
                         retry_seconds=0.05)
    assert refusals == [("default/a", "Cannot evict pod as it would violate the pod's disruption budget.")] * 2
    assert evicting == ["default/a"] * 3
    assert api.find(api.resource("pods"), "a", namespace="default") is None


def test_a_budget_that_never_allows_times_out(api):
    """Refused until --timeout: EvictionFailed names the pod with kubectl's global-timeout error."""
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    pod = _pod("a")
    pod["metadata"]["labels"] = {"app": "web"}
    api.create(pod)
    _ready(api, "a")
    _budget(api, 0)
    with pytest.raises(drain.EvictionFailed) as caught:
        drain.evict_and_wait(api, [drain.PodVerdict(api.get(api.resource("pods"), "a", namespace="default"), True)],
                             grace_period=0, timeout=0.3, retry_seconds=0.05)
    assert caught.value.timed_out
    assert caught.value.errors == ['error when evicting pods/"a" -n "default": global timeout reached: 300ms']


@pytest.mark.parametrize("seconds, text", [(0.3, "300ms"), (5, "5s"), (1.5, "1.5s"), (90, "1m30s"), (3600, "1h0m0s")])
def test_go_duration(seconds, text):
    """Durations print as Go's Duration.String (kubectl's messages quote --timeout so)."""
    assert drain.go_duration(seconds) == text
