"""Node IPAM: every Node gets a podCIDR from the cluster CIDR, kept for its life, freed when it goes."""

from __future__ import annotations

import threading

import pytest

from lifecycle_harness import Queue, running, wait_for

from kctl.client.informer import InformerFactory
from kctl.controllers.base import ControllerContext, Recorder
from kctl.controllers.nodeipam import REASON_CIDR_NOT_AVAILABLE, CIDRSet, NodeIPAMController, pod_cidrs


def make_node(api, name: str, *, pod_cidr: str | None = None) -> dict:
    spec = {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]} if pod_cidr else {}
    return api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec})


def node_cidr(api, name: str) -> list[str]:
    return pod_cidrs(api.get(api.resource("nodes"), name))


@pytest.mark.parametrize("cluster, mask, steps, expected", [
    ("10.244.0.0/16", 24, ["next", "next", "next"], ["10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24"]),
    ("10.244.0.0/16", 24, ["occupy 10.244.0.0/24", "next"], [True, "10.244.1.0/24"]),
    ("10.244.0.0/16", 24, ["occupy 10.244.0.0/23", "next"], [True, "10.244.2.0/24"]),
    ("10.244.0.0/16", 24, ["occupy 10.99.0.0/24"], [False]),
    ("10.244.0.0/29", 30, ["next", "next", "next"], ["10.244.0.0/30", "10.244.0.4/30", None]),
    ("10.244.0.0/29", 30, ["next", "next", "release 10.244.0.0/30", "next"],
     ["10.244.0.0/30", "10.244.0.4/30", None, "10.244.0.0/30"]),
], ids=["in-order", "skips-occupied", "occupy-wider", "outside-cluster", "exhausted", "freed-reused"])
def test_cidr_set(cluster, mask, steps, expected):
    """The subnet set hands out free subnets in order, honours occupied ones, and reuses freed ones."""
    cidrs = CIDRSet(cluster, mask)
    got = []
    for step in steps:
        verb, _, arg = step.partition(" ")
        if verb == "next":
            got.append(cidrs.allocate_next())
        elif verb == "occupy":
            got.append(cidrs.occupy(arg))
        else:
            got.append(cidrs.release(arg))
    assert got == expected


@pytest.fixture
def ipam(api):
    """A NodeIPAMController for 10.244.0.0/23 by /24 (two subnets) over synced informers; the test reconciles."""
    stop = threading.Event()
    informers = InformerFactory(api)
    ctx = ControllerContext(api=api, informers=informers, recorder=Recorder(api, component="test"))
    controller = NodeIPAMController(cluster_cidr="10.244.0.0/23", node_cidr_mask_size=24)
    controller.register(ctx, Queue())
    informers.start(stop)
    wait_for(informers.has_synced, what="informers synced")
    yield controller
    stop.set()


def cached(controller, name: str, predicate=lambda n: True) -> None:
    wait_for(lambda: (n := controller.nodes.get("", name)) is not None and predicate(n), what=f"node {name} cached")


def test_nodes_get_distinct_subnets_and_keep_them(api, ipam):
    """Each Node gets its own /24; reconciling again changes nothing."""
    make_node(api, "n1")
    make_node(api, "n2")
    cached(ipam, "n1")
    cached(ipam, "n2")
    ipam.reconcile("n1")
    ipam.reconcile("n2")
    assert {node_cidr(api, "n1")[0], node_cidr(api, "n2")[0]} == {"10.244.0.0/24", "10.244.1.0/24"}
    first = node_cidr(api, "n1")
    cached(ipam, "n1", lambda n: pod_cidrs(n) == first)
    assert ipam.reconcile("n1") is None
    assert node_cidr(api, "n1") == first
    assert api.get(api.resource("nodes"), "n1")["spec"]["podCIDR"] == first[0]


def test_registered_node_keeps_its_pod_cidr(api, ipam):
    """A Node that comes with a podCIDR keeps it, and that subnet is not given to another Node."""
    make_node(api, "old", pod_cidr="10.244.1.0/24")
    make_node(api, "new")
    cached(ipam, "old")
    cached(ipam, "new")
    ipam.reconcile("old")
    ipam.reconcile("new")
    assert node_cidr(api, "old") == ["10.244.1.0/24"]
    assert node_cidr(api, "new") == ["10.244.0.0/24"]


def test_exhausted_range_records_event_and_deleted_node_frees_its_subnet(api, ipam):
    """With no subnet left a Node gets a CIDRNotAvailable Event; a deleted Node's subnet then goes to it."""
    for name in ("a", "b", "c"):
        make_node(api, name)
        cached(ipam, name)
    assert ipam.reconcile("a") is None and ipam.reconcile("b") is None
    assert ipam.reconcile("c") > 0, "looked at again later"
    assert node_cidr(api, "c") == []
    events = [e for e in api.list(api.resource("events"), namespace="default")[0]
              if e.get("reason") == REASON_CIDR_NOT_AVAILABLE]
    assert events and events[0]["message"] == f"Node c status is now: {REASON_CIDR_NOT_AVAILABLE}"
    freed = node_cidr(api, "a")[0]
    ipam.queue.keys.clear()
    api.delete(api.resource("nodes"), "a")
    wait_for(lambda: "c" in ipam.queue.keys, what="the waiting node is queued again")
    ipam.reconcile("c")
    assert node_cidr(api, "c") == [freed]


def test_stale_cache_does_not_overwrite(api, ipam):
    """When the store already has a podCIDR the cache has not seen, the Node keeps the stored one."""
    make_node(api, "n1")
    cached(ipam, "n1")
    api.patch(api.resource("nodes"), "n1", {"spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]}},
              patch_type="merge")
    ipam.reconcile("n1")
    assert node_cidr(api, "n1") == ["10.244.1.0/24"]


def test_controller_in_the_manager(api):
    """Run by the controller manager, every Node gets a podCIDR without being asked."""
    make_node(api, "h1")
    with running(api, [NodeIPAMController()]):
        make_node(api, "h2")
        wait_for(lambda: node_cidr(api, "h1") and node_cidr(api, "h2"), what="both nodes have a podCIDR")
    assert sorted(node_cidr(api, "h1") + node_cidr(api, "h2")) == ["10.244.0.0/24", "10.244.1.0/24"]
