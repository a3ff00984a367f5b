"""The garbage collector's cascades over a hand-built Deployment -> ReplicaSet -> Pods chain."""

from __future__ import annotations

import pytest

from lifecycle_harness import deployment_chain, exists, fake_kubelet, owner_ref, running, wait_for

from kctl.controllers.garbagecollector import GarbageCollector


def deleted_at(api, since: int) -> dict[tuple[str, str], int]:
    """(kind, name) -> revision of its DELETED change, from the store's change log."""
    return {(c.kind, c.name): c.revision for c in api.store.changes(since, limit=100_000) if c.type == "DELETED"}


def names(api, resource: str) -> list[str]:
    items, _ = api.list(api.resource(resource), namespace="default")
    return sorted(o["metadata"]["name"] for o in items)


def test_background_deletes_the_whole_chain(api):
    """Deleting the Deployment in the background removes its ReplicaSet, then the ReplicaSet's Pods."""
    deployment_chain(api, pods=3)
    with running(api, [GarbageCollector()]):
        api.delete(api.resource("deploy"), "web", propagation="Background")
        wait_for(lambda: not names(api, "rs") and not names(api, "pods"), what="chain collected")


@pytest.mark.parametrize("bound", [False, True], ids=["unbound-pods", "pods-on-fake-node"])
def test_foreground_removes_owner_after_blocking_dependents(api, bound):
    """Foreground: pods go first, then the ReplicaSet, then the Deployment (finalizers in between)."""
    nodes = ["node-1"] if bound else None
    with fake_kubelet(api, nodes or []):
        start = api.store.revision()
        deployment_chain(api, pods=3, nodes=nodes)
        with running(api, [GarbageCollector()]):
            marked = api.delete(api.resource("deploy"), "web", propagation="Foreground")
            assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
            wait_for(lambda: not exists(api, "deploy", "web"), what="deployment removed")
    gone = deleted_at(api, start)
    pods = [gone[("Pod", f"web-1-{i}")] for i in range(3)]
    assert max(pods) < gone[("ReplicaSet.apps", "web-1")] < gone[("Deployment.apps", "web")]


def test_foreground_waits_only_for_blocking_dependents(api):
    """A dependent without blockOwnerDeletion is deleted but does not hold its owner back."""
    owner = api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}})
    api.create({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "loose", "ownerReferences": [owner_ref(owner, block=False)],
                             "finalizers": ["example.com/hold"]}})
    with running(api, [GarbageCollector()]):
        api.delete(api.resource("cm"), "owner", propagation="Foreground")
        wait_for(lambda: not exists(api, "cm", "owner"), what="owner removed")
        wait_for(lambda: api.get(api.resource("cm"), "loose", namespace="default")["metadata"]
                 .get("deletionTimestamp"), what="the non-blocking dependent deleted too")


def test_orphan_keeps_dependents_without_the_reference(api):
    """Orphan: the ReplicaSet stays, without its ownerReference; its pods keep theirs."""
    _, rs, _ = deployment_chain(api, pods=2)
    with running(api, [GarbageCollector()], workers=1):  # one worker: FIFO, so the sentinel comes last
        api.delete(api.resource("deploy"), "web", propagation="Orphan")
        assert not exists(api, "deploy", "web")
        # a dangling chain made after the orphaning: once it is collected, the GC has seen the orphans
        ghost = api.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "ghost", "ownerReferences": [
                                {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "no-such-uid"}]}})
        assert ghost
        wait_for(lambda: not exists(api, "cm", "ghost"), what="sentinel collected")
    kept = api.get(api.resource("rs"), "web-1", namespace="default")
    assert "ownerReferences" not in kept["metadata"]
    assert names(api, "pods") == ["web-1-0", "web-1-1"]
    for pod in api.list(api.resource("pods"), namespace="default")[0]:
        assert pod["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]


def test_orphan_finalizer_set_by_a_client_is_honoured(api):
    """An owner carrying the `orphan` finalizer releases its dependents, then goes."""
    owner = api.create({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "owner", "finalizers": ["orphan"]}})
    api.create({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "child", "ownerReferences": [owner_ref(owner)]}})
    with running(api, [GarbageCollector()]):
        api.delete(api.resource("cm"), "owner")
        wait_for(lambda: not exists(api, "cm", "owner"), what="owner removed")
    child = api.get(api.resource("cm"), "child", namespace="default")
    assert "ownerReferences" not in child["metadata"]


def test_dangling_dependents_are_collected_at_start_up(api):
    """Dependents whose owners vanished while the daemon was down are collected when it starts."""
    _, rs, _ = deployment_chain(api, pods=2)
    api.delete(api.resource("deploy"), "web", propagation="Background")  # no GC running
    keeper = api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keeper"}})
    api.create({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "two-owners", "ownerReferences": [
                    owner_ref(keeper), {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "gone-uid"}]}})
    assert exists(api, "rs", "web-1")
    with running(api, [GarbageCollector()]):
        wait_for(lambda: not names(api, "rs") and not names(api, "pods"), what="dangling chain collected")
        wait_for(lambda: len(api.get(api.resource("cm"), "two-owners", namespace="default")["metadata"]
                             ["ownerReferences"]) == 1, what="dangling reference dropped")
    refs = api.get(api.resource("cm"), "two-owners", namespace="default")["metadata"]["ownerReferences"]
    assert refs == [owner_ref(keeper)]


def test_a_live_owner_keeps_its_dependents(api):
    """An owner that exists keeps its dependents, even if it reached no cache yet."""
    deployment_chain(api, pods=2)
    with running(api, [GarbageCollector()], workers=1):  # one worker: FIFO, so the sentinel comes last
        ghost = api.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "ghost", "ownerReferences": [
                                {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "no-such-uid"}]}})
        assert ghost
        wait_for(lambda: not exists(api, "cm", "ghost"), what="sentinel collected")
    assert names(api, "rs") == ["web-1"]
    assert names(api, "pods") == ["web-1-0", "web-1-1"]
