"""Pods' resolv.conf (kctl.agent.poddns) as the kubelet forms it, and its way into the Podman pod spec."""

from __future__ import annotations

import pytest

from kctl.agent.containers import sandbox_spec
from kctl.agent.poddns import HostResolvConf, PodDNS, ResolvConf, parse_resolv_conf, pod_dns
from kctl.client.clusterconfig import ClusterNetwork, configmaps
from kctl.runtime.interface import ExecResult

from podharness import make_pod

NET = ClusterNetwork(cluster_dns=("10.96.0.10",), cluster_domain="cluster.local")
HOST = ResolvConf(nameservers=("192.0.2.53",), searches=("corp.example",), options=("timeout:2", "ndots:1"))
CLUSTER_SEARCH = ("demo.svc.cluster.local", "svc.cluster.local", "cluster.local")


def pod(**spec: object) -> dict:
    return make_pod("web", namespace="demo", **spec)


@pytest.mark.parametrize("spec, host, want", [
    ({}, HOST, PodDNS(("10.96.0.10",), (*CLUSTER_SEARCH, "corp.example"), ("ndots:5",))),
    ({"dnsPolicy": "ClusterFirst"}, None, PodDNS(("10.96.0.10",), CLUSTER_SEARCH, ("ndots:5",))),
    ({"dnsPolicy": "ClusterFirst", "hostNetwork": True}, HOST, PodDNS()),
    ({"dnsPolicy": "ClusterFirstWithHostNet", "hostNetwork": True}, HOST,
     PodDNS(("10.96.0.10",), (*CLUSTER_SEARCH, "corp.example"), ("ndots:5",))),
    ({"dnsPolicy": "Default"}, HOST, PodDNS()),
    ({"dnsPolicy": "Default", "dnsConfig": {"nameservers": ["1.1.1.1"], "options": [{"name": "ndots", "value": "3"}]}},
     HOST, PodDNS(("192.0.2.53", "1.1.1.1"), ("corp.example",), ("timeout:2", "ndots:3"))),
    ({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"], "searches": ["a.example"],
                                         "options": [{"name": "edns0"}]}},
     HOST, PodDNS(("1.1.1.1",), ("a.example",), ("edns0",))),
    ({"dnsConfig": {"nameservers": ["10.96.0.10", "1.1.1.1"], "searches": ["cluster.local", "x.example"],
                    "options": [{"name": "ndots", "value": "2"}, {"name": "single-request"}]}},
     None, PodDNS(("10.96.0.10", "1.1.1.1"), (*CLUSTER_SEARCH, "x.example"), ("ndots:2", "single-request"))),
], ids=["cluster-first-default", "cluster-first-no-host", "host-network-gets-default", "with-host-net",
        "default", "default-merged", "none", "cluster-first-merged"])
def test_pod_dns_follows_the_policy_and_merges_dns_config(spec: dict, host: ResolvConf | None, want: PodDNS) -> None:
    """Each dnsPolicy gives the kubelet's nameservers, searches and options; dnsConfig is merged in."""
    assert pod_dns(pod(**spec), NET, host=host) == want


def test_cluster_first_without_cluster_dns_falls_back_to_default() -> None:
    """No cluster DNS address configured: ClusterFirst is Default, as the kubelet does."""
    assert pod_dns(pod(), ClusterNetwork(cluster_dns=()), host=HOST) == PodDNS()


def test_too_many_nameservers_are_cut_with_the_kubelet_warning() -> None:
    """More than 3 nameservers: the first 3, and a DNSConfigForming message naming the line applied."""
    dns = pod_dns(pod(dnsConfig={"nameservers": ["1.1.1.1", "1.0.0.1", "8.8.8.8"]}), NET)
    assert dns.servers == ("10.96.0.10", "1.1.1.1", "1.0.0.1")
    assert dns.warnings == ("Nameserver limits were exceeded, some nameservers have been omitted, the applied "
                            "nameserver line is: 10.96.0.10 1.1.1.1 1.0.0.1",)


@pytest.mark.parametrize("extra, kept", [
    ([f"d{i}.example" for i in range(40)], 32),
    (["x" * 254, "ok.example"], 4),
    ([("y" * 200) + f".{i}" for i in range(12)], 3 + 9),
], ids=["over-32-names", "a-name-over-253", "line-over-2048"])
def test_search_line_limits(extra: list[str], kept: int) -> None:
    """At most 32 search names, none over 253 characters, a line of at most 2048; the cut is warned about."""
    dns = pod_dns(pod(dnsConfig={"searches": extra}), NET)
    assert len(dns.searches) == kept and dns.searches[:3] == CLUSTER_SEARCH
    assert len(" ".join(dns.searches)) <= 2048 and all(len(s) <= 253 for s in dns.searches)
    assert len(dns.warnings) == 1 and dns.warnings[0].startswith("Search Line limits were exceeded")


def test_within_limits_there_is_no_warning() -> None:
    """A pod inside every limit gets no DNSConfigForming message."""
    assert pod_dns(pod(), NET, host=HOST).warnings == ()


def test_parse_resolv_conf() -> None:
    """nameserver lines add up, the last search line wins (trailing dots dropped), options merge by name."""
    text = ("# generated\nnameserver 10.0.0.2\nsearch old.example\nnameserver 10.0.0.3 ; x\n"
            "search a.example. b.example\noptions ndots:2 rotate\noptions ndots:3\n")
    assert parse_resolv_conf(text) == ResolvConf(("10.0.0.2", "10.0.0.3"), ("a.example", "b.example"),
                                                 ("ndots:3", "rotate"))


class HostRuntime:
    """A runtime whose host has a resolv.conf (or cannot be reached); counts the reads."""

    def __init__(self, text: str | None) -> None:
        self.text = text
        self.reads = 0

    def run_on_host(self, argv: list[str], *, stdin: bytes | None = None, timeout: float = 30.0) -> ExecResult:
        self.reads += 1
        if self.text is None:
            raise RuntimeError("host unreachable")
        assert argv == ["cat", "/etc/resolv.conf"]
        return ExecResult(0, self.text.encode(), b"")


def test_host_resolv_conf_is_read_through_the_runtime_and_cached() -> None:
    """The host's resolv.conf is read once per runtime until the cache's time is up; a failure reads as None."""
    now = [0.0]
    cache = HostResolvConf(ttl=100.0, clock=lambda: now[0])
    good, bad = HostRuntime("nameserver 10.0.0.2\nsearch corp.example\n"), HostRuntime(None)
    assert cache.get(good) == ResolvConf(("10.0.0.2",), ("corp.example",))
    assert cache.get(good) is not None and good.reads == 1
    assert cache.get(bad) is None and cache.get(object()) is None
    now[0] = 101.0
    cache.get(good)
    assert good.reads == 2


def test_sandbox_spec_carries_the_dns_fields() -> None:
    """sandbox_spec(dns=...) puts servers, searches and options into the PodSandboxSpec; without it, none."""
    dns = PodDNS(("10.96.0.10",), CLUSTER_SEARCH, ("ndots:5",))
    spec = sandbox_spec(pod(), dns=dns)
    assert (spec.dns_servers, spec.dns_searches, spec.dns_options) == (dns.servers, dns.searches, dns.options)
    plain = sandbox_spec(pod())
    assert (plain.dns_servers, plain.dns_searches, plain.dns_options) == ((), (), ())


def test_a_synced_pod_gets_the_cluster_resolv_conf(node) -> None:
    """The agent makes the Podman pod with the resolv.conf of the cluster settings in kube-system's ConfigMaps."""
    for cm in configmaps(ClusterNetwork(cluster_dns=("10.96.0.99",), cluster_domain="k.test")):
        node.put(cm)
    node.sync(pod())
    [sandbox] = node.runtime._pods.values()
    assert sandbox.spec.dns_servers == ("10.96.0.99",)
    assert sandbox.spec.dns_searches[:3] == ("demo.svc.k.test", "svc.k.test", "k.test")
    assert sandbox.spec.dns_options == ("ndots:5",)


def test_a_cut_nameserver_line_is_a_warning_event(node) -> None:
    """Limits exceeded when the sandbox is made: a Warning DNSConfigForming Event on the Pod."""
    node.sync(pod(dnsPolicy="None", dnsConfig={"nameservers": ["1.1.1.1", "1.0.0.1", "8.8.8.8", "8.8.4.4"]}))
    [sandbox] = node.runtime._pods.values()
    assert sandbox.spec.dns_servers == ("1.1.1.1", "1.0.0.1", "8.8.8.8")
    assert [(e.type, e.reason) for e in node.events if e.reason == "DNSConfigForming"] == [
        ("Warning", "DNSConfigForming")]
