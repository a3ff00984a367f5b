"""Endpoints controller: v1 Endpoints subsets kept in step with a Service's pods, and capped at 1000."""

from __future__ import annotations

import threading

import pytest

from lifecycle_harness import Queue, exists, wait_for
from test_endpointslice import make_node, make_pod, make_service, pod, service, with_ip

from kctl.client.informer import InformerFactory
from kctl.controllers.base import ControllerContext, Recorder
from kctl.controllers.endpoints import (OVER_CAPACITY_ANNOTATION, EndpointsController, desired_endpoints_object,
                                        endpoint_subsets, truncate_subsets)


def ips(subset: dict, field: str = "addresses") -> list[str]:
    return [a["ip"] for a in subset.get(field) or ()]


def test_ready_and_not_ready_addresses():
    """Ready pods are addresses, unready ones notReadyAddresses, terminating ones are left out."""
    pods = [pod("a", "10.244.1.3"), pod("b", "10.244.1.2", ready=False), pod("c", "10.244.1.4", terminating=True),
            pod("d", None), pod("e", "10.244.1.5", phase="Succeeded")]
    (subset,) = endpoint_subsets(service(), pods)
    assert ips(subset) == ["10.244.1.3"] and ips(subset, "notReadyAddresses") == ["10.244.1.2"]
    assert subset["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    address = subset["addresses"][0]
    assert address["nodeName"] == "n1" and address["targetRef"] == {"kind": "Pod", "namespace": "default",
                                                                     "name": "a", "uid": "uid-a"}


def test_publish_not_ready_addresses():
    """publishNotReadyAddresses lists every pod, terminating ones too, as ready addresses."""
    pods = [pod("a", "10.244.1.3"), pod("b", "10.244.1.2", ready=False), pod("c", "10.244.1.4", terminating=True)]
    (subset,) = endpoint_subsets(service(publish=True), pods)
    assert ips(subset) == ["10.244.1.2", "10.244.1.3", "10.244.1.4"] and "notReadyAddresses" not in subset


def test_subsets_group_pods_by_resolved_ports():
    """A named targetPort resolved per pod: pods serving the same numbers share a subset."""
    svc = service(ports=[{"name": "http", "port": 80, "targetPort": "web", "protocol": "TCP"},
                         {"name": "metrics", "port": 9100, "protocol": "TCP"}])
    pods = [pod("a", "10.244.1.2", ports=[{"name": "web", "containerPort": 8080}]),
            pod("b", "10.244.1.3", ports=[{"name": "web", "containerPort": 9090}]),
            pod("c", "10.244.1.4", ports=[{"name": "web", "containerPort": 8080}])]
    subsets = endpoint_subsets(svc, pods)
    got = {tuple(p["port"] for p in s["ports"]): ips(s) for s in subsets}
    assert got == {(8080, 9100): ["10.244.1.2", "10.244.1.4"], (9090, 9100): ["10.244.1.3"]}


def test_headless_without_ports_lists_addresses():
    """A headless Service without ports still gets its pods' addresses; a pod serving no port is left out."""
    (subset,) = endpoint_subsets(service(ports=[], clusterIP="None"), [pod("a", "10.244.1.2")])
    assert ips(subset) == ["10.244.1.2"] and "ports" not in subset
    assert endpoint_subsets(service(ports=[]), [pod("a", "10.244.1.2")]) == []
    obj = desired_endpoints_object(service(ports=[], clusterIP="None"), [])
    assert obj["metadata"]["labels"]["service.kubernetes.io/headless"] == "" and "subsets" not in obj


@pytest.mark.parametrize("ready, not_ready, kept_ready, kept_not_ready", [
    ([600, 600], [0, 0], 1000, 0),
    ([300, 300], [300, 100], 600, 400),
    ([1200], [50], 1000, 0),
    ([400], [200], 400, 200),
], ids=["ready-over", "ready-first-then-not-ready", "all-ready-kept-only", "under-capacity"])
def test_truncation_keeps_ready_first(ready, not_ready, kept_ready, kept_not_ready):
    """At most 1000 addresses, ready ones first, cut across subsets in proportion."""
    def addrs(n: int, tag: int) -> list[dict]:
        return [{"ip": f"10.{tag}.{i // 250}.{i % 250}"} for i in range(n)]

    subsets = []
    for i, (r, n) in enumerate(zip(ready, not_ready)):
        subset = {"ports": [{"port": 80 + i}]}
        if r:
            subset["addresses"] = addrs(r, 2 * i)
        if n:
            subset["notReadyAddresses"] = addrs(n, 2 * i + 1)
        subsets.append(subset)
    out, truncated = truncate_subsets(subsets)
    assert truncated is (sum(ready) + sum(not_ready) > 1000)
    assert sum(len(s.get("addresses") or ()) for s in out) == kept_ready
    assert sum(len(s.get("notReadyAddresses") or ()) for s in out) == kept_not_ready
    if len(ready) == 2 and ready[0] == ready[1] and truncated:
        assert len(out[0].get("addresses") or ()) == len(out[1].get("addresses") or ()), "proportional"


def test_over_capacity_annotation():
    """Over 1000 addresses the Endpoints says so; back under, the annotation goes."""
    pods = [pod(f"p{i}", f"10.244.{i // 250}.{i % 250 + 1}") for i in range(1001)]
    obj = desired_endpoints_object(service(), pods)
    assert obj["metadata"]["annotations"] == {OVER_CAPACITY_ANNOTATION: "truncated"}
    assert sum(len(s["addresses"]) for s in obj["subsets"]) == 1000
    again = desired_endpoints_object(service(), pods[:10], current=obj)
    assert "annotations" not in again["metadata"]


@pytest.fixture
def controller(api):
    """An EndpointsController over synced informers; the test calls reconcile itself."""
    stop = threading.Event()
    informers = InformerFactory(api)
    ctx = ControllerContext(api=api, informers=informers, recorder=Recorder(api, component="test"))
    ctl = EndpointsController()
    ctl.register(ctx, Queue())
    informers.start(stop)
    wait_for(informers.has_synced, what="informers synced")
    yield ctl
    stop.set()


def stored(api, name: str = "web") -> dict:
    return api.get(api.resource("endpoints"), name, namespace="default")


def settle(ctl, api, key: str = "default/web") -> None:
    """Reconcile, then wait until the cache holds what the store has."""
    ctl.reconcile(key)
    namespace, name = key.split("/")
    wait_for(lambda: not exists(api, "endpoints", name) or (ctl.endpoints.get(namespace, name) or {}).get(
        "metadata", {}).get("resourceVersion") == stored(api, name)["metadata"]["resourceVersion"], what="cached")


def test_controller_keeps_endpoints_in_step(api, controller):
    """Created with the Service's labels, updated as pods change, not rewritten when unchanged."""
    make_node(api, "n1")
    make_service(api, selector={"app": "web"})
    make_pod(api, "web-0", "10.244.1.2")
    p1 = make_pod(api, "web-1", "10.244.1.3", ready=False)
    wait_for(lambda: len(with_ip(controller)) == 2 and controller.services.get("default", "web"),
             what="cached")
    settle(controller, api)
    ep = stored(api)
    assert ep["metadata"]["labels"] == {"tier": "front", "endpoints.kubernetes.io/managed-by": "endpoint-controller"}
    assert ips(ep["subsets"][0]) == ["10.244.1.2"] and ips(ep["subsets"][0], "notReadyAddresses") == ["10.244.1.3"]
    rv = ep["metadata"]["resourceVersion"]
    settle(controller, api)
    assert stored(api)["metadata"]["resourceVersion"] == rv, "unchanged: not written"
    controller.queue.keys.clear()
    p1["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    api.update_status(p1)
    wait_for(lambda: "default/web" in controller.queue.keys, what="a pod change queues its Service")
    wait_for(lambda: controller.pods.get("default", "web-1")["status"]["conditions"][0]["status"] == "True",
             what="cached")
    settle(controller, api)
    assert ips(stored(api)["subsets"][0]) == ["10.244.1.2", "10.244.1.3"]


def test_endpoints_of_a_deleted_service_go(api, controller):
    """Our Endpoints go with their Service; a user's Endpoints of a selectorless Service stay."""
    make_service(api, selector={"app": "web"})
    make_service(api, "manual")
    api.create({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "manual", "namespace": "default"},
                "subsets": [{"addresses": [{"ip": "192.0.2.1"}], "ports": [{"port": 80}]}]})
    wait_for(lambda: controller.services.get("default", "manual"), what="cached")
    settle(controller, api)
    settle(controller, api, "default/manual")
    assert exists(api, "endpoints", "web")
    assert stored(api, "manual")["subsets"][0]["addresses"] == [{"ip": "192.0.2.1"}], "left to its user"
    api.delete(api.resource("services"), "web", namespace="default")
    api.delete(api.resource("services"), "manual", namespace="default")
    wait_for(lambda: controller.services.get("default", "web") is None, what="deletion cached")
    wait_for(lambda: controller.services.get("default", "manual") is None, what="deletion cached")
    controller.reconcile("default/web")
    controller.reconcile("default/manual")
    assert not exists(api, "endpoints", "web")
    assert exists(api, "endpoints", "manual"), "not ours: kept"
