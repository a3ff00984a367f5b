"""ServiceLB: a LoadBalancer Service's status.loadBalancer.ingress is the Ready, schedulable Nodes' InternalIPs."""

from __future__ import annotations

import threading

import pytest

from lifecycle_harness import Queue, running, wait_for

from kctl.client.informer import InformerFactory
from kctl.controllers.base import ControllerContext, Recorder
from kctl.controllers.servicelb import ServiceLBController, desired_status, ingress_for
from kctl.daemon.controllers import CONTROLLER_NAMES


def node(name: str, ip: str | None, *, ready: bool = True, unschedulable: bool = False) -> dict:
    """A Node as the heartbeat writes it."""
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if ip:
        status["addresses"] = [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]
    spec = {"unschedulable": True} if unschedulable else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec, "status": status}


def service(type_: str = "LoadBalancer", *, status: dict | None = None, **spec) -> dict:
    body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": type_, "selector": {"app": "web"}, "ports": [{"port": 80, "protocol": "TCP"}], **spec}}
    if status is not None:
        body["status"] = status
    return body


def ingress(*ips: str) -> dict:
    return {"loadBalancer": {"ingress": [{"ip": ip, "ipMode": "VIP"} for ip in ips]}}


@pytest.mark.parametrize("nodes, expected", [
    ([node("h2", "10.77.0.12"), node("h1", "10.77.0.11"), node("h10", "10.77.0.9")],
     ["10.77.0.9", "10.77.0.11", "10.77.0.12"]),
    ([node("h1", "10.77.0.11"), node("h2", "10.77.0.12", ready=False)], ["10.77.0.11"]),
    ([node("h1", "10.77.0.11"), node("h2", "10.77.0.12", unschedulable=True)], ["10.77.0.11"]),
    ([node("h1", None), node("h2", "not-an-ip")], []),
    ([node("h1", "10.77.0.11"), node("h1b", "10.77.0.11")], ["10.77.0.11"]),
], ids=["sorted-numerically", "not-ready-left-out", "cordoned-left-out", "no-address", "deduplicated"])
def test_ingress_for(nodes, expected):
    """Ingress: the InternalIPs of Ready, schedulable Nodes, numerically sorted, once each, ipMode VIP."""
    got = ingress_for(nodes)
    assert [i["ip"] for i in got] == expected and all(i["ipMode"] == "VIP" for i in got)


@pytest.mark.parametrize("svc, expected", [
    (service(), ingress("10.77.0.11")),
    (service(status=ingress("10.77.0.99")), ingress("10.77.0.11")),
    (service("ClusterIP", status=ingress("10.77.0.11")), {"loadBalancer": {}}),
    (service("ClusterIP"), None),
    (service(loadBalancerClass="example.com/other"), None),
    (service(loadBalancerClass="example.com/other", status=ingress("192.0.2.1")), None),
], ids=["new", "stale", "no-longer-lb-cleared", "not-lb", "other-class", "other-class-kept"])
def test_desired_status(svc, expected):
    """LoadBalancer Services get the Nodes' ingress; one that changed away is cleared; other classes left alone."""
    assert desired_status(svc, [node("h1", "10.77.0.11")]) == expected


def test_no_ready_node_means_no_ingress():
    """With no Ready Node there is no ingress (kctl get svc shows <pending>), and no empty loadBalancer is added."""
    assert desired_status(service(), [node("h1", "10.77.0.11", ready=False)]) == {}


@pytest.fixture
def controller(api):
    """A ServiceLBController over synced informers; the test calls reconcile itself."""
    stop = threading.Event()
    informers = InformerFactory(api)
    ctx = ControllerContext(api=api, informers=informers, recorder=Recorder(api, component="test"))
    ctl = ServiceLBController()
    queue = Queue()
    ctl.register(ctx, queue)
    informers.start(stop)
    wait_for(informers.has_synced, what="informers synced")
    yield ctl
    stop.set()


def stored_ingress(api) -> list[str]:
    obj = api.get(api.resource("services"), "web", namespace="default")
    return [i["ip"] for i in ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or ()]


def settle(ctl, api) -> None:
    """Reconcile the Service, then wait until the cache holds what the store has."""
    ctl.reconcile("default/web")
    rv = api.get(api.resource("services"), "web", namespace="default")["metadata"]["resourceVersion"]
    wait_for(lambda: (ctl.services.get("default", "web") or {}).get("metadata", {}).get("resourceVersion") == rv,
             what="service cached")


def make_node(api, name: str, ip: str, **kwargs) -> dict:
    created = api.create(node(name, ip, **kwargs))
    return api.update_status({**created, "status": node(name, ip, **kwargs)["status"]})


def cached_nodes(ctl, count: int) -> None:
    wait_for(lambda: len(ctl.nodes.list()) == count, what=f"{count} nodes cached")


def test_controller_keeps_ingress_in_step_with_nodes(api, controller):
    """Written through the status subresource; follows a Node going NotReady; a type change clears it."""
    make_node(api, "h1", "10.77.0.11")
    make_node(api, "h2", "10.77.0.12")
    api.create(service())
    cached_nodes(controller, 2)
    wait_for(lambda: controller.services.get("default", "web") is not None, what="service cached")
    settle(controller, api)
    assert stored_ingress(api) == ["10.77.0.11", "10.77.0.12"]
    rv = api.get(api.resource("services"), "web", namespace="default")["metadata"]["resourceVersion"]
    settle(controller, api)
    assert api.get(api.resource("services"), "web", namespace="default")["metadata"]["resourceVersion"] == rv
    h2 = api.get(api.resource("nodes"), "h2")
    controller.queue.keys.clear()
    api.update_status({**h2, "status": node("h2", "10.77.0.12", ready=False)["status"]})
    wait_for(lambda: "default/web" in controller.queue.keys, what="service queued by the node change")
    wait_for(lambda: ingress_for(controller.nodes.list()) == [{"ip": "10.77.0.11", "ipMode": "VIP"}],
             what="node change cached")
    settle(controller, api)
    assert stored_ingress(api) == ["10.77.0.11"]
    current = api.get(api.resource("services"), "web", namespace="default")
    current["spec"]["type"] = "ClusterIP"
    current["spec"].pop("allocateLoadBalancerNodePorts", None)
    current["spec"].pop("externalTrafficPolicy", None)
    for port in current["spec"]["ports"]:
        port.pop("nodePort", None)
    api.update(current)
    wait_for(lambda: controller.services.get("default", "web")["spec"]["type"] == "ClusterIP", what="type cached")
    settle(controller, api)
    assert stored_ingress(api) == []
    events = [e for e in api.list(api.resource("events"), namespace="default")[0]
              if e.get("reason") == "UpdatedIngressIP"]
    assert events and events[0]["type"] == "Normal"


def test_registered_in_the_daemon_and_runs(api):
    """`servicelb` is one of the daemon's controllers, and under the manager a new Service gets its ingress."""
    assert "servicelb" in CONTROLLER_NAMES
    make_node(api, "h1", "10.77.0.11")
    with running(api, [ServiceLBController()]):
        api.create(service())
        wait_for(lambda: stored_ingress(api) == ["10.77.0.11"], what="ingress written")
