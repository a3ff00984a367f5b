"""Pod GC: pods of nodes that are gone, and terminating pods of out-of-service nodes, are force-deleted."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from lifecycle_harness import FakeClock, Queue, exists, wait_for

from kctl.client.informer import InformerFactory
from kctl.controllers.base import ControllerContext, Recorder
from kctl.controllers.podgc import TAINT_OUT_OF_SERVICE, PodGCController, out_of_service

T0 = dt.datetime(2030, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)




def make_node(api, name: str, *, ready: str = "True", taints: list | None = None) -> dict:
    return api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                       "spec": {"taints": taints} if taints else {},
                       "status": {"conditions": [{"type": "Ready", "status": ready}]}})


def make_pod(api, name: str, node: str) -> dict:
    return api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                       "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]}})


@pytest.mark.parametrize("ready, taints, expected", [
    ("Unknown", [{"key": TAINT_OUT_OF_SERVICE, "effect": "NoExecute"}], True),
    ("False", [{"key": TAINT_OUT_OF_SERVICE, "value": "nodeshutdown", "effect": "NoSchedule"}], True),
    ("True", [{"key": TAINT_OUT_OF_SERVICE, "effect": "NoExecute"}], False),
    ("Unknown", [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}], False),
], ids=["unknown-tainted", "not-ready-any-effect", "ready-tainted", "no-out-of-service"])
def test_out_of_service(ready, taints, expected):
    """Out of service = not Ready and tainted node.kubernetes.io/out-of-service."""
    node = {"spec": {"taints": taints}, "status": {"conditions": [{"type": "Ready", "status": ready}]}}
    assert out_of_service(node) is expected


@pytest.fixture
def podgc(api):
    """A PodGCController (40 s quarantine) over synced informers, with a fake clock at T0."""
    stop = threading.Event()
    informers = InformerFactory(api)
    ctx = ControllerContext(api=api, informers=informers, recorder=Recorder(api, component="test"),
                            clock=FakeClock(T0))
    controller = PodGCController(quarantine_seconds=40)
    controller.register(ctx, Queue())
    informers.start(stop)
    wait_for(informers.has_synced, what="informers synced")
    yield controller
    stop.set()


def cached(controller, name: str, predicate=lambda p: True) -> None:
    wait_for(lambda: (p := controller.pods.get("default", name)) is not None and predicate(p), what=f"{name} cached")


def test_pods_of_a_deleted_node_are_force_deleted(api, podgc):
    """A pod whose node is gone (and stays gone for the quarantine) is removed at once, not graceful."""
    make_node(api, "n1")
    make_node(api, "n2")
    make_pod(api, "on-n1", "n1")
    make_pod(api, "on-n2", "n2")
    cached(podgc, "on-n1")
    cached(podgc, "on-n2")
    api.delete(api.resource("nodes"), "n1")
    wait_for(lambda: "default/on-n1" in podgc.queue.keys, what="a deleted node's pods are queued")
    wait_for(lambda: podgc.nodes.get("", "n1") is None, what="node deletion cached")
    assert podgc.reconcile("default/on-n1") == pytest.approx(40, abs=0.1), "quarantine first"
    assert exists(api, "pods", "on-n1")
    podgc.ctx.clock.advance(41)
    assert podgc.reconcile("default/on-n1") is None
    assert not exists(api, "pods", "on-n1"), "force-deleted: no agent is left to finish it"
    assert podgc.reconcile("default/on-n2") is None
    assert exists(api, "pods", "on-n2")


def test_node_back_within_quarantine_keeps_pod(api, podgc):
    """A pod bound before its node registered is kept once the node appears."""
    make_pod(api, "early", "late-node")
    cached(podgc, "early")
    assert podgc.reconcile("default/early") == pytest.approx(40, abs=0.1)
    make_node(api, "late-node")
    podgc.ctx.clock.advance(41)
    assert podgc.reconcile("default/early") is None
    assert exists(api, "pods", "early")


def test_terminating_pods_of_out_of_service_node(api, podgc):
    """Terminating pods on a not-Ready node tainted out-of-service go at once; live pods stay."""
    make_node(api, "n1", ready="Unknown")
    make_pod(api, "leaving", "n1")
    make_pod(api, "staying", "n1")
    api.delete(api.resource("pods"), "leaving", namespace="default")
    cached(podgc, "leaving", lambda p: p["metadata"].get("deletionTimestamp"))
    cached(podgc, "staying")
    assert podgc.reconcile("default/leaving") is None
    assert exists(api, "pods", "leaving"), "not out of service yet: its agent must finish it"
    node = api.get(api.resource("nodes"), "n1")
    node["spec"]["taints"] = [{"key": TAINT_OUT_OF_SERVICE, "value": "nodeshutdown", "effect": "NoExecute"}]
    api.update(node)
    wait_for(lambda: "default/leaving" in podgc.queue.keys, what="the tainted node's pods are queued")
    wait_for(lambda: podgc.nodes.get("", "n1")["spec"].get("taints"), what="taint cached")
    assert podgc.reconcile("default/leaving") is None
    assert not exists(api, "pods", "leaving")
    assert podgc.reconcile("default/staying") is None
    assert exists(api, "pods", "staying"), "PodGC deletes only terminating pods (the taint manager evicts)"


def test_unbound_and_missing_pods_are_success(api, podgc):
    """Not found, or not bound to a node: nothing to do."""
    assert podgc.reconcile("default/nope") is None
    api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pending", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    cached(podgc, "pending")
    assert podgc.reconcile("default/pending") is None
    assert exists(api, "pods", "pending")
