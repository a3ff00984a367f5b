"""The cluster DNS is no open resolver: only loopback, Nodes and the pod network may ask (REFUSED otherwise)."""

from __future__ import annotations

import pytest
from dnslib import RCODE, DNSRecord

from kctl.daemon.clusterdns import SourcePolicy, node_internal_ips
from kctl.dns.server import ClusterDNS

NODES = [{"status": {"addresses": [{"type": "InternalIP", "address": "10.77.0.11"},
                                   {"type": "Hostname", "address": "h1"}]}},
         {"status": {"addresses": [{"type": "InternalIP", "address": "10.77.0.12"},
                                   {"type": "ExternalIP", "address": "203.0.113.9"}]}},
         {"status": {}}]


class View:
    def service(self, namespace: str, name: str) -> dict | None:
        return {"spec": {"clusterIP": "10.96.0.20"}} if (namespace, name) == ("demo", "web") else None

    def endpoint_slices(self, namespace: str, service: str) -> list[dict]:
        return []


@pytest.mark.parametrize("source, allowed", [
    ("127.0.0.1", True),
    ("127.8.9.1", True),
    ("::1", True),
    ("10.244.3.7", True),            # a pod (inside --cluster-cidr)
    ("10.77.0.11", True),            # a Node's InternalIP
    ("::ffff:10.77.0.12", True),     # the same, as an IPv4-mapped IPv6 source
    ("203.0.113.9", False),          # a Node's ExternalIP is not its InternalIP
    ("10.245.0.1", False),           # just outside the cluster CIDR
    ("192.0.2.1", False),
    ("not-an-ip", False),
    ("", False),
])
def test_source_policy(source: str, allowed: bool) -> None:
    """Loopback, the cluster CIDR and Nodes' InternalIPs are allowed; everything else is not."""
    policy = SourcePolicy(cluster_cidr="10.244.0.0/16", node_addresses=lambda: node_internal_ips(NODES))
    assert policy(source) is allowed


def test_node_addresses_are_read_again_after_a_second() -> None:
    """A Node that joins is allowed once the policy's short cache has expired."""
    now, nodes = [0.0], [["10.77.0.11"]]
    policy = SourcePolicy(cluster_cidr="10.244.0.0/16", node_addresses=lambda: nodes[0], clock=lambda: now[0])
    assert not policy("10.77.0.13")
    nodes[0] = ["10.77.0.11", "10.77.0.13"]
    now[0] = 5.0
    assert policy("10.77.0.13")


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
@pytest.mark.parametrize("allowed", [True, False], ids=["allowed", "refused"])
def test_a_source_not_allowed_is_refused(tcp: bool, allowed: bool) -> None:
    """Over real UDP and TCP: a question from a source the check refuses gets REFUSED and no records."""
    seen: list[str] = []

    def allow(source: str) -> bool:
        seen.append(source)
        return allowed

    dns = ClusterDNS(View(), port=0, upstreams=[], allow=allow)
    dns.start()
    try:
        reply = DNSRecord.parse(DNSRecord.question("web.demo.svc.cluster.local", "A").send(
            "127.0.0.1", dns.port, tcp=tcp, timeout=5))
    finally:
        dns.close()
    assert seen == ["127.0.0.1"]
    if allowed:
        assert reply.header.rcode == RCODE.NOERROR and [str(r.rdata) for r in reply.rr] == ["10.96.0.20"]
    else:
        assert reply.header.rcode == RCODE.REFUSED and reply.rr == []


def test_a_refused_forward_never_reaches_the_upstreams() -> None:
    """A name outside the zone from a refused source is not forwarded (no open recursion)."""
    dns = ClusterDNS(View(), port=0, upstreams=[("127.0.0.1", 9)], allow=lambda source: False)
    dns.start()
    try:
        reply = DNSRecord.parse(DNSRecord.question("example.org", "A").send("127.0.0.1", dns.port, timeout=5))
    finally:
        dns.close()
    assert reply.header.rcode == RCODE.REFUSED
