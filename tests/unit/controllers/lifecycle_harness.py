"""Helpers for the lifecycle controllers' tests (GC, namespace, event TTL, DaemonSet).

They run the real ControllerManager over the real store and wait for the store to reach
a state; the wait's time limit only turns a hang into a failure, it asserts no timing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from typing import Iterator

from kctl.testing.waiting import WAIT_SECONDS, wait_for  # noqa: F401  (tests import them from here)



@contextlib.contextmanager
def running(api, controllers: list, **kwargs) -> Iterator[object]:
    """The controller manager running `controllers` until the block ends."""
    from kctl.controllers.manager import ControllerManager

    stop = threading.Event()
    kwargs.setdefault("leader_election", False)
    manager = ControllerManager(api, controllers, **kwargs)
    manager.start(stop)
    try:
        yield manager
    finally:
        stop.set()
        manager.stop()


def exists(api, resource: str, name: str, *, namespace: str | None = "default") -> bool:
    from kctl.machinery.errors import NotFound

    try:
        api.get(api.resource(resource), name, namespace=namespace)
        return True
    except NotFound:
        return False


def owner_ref(owner: dict, *, controller: bool = True, block: bool = True) -> dict:
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": controller, "blockOwnerDeletion": block}


POD_TEMPLATE = {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}


def deployment_chain(api, *, pods: int = 3, nodes: list[str] | None = None,
                     namespace: str = "default") -> tuple[dict, dict, list[dict]]:
    """A Deployment -> ReplicaSet -> Pods chain built by hand with ownerReferences (no controllers)."""
    deploy = api.create({"apiVersion": "apps/v1", "kind": "Deployment",
                         "metadata": {"name": "web", "namespace": namespace},
                         "spec": {"replicas": pods, "selector": {"matchLabels": {"app": "web"}},
                                  "template": POD_TEMPLATE}})
    rs = api.create({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                     "metadata": {"name": "web-1", "namespace": namespace, "ownerReferences": [owner_ref(deploy)]},
                     "spec": {"replicas": pods, "selector": {"matchLabels": {"app": "web"}},
                              "template": POD_TEMPLATE}})
    made = []
    for i in range(pods):
        spec = {"containers": [{"name": "web", "image": "nginx"}]}
        if nodes:
            spec["nodeName"] = nodes[i % len(nodes)]
        made.append(api.create({"apiVersion": "v1", "kind": "Pod",
                                "metadata": {"name": f"web-1-{i}", "namespace": namespace,
                                             "labels": {"app": "web"}, "ownerReferences": [owner_ref(rs)]},
                                "spec": spec}))
    return deploy, rs, made


@contextlib.contextmanager
def fake_kubelet(api, nodes: list[str], **kwargs) -> Iterator[object]:
    """kctl.testing.fake_kubelet's fake Nodes, running until the block ends (nothing when no nodes)."""
    if not nodes:
        yield None
        return
    from kctl.testing.fake_kubelet import FakeKubelet

    stop = threading.Event()
    kubelet = FakeKubelet(api, nodes=nodes, **kwargs)
    kubelet.start(stop)
    try:
        yield kubelet
    finally:
        stop.set()
        stopper = getattr(kubelet, "stop", None)
        if callable(stopper):
            stopper()


class FakeClock:
    """A clock that moves only when told."""

    def __init__(self, now: dt.datetime) -> None:
        self.value = now

    def __call__(self) -> float:
        return self.value.timestamp()

    def advance(self, seconds: float) -> None:
        self.value += dt.timedelta(seconds=seconds)


class Queue:
    """Collects what a controller queues; the test calls reconcile itself."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def add(self, key: str) -> None:
        self.keys.append(key)

    def add_after(self, key: str, delay: float) -> None:
        self.keys.append(key)


def renew_lease(api, name: str, when: dt.datetime) -> str:
    """Create or renew kube-node-lease/<name> with renewTime `when`, as an agent does; returns it."""
    from kctl.machinery.errors import NotFound

    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    rt = api.resource("leases")
    try:
        lease = api.get(rt, name, namespace="kube-node-lease")
    except NotFound:
        try:
            api.get(api.resource("namespaces"), "kube-node-lease")
        except NotFound:
            api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-node-lease"}})
        api.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": name, "namespace": "kube-node-lease"},
                    "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": stamp}})
        return stamp
    lease["spec"]["renewTime"] = stamp
    api.update(lease)
    return stamp


def post_node_ready(api, name: str, ready: str, when: dt.datetime) -> dict:
    """What an agent's status post writes: the Ready condition with a new lastHeartbeatTime."""
    from kctl.machinery.times import format_time

    node = api.get(api.resource("nodes"), name)
    node.setdefault("status", {})["conditions"] = [{
        "type": "Ready", "status": ready, "reason": "KubeletReady", "message": "ok",
        "lastHeartbeatTime": format_time(when), "lastTransitionTime": format_time(when)}]
    return api.update_status(node)
