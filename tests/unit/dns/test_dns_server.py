"""The cluster DNS server (kctl.dns.server) over real UDP and TCP sockets on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from dnslib import QTYPE, RCODE, DNSRecord

from kctl.dns.server import ClusterDNS, host_nameservers

SERVICES = {("demo", "web"): {"metadata": {"name": "web", "namespace": "demo"},
                              "spec": {"clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.20"]}}}


class View:
    def __init__(self, services: dict) -> None:
        self.services = services

    def service(self, namespace: str, name: str) -> dict | None:
        return self.services.get((namespace, name))

    def endpoint_slices(self, namespace: str, service: str) -> list[dict]:
        return []


@pytest.fixture
def servers() -> Iterator[tuple[ClusterDNS, ClusterDNS]]:
    """A cluster DNS for cluster.local whose upstream is another serving zone upstream.test."""
    upstream = ClusterDNS(View({("x", "api"): {"metadata": {"name": "api", "namespace": "x"},
                                                "spec": {"clusterIP": "192.0.2.7"}}}),
                          port=0, zone="upstream.test", upstreams=[])
    upstream.start()
    try:
        dns = ClusterDNS(View(SERVICES), port=0, upstreams=[("127.0.0.1", upstream.port)])
        dns.start()
        try:
            yield dns, upstream
        finally:
            dns.close()
    finally:
        upstream.close()


def _ask(port: int, name: str, qtype: str = "A", *, tcp: bool = False) -> DNSRecord:
    return DNSRecord.parse(DNSRecord.question(name, qtype).send("127.0.0.1", port, tcp=tcp, timeout=5))


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_cluster_names_are_answered_authoritatively(servers, tcp: bool) -> None:
    """A Service name resolves to its ClusterIP over UDP and TCP, with the AA flag."""
    dns, _ = servers
    reply = _ask(dns.port, "web.demo.svc.cluster.local", tcp=tcp)
    assert reply.header.rcode == RCODE.NOERROR and reply.header.aa == 1
    assert [str(rr.rdata) for rr in reply.rr] == ["10.96.0.20"]


def test_a_missing_name_is_nxdomain_with_the_zone_soa(servers) -> None:
    """NXDOMAIN carries the zone's SOA, so resolvers cache the negative answer briefly."""
    dns, _ = servers
    reply = _ask(dns.port, "nope.demo.svc.cluster.local")
    assert reply.header.rcode == RCODE.NXDOMAIN
    assert [QTYPE[rr.rtype] for rr in reply.auth] == ["SOA"]


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_other_names_are_forwarded_upstream(servers, tcp: bool) -> None:
    """A name outside the cluster zone gets the upstream's answer."""
    dns, _ = servers
    reply = _ask(dns.port, "api.x.svc.upstream.test", tcp=tcp)
    assert [str(rr.rdata) for rr in reply.rr] == ["192.0.2.7"]


def test_no_upstream_answering_is_servfail() -> None:
    """When every upstream fails the client gets SERVFAIL, not a timeout."""
    dns = ClusterDNS(View(SERVICES), port=0, upstreams=[])
    dns.start()
    try:
        assert _ask(dns.port, "example.com").header.rcode == RCODE.SERVFAIL
    finally:
        dns.close()


def test_close_releases_the_port() -> None:
    """After close() the same port can be bound again."""
    dns = ClusterDNS(View(SERVICES), port=0, upstreams=[])
    port = dns.port
    dns.start()
    dns.close()
    again = ClusterDNS(View(SERVICES), port=port, upstreams=[])
    again.close()


def test_host_nameservers(tmp_path: Path) -> None:
    """resolv.conf's nameserver lines are the upstreams; an unreadable file gives none."""
    conf = tmp_path / "resolv.conf"
    conf.write_text("# generated\nsearch example.com\nnameserver 192.0.2.1\nnameserver 2001:db8::1\noptions ndots:2\n")
    assert host_nameservers(str(conf)) == [("192.0.2.1", 53), ("2001:db8::1", 53)]
    assert host_nameservers(str(tmp_path / "missing")) == []


def test_port_zero_looks_again_when_the_udp_port_is_taken_for_tcp(monkeypatch) -> None:
    """With port 0, a UDP port whose number another process holds for TCP is given back and another tried."""
    import errno

    import dnslib.server

    real = dnslib.server.DNSServer
    refused: list[int] = []

    def server(*args, **kwargs):
        if kwargs.get("tcp") and not refused:
            refused.append(kwargs["port"])
            raise OSError(errno.EADDRINUSE, "Address already in use")
        return real(*args, **kwargs)

    monkeypatch.setattr(dnslib.server, "DNSServer", server)
    dns = ClusterDNS(View(SERVICES), port=0, upstreams=[])
    dns.start()
    try:
        assert refused and dns.port != 0
        assert _ask(dns.port, "web.demo.svc.cluster.local", tcp=True).header.rcode == RCODE.NOERROR
    finally:
        dns.close()
