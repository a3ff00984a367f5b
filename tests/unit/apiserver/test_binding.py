"""pods/binding: APIServer.bind and bind_all, the scheduler's only write to a pod's spec."""

from __future__ import annotations

import pytest

from kctl.apiserver.contract import Binding
from kctl.machinery.errors import Conflict, NotFound


def make_pod(api, name: str, **spec) -> dict:
    return api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}})


def test_bind_sets_node_and_condition(api):
    """bind writes spec.nodeName and PodScheduled=True, as one new revision."""
    pod = make_pod(api, "p")
    before = api.store.revision()
    bound = api.bind("default", "p", "node-1", uid=pod["metadata"]["uid"])
    assert bound["spec"]["nodeName"] == "node-1"
    assert [(c["type"], c["status"]) for c in bound["status"]["conditions"]] == [("PodScheduled", "True")]
    assert int(bound["metadata"]["resourceVersion"]) == before + 1
    assert api.get(api.resource("pods"), "p", namespace="default")["spec"]["nodeName"] == "node-1"


@pytest.mark.parametrize("setup, uid, error, words", [
    ("bound", None, Conflict, 'is already assigned to node "other"'),
    ("none", None, NotFound, "not found"),
    ("plain", "not-the-uid", Conflict, "does not match the UID"),
    ("deleting", None, Conflict, "is being deleted"),
], ids=["already-bound", "missing", "uid-precondition", "terminating"])
def test_bind_refused(api, setup, uid, error, words):
    """A pod already bound, gone, replaced (uid) or being deleted is not bound."""
    if setup == "bound":
        make_pod(api, "p", nodeName="other")
    elif setup in ("plain", "deleting"):
        make_pod(api, "p")
    if setup == "deleting":
        pod = api.get(api.resource("pods"), "p", namespace="default")
        pod["metadata"]["finalizers"] = ["example.com/hold"]
        api.update(pod)
        api.delete(api.resource("pods"), "p", namespace="default")
    with pytest.raises(error) as info:
        api.bind("default", "p", "node-1", uid=uid)
    assert words in str(info.value)


def test_bind_all_one_transaction_each_alone(api):
    """bind_all binds many pods in one transaction; a failing binding leaves the others."""
    for name in ("a", "b", "c"):
        make_pod(api, name)
    api.bind("default", "b", "early")
    before = api.store.revision()
    results = api.bind_all([Binding("default", "a", "n1"), Binding("default", "b", "n1"),
                            Binding("default", "c", "n2"), Binding("default", "zz", "n2")])
    assert [r.error is None for r in results] == [True, False, True, False]
    assert isinstance(results[1].error, Conflict) and isinstance(results[3].error, NotFound)
    assert api.store.revision() == before + 2
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in api.list(api.resource("pods"))[0]}
    assert nodes == {"a": "n1", "b": "early", "c": "n2"}
