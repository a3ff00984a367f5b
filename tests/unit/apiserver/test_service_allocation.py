"""Service ClusterIPs and NodePorts, allocated by the API layer as kube-apiserver does (kctl.apiserver.services)."""

from __future__ import annotations

import base64
import ipaddress
import multiprocessing

import pytest

from kctl.apiserver.server import APIServer
from kctl.apiserver.services import config
from kctl.apiserver.services.nodeport import RANGE_KIND, RANGE_NAME
from kctl.machinery.errors import APIError, Invalid
from kctl.store.sqlite import Store


def svc(name: str, **spec) -> dict:
    """A Service manifest with one port (80) and a selector, spec fields overridden by keyword."""
    body = {"ports": [{"port": 80}], "selector": {"app": name}, **spec}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"}, "spec": body}


def ip_addresses(api) -> dict[str, dict]:
    """The stored IPAddress objects by name."""
    return {o["metadata"]["name"]: o for o in api.list(api.resource("ipaddresses"))[0]}


def held_ports(api) -> set[int]:
    """The node ports the stored bitmap marks as taken."""
    obj = api.store.get(RANGE_KIND, "", RANGE_NAME)
    if obj is None:
        return set()
    base = int(obj["range"].split("-")[0])
    bits = int.from_bytes(base64.b64decode(obj["data"]), "little")
    return {base + i for i in range(bits.bit_length()) if bits >> i & 1}


def get_svc(api, name: str) -> dict:
    return api.get(api.resource("services"), name, namespace="default")


@pytest.mark.parametrize("spec, check", [
    ({}, lambda s: ipaddress.ip_address(s["clusterIP"]) in ipaddress.ip_network("10.96.0.0/16")
        and s["clusterIPs"] == [s["clusterIP"]] and s["ipFamilies"] == ["IPv4"]
        and s["ipFamilyPolicy"] == "SingleStack"),
    ({"clusterIP": "10.96.0.10"}, lambda s: s["clusterIP"] == "10.96.0.10" and s["clusterIPs"] == ["10.96.0.10"]),
    ({"clusterIP": "None"}, lambda s: s["clusterIPs"] == ["None"] and s["ipFamilies"] == ["IPv4"]),
    ({"clusterIP": "None", "selector": None},
     lambda s: s["ipFamilyPolicy"] == "RequireDualStack" and s["ipFamilies"] == ["IPv4", "IPv6"]),
    ({"type": "ExternalName", "externalName": "db.example.com"},
     lambda s: "clusterIP" not in s and "ipFamilies" not in s and "ipFamilyPolicy" not in s),
    ({"type": "NodePort"}, lambda s: 30000 <= s["ports"][0]["nodePort"] <= 32767 and s["clusterIP"]),
    ({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}, lambda s: s["ports"][0]["nodePort"] == 30080),
    ({"type": "NodePort", "ports": [{"port": 53, "protocol": "UDP", "name": "u"},
                                    {"port": 53, "protocol": "TCP", "name": "t"}]},
     lambda s: s["ports"][0]["nodePort"] == s["ports"][1]["nodePort"]),
    ({"type": "LoadBalancer"}, lambda s: s["ports"][0]["nodePort"] and "healthCheckNodePort" not in s),
    ({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": False}, lambda s: "nodePort" not in s["ports"][0]),
    ({"type": "LoadBalancer", "externalTrafficPolicy": "Local"},
     lambda s: 30000 <= s["healthCheckNodePort"] <= 32767 and s["healthCheckNodePort"] != s["ports"][0]["nodePort"]),
], ids=["clusterip", "requested", "headless", "headless-selectorless", "externalname", "nodeport",
        "nodeport-requested", "one-nodeport-per-port-number", "loadbalancer", "lb-no-nodeports", "lb-health-check"])
def test_create_fills_addresses(api, spec, check):
    """A created Service gets the addresses and ports kube-apiserver would give it."""
    body = svc("web", **spec)
    if spec.get("selector", 1) is None:
        del body["spec"]["selector"]
    created = api.create(body)
    assert check(created["spec"]), created["spec"]
    stored = get_svc(api, "web")["spec"]
    ips = ip_addresses(api)
    if stored.get("clusterIP") not in (None, "None"):
        assert list(ips) == [stored["clusterIP"]]
        assert ips[stored["clusterIP"]]["spec"]["parentRef"] == {"group": "", "resource": "services",
                                                                 "namespace": "default", "name": "web"}
    else:
        assert ips == {}
    wanted_ports = {p["nodePort"] for p in stored["ports"] if p.get("nodePort")} | (
        {stored["healthCheckNodePort"]} if stored.get("healthCheckNodePort") else set())
    assert held_ports(api) == wanted_ports


@pytest.mark.parametrize("first, second, message", [
    (svc("a", clusterIP="10.96.0.10"), svc("b", clusterIP="10.96.0.10"),
     'Service "b" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.10"}: failed to allocate IP '
     "10.96.0.10: provided IP is already allocated"),
    (None, svc("b", clusterIP="10.1.0.1"),
     'Service "b" is invalid: spec.clusterIPs: Invalid value: []string{"10.1.0.1"}: failed to allocate IP 10.1.0.1: '
     "provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/16"),
    (None, svc("b", clusterIP="10.96.0.0"),
     'Service "b" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.0"}: failed to allocate IP 10.96.0.0: '
     "provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/16"),
    (svc("a", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]),
     svc("b", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]),
     'Service "b" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated'),
    (None, svc("b", type="NodePort", ports=[{"port": 80, "nodePort": 8080}]),
     'Service "b" is invalid: spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid range. '
     "The range of valid ports is 30000-32767"),
    (None, svc("b", ports=[{"port": 80, "nodePort": 30080}]),
     "Service \"b\" is invalid: spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"),
    (None, svc("b", type="NodePort", clusterIP="None"),
     "Service \"b\" is invalid: spec.clusterIP: Invalid value: \"None\": may not be set to 'None' for NodePort "
     "services"),
    (None, svc("b", type="ExternalName", externalName="x.example.com", clusterIP="10.96.0.5"),
     'Service "b" is invalid: spec.clusterIPs: Forbidden: may not be set for ExternalName services'),
    (None, svc("b", ipFamilyPolicy="RequireDualStack"),
     'Service "b" is invalid: spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not '
     "configured for dual-stack services"),
    (None, svc("b", clusterIP="fd00::5"),
     'Service "b" is invalid: spec.clusterIPs[0]: Invalid value: []string{"fd00::5"}: IPv6 is not configured on '
     "this cluster"),
], ids=["ip-taken", "ip-out-of-range", "network-address", "port-taken", "port-out-of-range",
        "nodeport-on-clusterip", "headless-nodeport", "externalname-with-ip", "dual-stack", "ipv6"])
def test_create_refused_with_kubernetes_message(api, first, second, message):
    """Taken or out-of-range addresses and ports are refused with kube-apiserver's message; nothing leaks."""
    if first is not None:
        api.create(first)
    before_ips, before_ports = set(ip_addresses(api)), held_ports(api)
    with pytest.raises(Invalid) as caught:
        api.create(second)
    assert caught.value.message == message
    assert set(ip_addresses(api)) == before_ips
    assert held_ports(api) == before_ports


def test_failed_create_leaks_no_address(api):
    """A create refused after its ClusterIP was taken (its node port is taken) leaves the ClusterIP free."""
    api.create(svc("a", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
    with pytest.raises(Invalid):
        api.create(svc("b", type="NodePort", clusterIP="10.96.0.50", ports=[{"port": 80, "nodePort": 30080}]))
    assert "10.96.0.50" not in ip_addresses(api)
    assert api.create(svc("c", clusterIP="10.96.0.50"))["spec"]["clusterIP"] == "10.96.0.50"


def test_dry_run_allocates_but_keeps_nothing(api):
    """A dry-run create shows an address and a port and stores neither."""
    shown = api.create(svc("a", type="NodePort"), dry_run=True)
    assert shown["spec"]["clusterIP"] and shown["spec"]["ports"][0]["nodePort"]
    assert ip_addresses(api) == {} and held_ports(api) == set()


def test_atomic_batch_with_a_clash_writes_nothing(api):
    """Two Services of one atomic write_all asking for one IP: both fail, no IPAddress is left."""
    results = api.write_all([("create", svc("a", clusterIP="10.96.0.7")), ("create", svc("b", clusterIP="10.96.0.7"))],
                            atomic=True)
    assert results[1].error is not None and "provided IP is already allocated" in results[1].error.message
    assert ip_addresses(api) == {}


def test_delete_releases_address_and_ports(api):
    """Deleting a Service frees its ClusterIP and node ports for the next Service that asks."""
    api.create(svc("a", type="NodePort", clusterIP="10.96.0.20", ports=[{"port": 80, "nodePort": 30100}]))
    api.delete(api.resource("services"), "a", namespace="default")
    assert ip_addresses(api) == {} and held_ports(api) == set()
    again = api.create(svc("b", type="NodePort", clusterIP="10.96.0.20", ports=[{"port": 80, "nodePort": 30100}]))
    assert again["spec"]["clusterIP"] == "10.96.0.20" and again["spec"]["ports"][0]["nodePort"] == 30100


def test_cluster_ip_is_immutable(api):
    """Changing a Service's ClusterIP is refused with kube-apiserver's message."""
    created = api.create(svc("a", clusterIP="10.96.0.30"))
    created["spec"]["clusterIP"] = "10.96.0.31"
    with pytest.raises(Invalid) as caught:
        api.update(created)
    assert caught.value.message == ('Service "a" is invalid: spec.clusterIPs[0]: Invalid value: '
                                    '[]string{"10.96.0.31"}: may not change once set')
    assert set(ip_addresses(api)) == {"10.96.0.30"}


def test_replace_without_allocated_values_keeps_them(api):
    """An update that leaves out clusterIP and nodePort (kubectl replace of the manifest) keeps both."""
    created = api.create(svc("a", type="NodePort"))
    manifest = svc("a", type="NodePort")
    updated = api.update(manifest)
    assert updated["spec"]["clusterIP"] == created["spec"]["clusterIP"]
    assert updated["spec"]["ports"][0]["nodePort"] == created["spec"]["ports"][0]["nodePort"]


@pytest.mark.parametrize("old, new, check", [
    ({}, {"type": "NodePort"}, lambda s, ips, ports: ports == {s["ports"][0]["nodePort"]} and len(ips) == 1),
    ({"type": "NodePort"}, {"type": "ClusterIP"},
     lambda s, ips, ports: ports == set() and "nodePort" not in s["ports"][0] and "externalTrafficPolicy" not in s),
    ({}, {"type": "ExternalName", "externalName": "x.example.com"},
     lambda s, ips, ports: ips == set() and "clusterIP" not in s and "ipFamilies" not in s),
    ({"type": "ExternalName", "externalName": "x.example.com"}, {"type": "ClusterIP", "externalName": None},
     lambda s, ips, ports: ips == {s["clusterIP"]}),
    ({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30200}]},
     {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30201}]}, lambda s, ips, ports: ports == {30201}),
], ids=["clusterip-to-nodeport", "nodeport-to-clusterip", "to-externalname", "from-externalname", "new-nodeport"])
def test_type_change_allocates_and_releases(api, old, new, check):
    """A type change takes the addresses and ports the new type needs and gives back the rest."""
    api.create(svc("a", **old))
    current = get_svc(api, "a")
    for key, value in new.items():
        if value is None:
            current["spec"].pop(key, None)
        else:
            current["spec"][key] = value
    updated = api.update(current)
    assert check(updated["spec"], set(ip_addresses(api)), held_ports(api)), updated["spec"]


def test_dynamic_allocation_skips_reserved_and_fills_small_range(api):
    """In a /28 dynamic allocation never gives .1 or .10, fills the rest, then says the range is full."""
    api.create({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "kubernetes"},
                "spec": {"cidrs": ["10.50.0.0/28"]}})
    got = {api.create(svc(f"s{i}"))["spec"]["clusterIP"] for i in range(12)}
    assert got == {f"10.50.0.{i}" for i in range(2, 15) if i != 10}
    with pytest.raises(APIError) as caught:
        api.create(svc("full"))
    assert caught.value.message == "Internal error occurred: failed to allocate a serviceIP: range is full"
    assert api.create(svc("dns", clusterIP="10.50.0.10"))["spec"]["clusterIP"] == "10.50.0.10"


def test_configure_writes_ranges_to_the_store(api):
    """A daemon's flags become the default ServiceCIDR and the node-port range every API server reads."""
    assert config.configure(api, service_cidr="10.100.0.0/24", node_port_range="31000-31002") == []
    cidr = api.get(api.resource("servicecidrs"), "kubernetes")
    assert cidr["spec"]["cidrs"] == ["10.100.0.0/24"]
    assert ipaddress.ip_address(api.create(svc("a"))["spec"]["clusterIP"]) in ipaddress.ip_network("10.100.0.0/24")
    ports = {api.create(svc(f"n{i}", type="NodePort"))["spec"]["ports"][0]["nodePort"] for i in range(3)}
    assert ports == {31000, 31001, 31002}
    with pytest.raises(APIError, match="failed to allocate a nodePort: range is full"):
        api.create(svc("n3", type="NodePort"))
    warnings = config.configure(api, service_cidr="10.101.0.0/24", node_port_range="30000-32767")
    assert len(warnings) == 1 and 'keeps 10.100.0.0/24' in warnings[0], warnings
    assert held_ports(api) == {31000, 31001, 31002}, "the bitmap is rebuilt from the Services"


@pytest.mark.parametrize("cidr, ports, message", [
    ("10.0.0.0/8", "30000-32767", "is too large"),
    ("10.96.0.1/16", "30000-32767", "is not a CIDR"),
    ("fd00::/108", "30000-32767", "single-stack IPv4"),
    ("10.96.0.0/16", "32767-30000", "is not a port range"),
    ("10.96.0.0/16", "ports", "is not a port range"),
], ids=["too-large", "host-bits", "ipv6", "reversed", "not-numbers"])
def test_configure_refuses_bad_flags(api, cidr, ports, message):
    """Bad --service-cluster-ip-range / --service-node-port-range values are refused with one clear line."""
    with pytest.raises(ValueError, match=message):
        config.configure(api, service_cidr=cidr, node_port_range=ports)


def _create_many(path: str, worker: int, count: int) -> None:
    api = APIServer(Store(path), user=f"w{worker}", audit_log=None)
    for i in range(count):
        api.create(svc(f"w{worker}-{i}", type="NodePort"))


def test_two_processes_never_share_an_address_or_port(tmp_path):
    """Two processes creating NodePort Services at once: every ClusterIP and node port is distinct and recorded."""
    path = str(tmp_path / "kctl.db")
    api = APIServer(Store(path), audit_log=None)
    # small ranges make a clash likely if allocation were unsafe
    config.configure(api, service_cidr="10.60.0.0/26", node_port_range="30000-30079")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_create_many, args=(path, w, 25)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    services = api.list(api.resource("services"), namespace="default")[0]
    assert len(services) == 50
    ips = [s["spec"]["clusterIP"] for s in services]
    ports = [s["spec"]["ports"][0]["nodePort"] for s in services]
    assert len(set(ips)) == 50 and len(set(ports)) == 50
    assert set(ip_addresses(api)) == set(ips)
    assert held_ports(api) == set(ports)


def test_configure_gives_old_services_their_addresses(api):
    """Services stored before kctl allocated addresses get a ClusterIP and node ports when the daemon starts."""
    old = svc("legacy", type="NodePort", ports=[{"port": 80, "protocol": "TCP"}, {"port": 81, "protocol": "TCP",
                                                                                   "nodePort": 30081}])
    old["metadata"].update(uid="u-1", creationTimestamp="2026-01-01T00:00:00Z")
    with api.store.transaction() as txn:  # as an older kctl stored it: no address, one node port
        txn.put("Service", "default", "legacy", old, event="ADDED")
    assert config.configure(api, service_cidr="10.96.0.0/16", node_port_range="30000-32767") == []
    spec = get_svc(api, "legacy")["spec"]
    assert spec["clusterIP"] in ip_addresses(api)
    assert spec["ports"][1]["nodePort"] == 30081 and 30000 <= spec["ports"][0]["nodePort"] <= 32767
    assert held_ports(api) == {spec["ports"][0]["nodePort"], 30081}
    assert config.configure(api, service_cidr="10.96.0.0/16", node_port_range="30000-32767") == []
    assert get_svc(api, "legacy")["spec"] == spec, "a second start changes nothing"


def test_configure_repairs_ip_addresses(api):
    """At daemon start a hand-deleted IPAddress of a live Service comes back and an orphaned one goes."""
    held = api.create(svc("a"))["spec"]["clusterIP"]
    api.delete(api.resource("ipaddresses"), held)
    orphan = {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
              "metadata": {"name": "10.96.0.99",
                           "labels": {"ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}},
              "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "gone"}}}
    foreign = {**orphan, "metadata": {"name": "10.96.0.98"}}
    api.create(orphan)
    api.create(foreign)
    assert config.configure(api, service_cidr="10.96.0.0/16", node_port_range="30000-32767") == []
    assert set(ip_addresses(api)) == {held, "10.96.0.98"}, "ours repaired, a user's own IPAddress left alone"
    assert ip_addresses(api)[held]["spec"]["parentRef"]["name"] == "a"
