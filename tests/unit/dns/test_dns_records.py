"""Cluster DNS answers (kctl.dns.records) as Kubernetes' DNS specification and CoreDNS give them."""

from __future__ import annotations

import pytest

from kctl.dns.records import Record, answer, in_zone


def _svc(name: str, ns: str = "demo", **spec) -> dict:
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def _slice(svc: str, endpoints: list[dict], ports: list[dict], ns: str = "demo") -> dict:
    return {"metadata": {"name": f"{svc}-abcde", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": svc}},
            "addressType": "IPv4", "endpoints": endpoints, "ports": ports}


class View:
    """A ClusterView over dicts."""

    def __init__(self, services: list[dict], slices: list[dict]) -> None:
        self.services = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in services}
        self.slices = slices

    def service(self, namespace: str, name: str) -> dict | None:
        return self.services.get((namespace, name))

    def endpoint_slices(self, namespace: str, service: str) -> list[dict]:
        return [s for s in self.slices if s["metadata"]["namespace"] == namespace
                and s["metadata"]["labels"]["kubernetes.io/service-name"] == service]


VIEW = View(
    [_svc("web", clusterIP="10.96.0.20", clusterIPs=["10.96.0.20"],
          ports=[{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]),
     _svc("db", clusterIP="None", ports=[{"name": "pg", "port": 5432}]),
     _svc("ext", type="ExternalName", externalName="example.com"),
     _svc("empty", clusterIP="None")],
    [_slice("db", [{"addresses": ["10.244.1.5"], "hostname": "db-0", "conditions": {"ready": True}},
                   {"addresses": ["10.244.2.7"], "hostname": "db-1", "conditions": {"ready": True}},
                   {"addresses": ["10.244.3.9"], "conditions": {"ready": None}},
                   {"addresses": ["10.244.3.8"], "hostname": "db-2", "conditions": {"ready": False}}],
            [{"name": "pg", "port": 5432, "protocol": "TCP"}])],
)


@pytest.mark.parametrize("qname, qtype, rcode, records", [
    ("web.demo.svc.cluster.local.", "A", "NOERROR", [("A", "10.96.0.20")]),
    ("WEB.Demo.svc.cluster.local", "A", "NOERROR", [("A", "10.96.0.20")]),
    ("web.demo.svc.cluster.local.", "AAAA", "NOERROR", []),
    ("nope.demo.svc.cluster.local.", "A", "NXDOMAIN", []),
    ("web.other.svc.cluster.local.", "A", "NXDOMAIN", []),
    ("db.demo.svc.cluster.local.", "A", "NOERROR", [("A", "10.244.1.5"), ("A", "10.244.2.7"), ("A", "10.244.3.9")]),
    ("db-1.db.demo.svc.cluster.local.", "A", "NOERROR", [("A", "10.244.2.7")]),
    ("db-2.db.demo.svc.cluster.local.", "A", "NXDOMAIN", []),
    ("db-0.web.demo.svc.cluster.local.", "A", "NXDOMAIN", []),
    ("empty.demo.svc.cluster.local.", "A", "NOERROR", []),
    ("ext.demo.svc.cluster.local.", "A", "NOERROR", [("CNAME", "example.com.")]),
    ("_http._tcp.web.demo.svc.cluster.local.", "SRV", "NOERROR",
     [("SRV", (0, 100, 80, "web.demo.svc.cluster.local."))]),
    ("_http._udp.web.demo.svc.cluster.local.", "SRV", "NXDOMAIN", []),
    ("_pg._tcp.db.demo.svc.cluster.local.", "SRV", "NOERROR",
     [("SRV", (0, 100, 5432, "db-0.db.demo.svc.cluster.local.")),
      ("SRV", (0, 100, 5432, "db-1.db.demo.svc.cluster.local.")),
      ("SRV", (0, 100, 5432, "10-244-3-9.db.demo.svc.cluster.local."))]),
    ("10-244-1-5.demo.pod.cluster.local.", "A", "NOERROR", [("A", "10.244.1.5")]),
    ("not-an-ip.demo.pod.cluster.local.", "A", "NXDOMAIN", []),
    ("dns-version.cluster.local.", "TXT", "NOERROR", [("TXT", "1.1.0")]),
    ("demo.svc.cluster.local.", "A", "NOERROR", []),
    ("cluster.local.", "SOA", "NOERROR", []),
    ("web.demo.cluster.local.", "A", "NXDOMAIN", []),
    ("a.b.c.d.e.f.svc.cluster.local.", "A", "NXDOMAIN", []),
], ids=lambda v: v if isinstance(v, str) else None)
def test_answers(qname: str, qtype: str, rcode: str, records: list) -> None:
    """Each name of the specification gets its records; a known name without the type gets none."""
    result = answer(qname, qtype, VIEW)
    assert result.rcode == rcode
    assert [(r.rtype, r.data) for r in result.records] == records


def test_records_are_absolute_and_short_lived() -> None:
    """Record names end with a dot and carry CoreDNS's 5-second TTL."""
    [record] = answer("web.demo.svc.cluster.local", "A", VIEW).records
    assert record == Record("web.demo.svc.cluster.local.", "A", "10.96.0.20", 5)


def test_another_zone_is_served() -> None:
    """The cluster domain is a parameter (kubelet's --cluster-domain)."""
    assert [r.data for r in answer("web.demo.svc.kctl.test.", "A", VIEW, zone="kctl.test").records] == ["10.96.0.20"]


@pytest.mark.parametrize("qname, inside", [
    ("web.demo.svc.cluster.local.", True), ("cluster.local", True), ("Cluster.Local.", True),
    ("example.com.", False), ("notcluster.local.", False),
])
def test_in_zone(qname: str, inside: bool) -> None:
    """Only the zone and names below it are the cluster's; the rest is forwarded."""
    assert in_zone(qname, "cluster.local") is inside
