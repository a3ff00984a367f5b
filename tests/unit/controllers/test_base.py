"""Object keys and owner keys, the Recorder, and the Controller protocol."""

from __future__ import annotations

import pytest

from kctl.controllers.base import Controller, Recorder, key_of, owner_key, split_key


@pytest.mark.parametrize("obj, key", [
    ({"metadata": {"name": "web", "namespace": "default"}}, "default/web"),
    ({"metadata": {"name": "node-1"}}, "node-1"),
    ({"metadata": {"name": "n", "namespace": ""}}, "n"),
], ids=["namespaced", "cluster-scoped", "empty-namespace"])
def test_key_of_and_split_key(obj, key):
    """key_of gives "namespace/name" or "name"; split_key inverts it."""
    assert key_of(obj) == key
    meta = obj["metadata"]
    assert split_key(key) == (meta.get("namespace") or "", meta["name"])


def ref(kind: str, name: str, *, controller: bool | None = True) -> dict:
    r = {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": f"uid-{name}"}
    if controller is not None:
        r["controller"] = controller
    return r


@pytest.mark.parametrize("refs, kind, expected", [
    ([ref("ReplicaSet", "web-1")], "ReplicaSet", "default/web-1"),
    ([ref("ReplicaSet", "web-1")], "DaemonSet", None),
    ([ref("ReplicaSet", "web-1", controller=False)], "ReplicaSet", None),
    ([ref("ReplicaSet", "x", controller=None), ref("ReplicaSet", "y")], "ReplicaSet", "default/y"),
    ([], "ReplicaSet", None),
], ids=["controller", "other-kind", "not-controller", "picks-controller", "no-owner"])
def test_owner_key(refs, kind, expected):
    """owner_key is the key of the controller=true owner of the given kind, else None."""
    obj = {"metadata": {"name": "p", "namespace": "default", "ownerReferences": refs}}
    assert owner_key(obj, kind) == expected


def test_recorder_writes_an_event(api):
    """Recorder.event records a de-duplicated Event with the component as source."""
    pod = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                      "spec": {"containers": [{"name": "c", "image": "i"}]}})
    recorder = Recorder(api, component="replicaset-controller")
    recorder.event(pod, "Normal", "SuccessfulCreate", "Created pod: p")
    recorder(pod, "Normal", "SuccessfulCreate", "Created pod: p")
    events, _ = api.list(api.resource("events"), namespace="default")
    assert len(events) == 1
    assert events[0]["source"]["component"] == "replicaset-controller" and events[0]["count"] == 2


def test_controller_protocol_is_structural():
    """Any object with name, register and reconcile is a Controller."""
    class Toy:
        name = "toy"

        def register(self, ctx, queue) -> None: ...

        def reconcile(self, key: str) -> float | None: ...

    assert isinstance(Toy(), Controller)
    assert not isinstance(object(), Controller)
