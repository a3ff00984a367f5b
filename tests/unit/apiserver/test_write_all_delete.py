"""write_all's delete op: many deletions in one transaction, each failing alone (the ReplicaSet controller's batch)."""

from __future__ import annotations

import pytest

from kctl.machinery.errors import Conflict, NotFound


def config_map(api, name: str) -> dict:
    return api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})


def ref(obj: dict, **meta) -> dict:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "metadata": {"name": obj["metadata"]["name"], "namespace": obj["metadata"].get("namespace"), **meta}}


def test_deletes_many_in_one_transaction(api):
    """Three deletions commit together: consecutive revisions, one transaction, all gone."""
    objs = [config_map(api, f"c{i}") for i in range(3)]
    before = api.store.revision()
    results = api.write_all([("delete", ref(o)) for o in objs])
    assert [(r.action, r.error) for r in results] == [("deleted", None)] * 3
    assert api.store.revision() == before + 3
    assert api.list(api.resource("configmaps"), namespace="default")[0] == []


@pytest.mark.parametrize("case, error", [
    ("missing", NotFound),
    ("stale-resource-version", Conflict),
], ids=["missing", "stale-resource-version"])
def test_one_failure_leaves_the_others(api, case, error):
    """A missing object or a stale resourceVersion precondition fails alone; the rest is deleted."""
    keep = config_map(api, "keep-going")
    target = config_map(api, "target")
    if case == "missing":
        op = ref({**target, "metadata": {**target["metadata"], "name": "ghost"}})
    else:
        api.update({**target, "data": {"k": "changed"}})
        op = ref(target, resourceVersion=target["metadata"]["resourceVersion"])
    results = api.write_all([("delete", op), ("delete", ref(keep))])
    assert isinstance(results[0].error, error)
    assert results[1].error is None and results[1].action == "deleted"
    names = [o["metadata"]["name"] for o in api.list(api.resource("configmaps"), namespace="default")[0]]
    assert names == ["target"]


def test_bound_pod_is_marked_terminating_as_delete_does(api):
    """A pod bound to an existing node waits for its agent: the batched delete only marks it, like delete."""
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
    pod = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                      "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    api.bind("default", "p", "node-1", uid=pod["metadata"]["uid"])
    (result,) = api.write_all([("delete", ref(pod))])
    assert result.error is None
    live = api.get(api.resource("pods"), "p", namespace="default")
    assert live["metadata"].get("deletionTimestamp")
