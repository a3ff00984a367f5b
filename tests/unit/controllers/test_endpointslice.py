"""EndpointSlice controller: endpoints, conditions, per-pod ports, slicing, and the store it writes."""

from __future__ import annotations

import re
import threading

import pytest

from lifecycle_harness import Queue, exists, running, wait_for

from kctl.client.informer import InformerFactory
from kctl.controllers.base import ControllerContext, Recorder
from kctl.controllers.endpointslice import (CONTROLLER_NAME, MANAGED_BY_LABEL, SERVICE_NAME_LABEL,
                                            EndpointSliceController, EndpointSliceSettings, desired_endpoints,
                                            endpoint_ports, new_slice, plan_slices, pod_endpoint)
from kctl.controllers.servicebackends import find_port

SLICES = "endpointslices.discovery.k8s.io"


def service(name: str = "web", *, selector: dict | None = None, ports: list | None = None, uid: str = "svc-uid",
            publish: bool = False, **spec) -> dict:
    """A Service object as the cache holds it (no API needed)."""
    spec = {"selector": {"app": "web"} if selector is None else selector,
            "ports": ports if ports is not None else [{"name": "http", "port": 80, "targetPort": 8080,
                                                       "protocol": "TCP"}], **spec}
    if publish:
        spec["publishNotReadyAddresses"] = True
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": spec}


def pod(name: str, ip: str | None = "10.244.1.5", *, ready: bool = True, terminating: bool = False,
        node: str | None = "n1", labels: dict | None = None, ports: list | None = None, phase: str = "Running",
        namespace: str = "default", **spec) -> dict:
    """A Pod object as the cache holds it."""
    meta = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels or {"app": "web"}}
    if terminating:
        meta["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    status = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if ip:
        status["podIP"] = ip
    body = {"containers": [{"name": "c", "image": "nginx", "ports": ports or []}], **spec}
    if node:
        body["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body, "status": status}


@pytest.mark.parametrize("ready, terminating, publish, expected", [
    (True, False, False, (True, True, False)),
    (False, False, False, (False, False, False)),
    (True, True, False, (False, True, True)),
    (False, True, False, (False, False, True)),
    (False, False, True, (True, True, False)),
    (False, True, True, (True, True, True)),
], ids=["ready", "not-ready", "terminating-serving", "terminating-not-serving", "publish-not-ready",
        "publish-terminating"])
def test_endpoint_conditions(ready, terminating, publish, expected):
    """ready = serving and not terminating; a deleted pod is terminating; publishNotReadyAddresses makes ready."""
    endpoint = pod_endpoint(service(publish=publish), pod("p", ready=ready, terminating=terminating))
    conditions = endpoint["conditions"]
    assert (conditions["ready"], conditions["serving"], conditions["terminating"]) == expected


def test_endpoint_fields():
    """An endpoint names its address, node, zone, target pod, and hostname when the pod's subdomain is the Service."""
    endpoint = pod_endpoint(service(), pod("p1", "10.244.1.7", hostname="p1", subdomain="web"), zone="zone-a")
    assert endpoint["addresses"] == ["10.244.1.7"]
    assert endpoint["nodeName"] == "n1" and endpoint["zone"] == "zone-a" and endpoint["hostname"] == "p1"
    assert endpoint["targetRef"] == {"kind": "Pod", "namespace": "default", "name": "p1", "uid": "uid-p1"}
    assert "hostname" not in pod_endpoint(service(), pod("p2", hostname="p2", subdomain="other"))


@pytest.mark.parametrize("target, container_ports, expected", [
    (8080, [], 8080),
    (None, [], 80),
    ("http", [{"name": "http", "containerPort": 9000}], 9000),
    ("http", [{"name": "http", "containerPort": 9000, "protocol": "UDP"}], None),
    ("http", [{"name": "metrics", "containerPort": 9100}], None),
    ("8081", [], 8081),
], ids=["number", "default-to-port", "named", "named-wrong-protocol", "named-missing", "numeric-string"])
def test_find_port(target, container_ports, expected):
    """A named targetPort resolves against the pod's container ports of the same protocol."""
    service_port = {"port": 80, "protocol": "TCP"}
    if target is not None:
        service_port["targetPort"] = target
    assert find_port(pod("p", ports=container_ports), service_port) == expected


def test_named_port_resolved_per_pod():
    """Pods with different numbers for one port name go to different slices; a pod lacking it gets no port."""
    svc = service(ports=[{"name": "http", "port": 80, "targetPort": "web", "protocol": "TCP"}])
    pods = [pod("a", "10.244.1.2", ports=[{"name": "web", "containerPort": 8080}]),
            pod("b", "10.244.1.3", ports=[{"name": "web", "containerPort": 8080}]),
            pod("c", "10.244.2.2", ports=[{"name": "web", "containerPort": 9090}]),
            pod("d", "10.244.2.3", ports=[])]
    groups = desired_endpoints(svc, pods)
    by_port = {tuple(p["port"] for p in ports): [e["addresses"][0] for e in eps] for ports, eps in groups.values()}
    assert by_port == {(8080,): ["10.244.1.2", "10.244.1.3"], (9090,): ["10.244.2.2"], (): ["10.244.2.3"]}
    assert endpoint_ports(svc, pods[0]) == [{"name": "http", "port": 8080, "protocol": "TCP"}]


def test_which_pods_are_endpoints():
    """Only selected pods of the namespace with an IP that have not finished; terminating ones stay (terminating)."""
    pods = [pod("ok", "10.244.1.2"), pod("no-ip", None), pod("failed", "10.244.1.3", phase="Failed"),
            pod("done", "10.244.1.4", phase="Succeeded"), pod("other", "10.244.1.5", labels={"app": "db"}),
            pod("elsewhere", "10.244.1.6", namespace="prod"), pod("leaving", "10.244.1.7", terminating=True)]
    (_, endpoints), = desired_endpoints(service(), pods).values()
    assert [e["targetRef"]["name"] for e in endpoints] == ["ok", "leaving"]
    assert desired_endpoints(service(selector={}), pods) == {}, "a Service without selector gets nothing"
    assert desired_endpoints(service(type="ExternalName"), pods) == {}


def _endpoints(n: int, *, base: str = "10.244") -> list[dict]:
    return [pod_endpoint(service(), pod(f"p{i}", f"{base}.{i // 250}.{i % 250 + 1}")) for i in range(n)]


def _desired(endpoints: list[dict]) -> dict:
    ports = [{"name": "http", "port": 8080, "protocol": "TCP"}]
    return {(("http", 8080, "TCP", ""),): (ports, endpoints)}


def _stored(plan_slices_: list[dict], prefix: str = "web-s") -> list[dict]:
    """Give planned new slices names, as the API would."""
    out = []
    for i, s in enumerate(plan_slices_):
        s = dict(s, metadata=dict(s["metadata"], name=f"{prefix}{i}", resourceVersion="1"))
        out.append(s)
    return out


@pytest.mark.parametrize("count, max_per_slice, sizes", [
    (250, 100, [100, 100, 50]),
    (100, 100, [100]),
    (7, 3, [3, 3, 1]),
    (1, 100, [1]),
], ids=["250-by-100", "exactly-full", "small-max", "one"])
def test_slices_hold_at_most_max_endpoints(count, max_per_slice, sizes):
    """New endpoints are cut into slices of at most --max-endpoints-per-slice."""
    plan = plan_slices(service(), _desired(_endpoints(count)), [], max_per_slice=max_per_slice)
    assert [len(s["endpoints"]) for s in plan.create] == sizes
    assert not plan.update and not plan.delete


def test_placeholder_slice_without_endpoints():
    """A selector Service with no endpoints gets one empty slice; extra empty slices are deleted."""
    plan = plan_slices(service(), {}, [])
    assert len(plan.create) == 1 and plan.create[0]["endpoints"] == [] and plan.create[0]["ports"] == []
    stored = _stored([new_slice(service(), [], []), new_slice(service(), [], [])])
    plan = plan_slices(service(), {}, stored)
    assert not plan.create and not plan.update and [s["metadata"]["name"] for s in plan.delete] == ["web-s1"]


def test_unchanged_slices_are_not_written():
    """A second pass over the slices it made writes nothing."""
    first = plan_slices(service(), _desired(_endpoints(150)), [])
    again = plan_slices(service(), _desired(_endpoints(150)), _stored(first.create))
    assert again.empty


def test_change_touches_only_its_slice_and_fills_before_creating():
    """A gone endpoint updates only its slice; new endpoints fill that room before a new slice is made."""
    endpoints = _endpoints(150)
    stored = _stored(plan_slices(service(), _desired(endpoints), []).create)
    fewer = endpoints[:120] + endpoints[121:]
    plan = plan_slices(service(), _desired(fewer), stored)
    assert [s["metadata"]["name"] for s in plan.update] == ["web-s1"] and not plan.create and not plan.delete
    assert len(plan.update[0]["endpoints"]) == 49
    more = fewer + _endpoints(3, base="10.245")
    plan = plan_slices(service(), _desired(more), stored)
    assert not plan.create, "room in an existing slice is used first"
    assert sum(len(s["endpoints"]) for s in plan.update) <= 100 + 53


def test_slices_of_others_and_of_old_ports_and_types():
    """User slices are never touched; our slices of ports no longer served, or not IPv4, are deleted."""
    ours_old = _stored([new_slice(service(), [{"name": "http", "port": 7070, "protocol": "TCP"}], _endpoints(1))],
                       prefix="old-")
    v6 = _stored([dict(new_slice(service(), [], []), addressType="IPv6")], prefix="v6-")
    user = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": "mine", "namespace": "default", "labels": {SERVICE_NAME_LABEL: "web"}},
            "endpoints": [], "ports": []}
    plan = plan_slices(service(), _desired(_endpoints(2)), ours_old + v6 + [user])
    assert sorted(s["metadata"]["name"] for s in plan.delete) == ["old-0", "v6-0"]
    assert len(plan.create) == 1


# -- the controller over a real store -------------------------------------------------------

def make_node(api, name: str, zone: str | None = None) -> dict:
    labels = {"topology.kubernetes.io/zone": zone} if zone else {}
    return api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}})


def make_pod(api, name: str, ip: str, *, node: str = "n1", ready: bool = True, labels: dict | None = None,
             ports: list | None = None) -> dict:
    created = api.create({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "namespace": "default", "labels": labels or {"app": "web"}},
                          "spec": {"nodeName": node,
                                   "containers": [{"name": "c", "image": "nginx", "ports": ports or []}]}})
    created["status"] = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                         "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return api.update_status(created)


def make_service(api, name: str = "web", *, selector: dict | None = None, **spec) -> dict:
    body = {"ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}], **spec}
    if selector is not None:
        body["selector"] = selector
    return api.create({"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": name, "namespace": "default", "labels": {"tier": "front"}},
                       "spec": body})


def slices_of(api, service_name: str = "web") -> list[dict]:
    from kctl.machinery.selectors import parse_label_selector

    items, _ = api.list(api.resource(SLICES), namespace="default",
                        label_selector=parse_label_selector(f"{SERVICE_NAME_LABEL}={service_name}"))
    return items


@pytest.fixture
def controller(api):
    """An EndpointSliceController over synced informers; the test calls reconcile itself."""
    stop = threading.Event()
    informers = InformerFactory(api)
    ctx = ControllerContext(api=api, informers=informers, recorder=Recorder(api, component="test"))
    ctl = EndpointSliceController(settings=EndpointSliceSettings(max_endpoints_per_slice=2))
    ctl.register(ctx, Queue())
    informers.start(stop)
    wait_for(informers.has_synced, what="informers synced")
    yield ctl
    stop.set()


def with_ip(ctl) -> list[dict]:
    """The cached pods whose status (with their IP) the cache already holds."""
    return [p for p in ctl.pods.list("default") if (p.get("status") or {}).get("podIP")]


def settle(ctl, key: str = "default/web") -> None:
    """Reconcile until the controller has nothing left to do for the key (its cache caught up)."""
    wait_for(lambda: ctl.reconcile(key) is None and ctl._tracker.stale(key, ctl.slices.revision) is False,
             what="reconcile settled")


def test_controller_writes_slices_for_selected_pods(api, controller):
    """Slices carry generateName names, the two labels, the Service's labels, an ownerReference, zones."""
    make_node(api, "n1", zone="zone-a")
    svc = make_service(api, selector={"app": "web"})
    for i, ip in enumerate(["10.244.1.2", "10.244.1.3", "10.244.1.4"]):
        make_pod(api, f"web-{i}", ip)
    make_pod(api, "db", "10.244.1.9", labels={"app": "db"})
    wait_for(lambda: len(with_ip(controller)) == 4 and controller.services.get("default", "web"),
             what="cached")
    settle(controller)
    slices = slices_of(api)
    assert sorted(len(s["endpoints"]) for s in slices) == [1, 2], "max 2 per slice in this test"
    for s in slices:
        meta = s["metadata"]
        assert re.fullmatch(r"web-[a-z0-9]{5}", meta["name"]), meta["name"]
        assert meta["labels"] == {"tier": "front", SERVICE_NAME_LABEL: "web", MANAGED_BY_LABEL: CONTROLLER_NAME}
        assert meta["ownerReferences"][0]["uid"] == svc["metadata"]["uid"]
        assert meta["ownerReferences"][0]["kind"] == "Service" and meta["ownerReferences"][0]["controller"] is True
        assert s["addressType"] == "IPv4" and s["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
        assert all(e["zone"] == "zone-a" and e["nodeName"] == "n1" for e in s["endpoints"])
    assert sorted(e["addresses"][0] for s in slices for e in s["endpoints"]) == ["10.244.1.2", "10.244.1.3",
                                                                                 "10.244.1.4"]
    before = [(s["metadata"]["name"], s["metadata"]["resourceVersion"]) for s in slices]
    settle(controller)
    assert [(s["metadata"]["name"], s["metadata"]["resourceVersion"]) for s in slices_of(api)] == before, \
        "nothing changed: nothing written"


def test_controller_follows_readiness_and_deletion(api, controller):
    """A pod turning unready becomes ready=false; a pod being deleted becomes terminating; gone, it leaves."""
    make_node(api, "n1")
    make_service(api, selector={"app": "web"})
    p = make_pod(api, "web-0", "10.244.1.2")
    wait_for(lambda: len(with_ip(controller)) == 1, what="cached")
    settle(controller)

    def conditions() -> dict:
        (s,) = slices_of(api)
        return s["endpoints"][0]["conditions"] if s["endpoints"] else {}

    assert conditions() == {"ready": True, "serving": True, "terminating": False}
    assert controller.queue.keys.count("default/web") >= 1
    p["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    p = api.update_status(p)
    wait_for(lambda: not controller.pods.get("default", "web-0")["status"]["conditions"][0]["status"] == "True",
             what="unready cached")
    settle(controller)
    assert conditions() == {"ready": False, "serving": False, "terminating": False}
    api.delete(api.resource("pods"), "web-0", namespace="default")  # bound to an existing node: graceful
    wait_for(lambda: controller.pods.get("default", "web-0")["metadata"].get("deletionTimestamp"),
             what="terminating cached")
    settle(controller)
    assert conditions() == {"ready": False, "serving": False, "terminating": True}
    api.delete(api.resource("pods"), "web-0", namespace="default", grace_period=0)
    wait_for(lambda: controller.pods.get("default", "web-0") is None, what="deletion cached")
    settle(controller)
    (placeholder,) = slices_of(api)
    assert placeholder["endpoints"] == [], "no endpoints left: one empty placeholder slice"


def test_events_queue_the_service(api, controller):
    """Pod, node-zone and slice events map to the keys of the Services concerned."""
    make_node(api, "n1")
    make_service(api, selector={"app": "web"})
    make_service(api, "db", selector={"app": "db"})
    wait_for(lambda: controller.services.get("default", "db"), what="services cached")
    controller.queue.keys.clear()
    make_pod(api, "web-0", "10.244.1.2")
    wait_for(lambda: "default/web" in controller.queue.keys, what="pod event queues its Service")
    assert "default/db" not in controller.queue.keys
    wait_for(lambda: len(with_ip(controller)) == 1, what="cached")
    settle(controller)
    controller.queue.keys.clear()
    node = api.get(api.resource("nodes"), "n1")
    node["metadata"]["labels"] = {"topology.kubernetes.io/zone": "zone-b"}
    api.update(node)
    wait_for(lambda: "default/web" in controller.queue.keys, what="node zone change queues Services of its pods")
    settle(controller)
    assert slices_of(api)[0]["endpoints"][0]["zone"] == "zone-b"
    controller.queue.keys.clear()
    (s,) = slices_of(api)
    api.delete(api.resource(SLICES), s["metadata"]["name"], namespace="default")
    wait_for(lambda: "default/web" in controller.queue.keys, what="a deleted slice queues its Service")
    settle(controller)
    assert len(slices_of(api)) == 1, "the slice is made again"


def test_service_without_selector_is_left_alone(api, controller):
    """A user's slices of a selectorless Service stay; ours go when a Service loses its selector."""
    svc = make_service(api, selector={"app": "web"})
    wait_for(lambda: controller.services.get("default", "web"), what="cached")
    settle(controller)
    assert len(slices_of(api)) == 1
    make_service(api, "external")
    api.create({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
                "metadata": {"name": "external-1", "namespace": "default", "labels": {SERVICE_NAME_LABEL: "external"}},
                "endpoints": [{"addresses": ["192.0.2.10"]}], "ports": [{"name": "http", "port": 80}]})
    wait_for(lambda: controller.services.get("default", "external"), what="cached")
    settle(controller, "default/external")
    assert exists(api, SLICES, "external-1")
    svc = api.get(api.resource("services"), "web", namespace="default")
    svc["spec"].pop("selector")
    api.update(svc)
    wait_for(lambda: not controller.services.get("default", "web")["spec"].get("selector"), what="cached")
    settle(controller)
    assert slices_of(api) == []


def test_slices_go_with_their_service(api):
    """Run by the manager with the garbage collector: a Service's slices appear, and go when it is deleted."""
    from kctl.controllers.garbagecollector import GarbageCollector

    make_node(api, "n1")
    make_pod(api, "web-0", "10.244.1.2")
    make_service(api, selector={"app": "web"})
    with running(api, [EndpointSliceController(), GarbageCollector()]):
        wait_for(lambda: [e for s in slices_of(api) for e in s["endpoints"]], what="slice written")
        api.delete(api.resource("services"), "web", namespace="default")
        wait_for(lambda: not slices_of(api), what="slices collected with their Service")


def test_max_endpoints_setting_is_checked():
    """--max-endpoints-per-slice outside 1-1000 is refused."""
    with pytest.raises(ValueError, match="1-1000"):
        EndpointSliceController(settings=EndpointSliceSettings(max_endpoints_per_slice=0))


def test_daemon_flag_reaches_the_controller():
    """`kctl daemon --max-endpoints-per-slice N` (DaemonSettings) sets the controller's limit."""
    from kctl.daemon.controllers import CONTROLLERS
    from kctl.daemon.settings import DaemonSettings

    made = CONTROLLERS["endpointslice"](DaemonSettings(max_endpoints_per_slice=7))
    assert isinstance(made, EndpointSliceController) and made.settings.max_endpoints_per_slice == 7
    assert CONTROLLERS["endpointslice"](DaemonSettings()).settings.max_endpoints_per_slice == 100


def test_converges_under_churn(api):
    """Under the manager, pods made, made unready and deleted in a burst end as exactly one endpoint each."""
    from kctl.controllers.endpoints import EndpointsController

    make_node(api, "n1")
    make_service(api, selector={"app": "web"})
    pods = [make_pod(api, f"web-{i}", f"10.244.1.{i + 10}") for i in range(8)]
    with running(api, [EndpointSliceController(settings=EndpointSliceSettings(max_endpoints_per_slice=5)),
                       EndpointsController()]):
        pods += [make_pod(api, f"web-{i}", f"10.244.1.{i + 10}") for i in range(8, 23)]
        for p in pods[:4]:
            p = api.get(api.resource("pods"), p["metadata"]["name"], namespace="default")
            p["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
            api.update_status(p)
        for p in pods[4:9]:
            api.delete(api.resource("pods"), p["metadata"]["name"], namespace="default", grace_period=0)
        ready = {f"10.244.1.{i + 10}" for i in range(9, 23)}
        not_ready = {f"10.244.1.{i + 10}" for i in range(4)}

        def converged() -> bool:
            slices = slices_of(api)
            seen = [(e["addresses"][0], e["conditions"]["ready"]) for s in slices for e in s["endpoints"]]
            if len(seen) != len(set(seen)) or any(len(s["endpoints"]) > 5 for s in slices):
                return False
            if {ip for ip, r in seen if r} != ready or {ip for ip, r in seen if not r} != not_ready:
                return False
            try:
                (subset,) = api.get(api.resource("endpoints"), "web", namespace="default")["subsets"]
            except Exception:
                return False
            return {a["ip"] for a in subset.get("addresses") or ()} == ready and \
                {a["ip"] for a in subset.get("notReadyAddresses") or ()} == not_ready

        wait_for(converged, what="slices and Endpoints match the pods, each address once")
        assert len(slices_of(api)) >= 4, "18 endpoints, at most 5 per slice"


def test_a_slice_gone_meanwhile_is_a_temporary_error(api, controller):
    """Updating a slice someone deleted (the cache is behind) raises TemporaryError: look again soon."""
    from kctl.client.errors import TemporaryError, is_temporary
    from kctl.controllers.endpointslice import SlicePlan

    make_service(api, selector={"app": "web"})
    wait_for(lambda: controller.services.get("default", "web"), what="cached")
    settle(controller)
    (s,) = slices_of(api)
    api.delete(api.resource(SLICES), s["metadata"]["name"], namespace="default")
    with pytest.raises(TemporaryError) as info:
        controller._apply("default/web", SlicePlan(update=[dict(s, endpoints=[])]))
    assert is_temporary(info.value) and "default/web" in str(info.value)
