"""The daemon's cluster DNS (kctl.daemon.clusterdns): the kube-dns Service and slice, and serving while leading."""

from __future__ import annotations

import socket
import time

import pytest
from dnslib import RCODE, DNSRecord

from kctl.controllers.endpointslice import managed_by_us
from kctl.daemon.clusterdns import (MANAGED_BY, advertise_addresses, ensure_service, ensure_slice, kube_dns_service)
from kctl.daemon.controlplane import ControlPlane
from kctl.daemon.settings import DaemonSettings

WAIT_SECONDS = 30.0  # how long a wait may take before the test fails as hung (no timing asserted)


def wait_for(predicate, *, what: str):
    """Poll predicate until it returns something true; AssertionError naming `what` if it never does."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.05)
    return value


def get(api, resource: str, name: str = "kube-dns") -> dict | None:
    try:
        return api.get(api.resource(resource), name, namespace="kube-system")
    except Exception:
        return None


def test_kube_dns_service_is_kubeadms_without_a_selector() -> None:
    """ClusterIP = --cluster-dns, dns 53/UDP and dns-tcp 53/TCP to the DNS port, kubeadm's labels, no selector."""
    svc = kube_dns_service("10.96.0.10", 10053)
    assert svc["metadata"]["labels"]["k8s-app"] == "kube-dns"
    assert svc["metadata"]["labels"]["kubernetes.io/name"] == "CoreDNS"
    assert "selector" not in svc["spec"] and svc["spec"]["clusterIP"] == "10.96.0.10"
    assert [(p["name"], p["port"], p["protocol"], p["targetPort"]) for p in svc["spec"]["ports"]] == [
        ("dns", 53, "UDP", 10053), ("dns-tcp", 53, "TCP", 10053)]


def test_ensure_creates_then_leaves_alone(api) -> None:
    """The Service and slice are made once; a second pass writes nothing (same resourceVersion)."""
    svc = ensure_service(api, "10.96.0.10", 10053)
    slice_ = ensure_slice(api, svc, ["10.77.0.1"], 10053, ready=True)
    assert svc["spec"]["clusterIP"] == "10.96.0.10" and not svc["spec"].get("selector")
    assert slice_["metadata"]["labels"]["kubernetes.io/service-name"] == "kube-dns"
    assert slice_["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == MANAGED_BY
    assert slice_["metadata"]["ownerReferences"][0]["uid"] == svc["metadata"]["uid"]
    assert [e["addresses"] for e in slice_["endpoints"]] == [["10.77.0.1"]]
    assert {(p["port"], p["protocol"]) for p in slice_["ports"]} == {(10053, "UDP"), (10053, "TCP")}
    again = ensure_service(api, "10.96.0.10", 10053)
    again_slice = ensure_slice(api, again, ["10.77.0.1"], 10053, ready=True)
    assert again["metadata"]["resourceVersion"] == svc["metadata"]["resourceVersion"]
    assert again_slice["metadata"]["resourceVersion"] == slice_["metadata"]["resourceVersion"]
    assert not managed_by_us(again_slice)  # the EndpointSlice controller never deletes it


@pytest.mark.parametrize("drift", [
    {"selector": {"k8s-app": "kube-dns"}},
    {"ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53}]},
], ids=["a-selector", "other-ports"])
def test_a_changed_service_is_put_back(api, drift: dict) -> None:
    """A kube-dns edited by hand (a selector, other ports) is put back, keeping its ClusterIP."""
    svc = ensure_service(api, "10.96.0.10", 10053)
    api.update({**svc, "spec": {**svc["spec"], **drift}}, namespace="kube-system")
    fixed = ensure_service(api, "10.96.0.10", 10053)
    assert fixed["spec"] == {**fixed["spec"], **kube_dns_service("10.96.0.10", 10053)["spec"]}
    assert not fixed["spec"].get("selector")


def test_a_new_cluster_dns_address_makes_the_service_again(api) -> None:
    """--cluster-dns changed: the ClusterIP is immutable, so kube-dns is deleted and made with the new one."""
    ensure_service(api, "10.96.0.10", 10053)
    svc = ensure_service(api, "10.96.0.53", 10053)
    assert svc["spec"]["clusterIP"] == "10.96.0.53"


def test_the_slice_follows_addresses_port_and_readiness(api) -> None:
    """A new leader's address, another port or a server not listening rewrite the one slice."""
    svc = ensure_service(api, "10.96.0.10", 10053)
    ensure_slice(api, svc, ["10.77.0.1"], 10053, ready=True)
    moved = ensure_slice(api, svc, ["10.77.0.2", "10.78.0.2"], 10054, ready=False)
    assert [e["addresses"] for e in moved["endpoints"]] == [["10.77.0.2"], ["10.78.0.2"]]
    assert all(e["conditions"]["ready"] is False for e in moved["endpoints"])
    assert {p["port"] for p in moved["ports"]} == {10054}
    slices = api.list(api.resource("endpointslices.discovery.k8s.io"), namespace="kube-system")[0]
    assert [s["metadata"]["name"] for s in slices] == ["kube-dns"]


@pytest.mark.parametrize("nodes, override, routes, want", [
    (["10.77.0.11", "10.77.0.12"], [], {"10.77.0.11": "10.77.0.1", "10.77.0.12": "10.77.0.1"}, ["10.77.0.1"]),
    (["10.77.0.11", "10.78.0.11"], [], {"10.77.0.11": "10.77.0.1", "10.78.0.11": "10.78.0.1"},
     ["10.77.0.1", "10.78.0.1"]),
    (["127.0.0.1"], [], {"127.0.0.1": "127.0.0.1", "10.255.255.255": "192.0.2.4"}, ["192.0.2.4"]),
    ([], [], {"10.255.255.255": "192.0.2.4"}, ["192.0.2.4"]),
    (["10.77.0.11"], ["192.0.2.9"], {"10.77.0.11": "10.77.0.1"}, ["192.0.2.9"]),
    (["10.99.0.1"], [], {}, []),
], ids=["one-segment", "two-segments", "loopback-node", "no-nodes", "override", "no-route"])
def test_advertise_addresses(nodes: list[str], override: list[str], routes: dict, want: list[str]) -> None:
    """The route source towards each Node, deduplicated, loopback left out; the flag wins; else the default route."""
    assert advertise_addresses(nodes, override=override, source=routes.get) == want


def _free_port() -> socket.socket:
    """A UDP socket holding a free port on all addresses (no SO_REUSEADDR: nobody else may bind it)."""
    held = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    held.bind(("0.0.0.0", 0))
    return held


@pytest.fixture
def plane(api):
    """Start a ControlPlane (no leader election) with the settings given; stopped after the test."""
    planes: list[ControlPlane] = []

    def start(settings: DaemonSettings) -> ControlPlane:
        made = ControlPlane(api, settings, leader_election=False, identity="test")
        planes.append(made)
        made.start()
        return made

    yield start
    for made in planes:
        made.stop()


def _ask(port: int, name: str) -> DNSRecord:
    return DNSRecord.parse(DNSRecord.question(name, "A").send("127.0.0.1", port, timeout=5))


def test_the_leading_daemon_serves_and_points_kube_dns_at_itself(api, plane) -> None:
    """Leading: DNS answers Service names from the informers, and kube-dns's slice names its port, ready."""
    running = plane(DaemonSettings(controllers=(), cluster_dns_port=0,
                                   cluster_dns_advertise_addresses=("192.0.2.10",)))
    port = wait_for(lambda: running.dns.port, what="the DNS server listening")
    slice_ = wait_for(lambda: (s := get(api, "endpointslices.discovery.k8s.io")) and
                      s["ports"][0]["port"] == port and s, what="the kube-dns slice naming the port")
    assert slice_["endpoints"] == [{"addresses": ["192.0.2.10"],
                                    "conditions": {"ready": True, "serving": True, "terminating": False}}]
    reply = wait_for(lambda: (r := _ask(port, "kube-dns.kube-system.svc.cluster.local")).rr and r,
                     what="kube-dns answered from the informer")
    assert [str(rr.rdata) for rr in reply.rr] == ["10.96.0.10"]
    running.stop()
    with pytest.raises(ConnectionRefusedError):  # stopped: the port is released, nothing answers
        DNSRecord.question("kube-dns.kube-system.svc.cluster.local", "A").send("127.0.0.1", port, tcp=True, timeout=5)


def test_a_taken_port_is_a_warning_and_is_tried_again(api, plane, monkeypatch) -> None:
    """The port taken: a log line and one Warning Event, the slice not ready; once free, DNS serves there."""
    from kctl.daemon import clusterdns

    monkeypatch.setattr(clusterdns, "BIND_RETRY_SECONDS", 0.5)  # tried again sooner than a daemon's 5 s
    held = _free_port()
    port = held.getsockname()[1]
    try:
        running = plane(DaemonSettings(controllers=(), cluster_dns_port=port,
                                       cluster_dns_advertise_addresses=("192.0.2.10",)))

        def warnings() -> list[dict]:
            items = api.list(api.resource("events"), namespace="kube-system")[0]
            return [e for e in items if e.get("reason") == "ClusterDNSListenFailed"]

        [event] = wait_for(warnings, what="a ClusterDNSListenFailed Event")
        assert event["type"] == "Warning" and f":{port}" in event["message"]
        assert event["involvedObject"]["name"] == "kube-dns"
        slice_ = wait_for(lambda: get(api, "endpointslices.discovery.k8s.io"), what="the kube-dns slice")
        assert slice_["endpoints"][0]["conditions"]["ready"] is False
        assert running.dns.port is None
    finally:
        held.close()
    wait_for(lambda: running.dns.port == port, what="the DNS server listening once the port is free")
    assert _ask(port, "kube-dns.kube-system.svc.cluster.local").header.rcode == RCODE.NOERROR
    wait_for(lambda: get(api, "endpointslices.discovery.k8s.io")["endpoints"][0]["conditions"]["ready"],
             what="the slice ready")


def test_a_new_leader_rewrites_the_slice_and_the_endpointslice_controller_leaves_it(api) -> None:
    """Leader A's address is in the slice; A stops, B leads and puts its own; the EndpointSlice controller
    (running in both) never adds or deletes a slice of the selector-less kube-dns."""
    def slice_addresses() -> list[list[str]]:
        found = get(api, "endpointslices.discovery.k8s.io")
        return [e["addresses"] for e in (found or {}).get("endpoints") or []]

    def make(identity: str, address: str) -> ControlPlane:
        made = ControlPlane(api, DaemonSettings(controllers=("endpointslice",), cluster_dns_port=0,
                                                cluster_dns_advertise_addresses=(address,)), identity=identity)
        made.start()
        return made

    first = make("daemon-a", "192.0.2.10")
    try:
        wait_for(lambda: slice_addresses() == [["192.0.2.10"]], what="leader A in the slice")
    finally:
        first.stop()
    second = make("daemon-b", "192.0.2.11")
    try:
        wait_for(lambda: slice_addresses() == [["192.0.2.11"]], what="leader B in the slice")
        wait_for(lambda: second.dns.port, what="leader B serving")
        time.sleep(1.0)  # give the EndpointSlice controller time to act on kube-dns, if it were to
        slices = api.list(api.resource("endpointslices.discovery.k8s.io"), namespace="kube-system")[0]
        assert [s["metadata"]["name"] for s in slices] == ["kube-dns"]
    finally:
        second.stop()
