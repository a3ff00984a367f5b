"""Cluster DNS end to end: `kctl daemon` serves it, keeps kube-dns, and pods get the kubelet's resolv.conf.

A daemon on the session's private Podman (`--cluster-dns-port 0`: any free port, read back
from the kube-dns EndpointSlice), a Deployment with a Service and a headless Service with a
hostname/subdomain pod; the test asks the daemon's DNS straight (dnslib, from this process)
at loopback and at the address the slice advertises, checks a pod's /etc/resolv.conf through
`kctl exec`, and sends a query from a pod (answered: the pod CIDR) and from a container
outside the cluster (Podman's own network: neither a Node nor the pod CIDR), which must be
REFUSED. Reaching DNS through 10.96.0.10 needs the pod
network and kube-proxy rules: the test bed's end-to-end tests do that.
"""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
from dnslib import QTYPE, RCODE, DNSRecord

from kctl.machinery.errors import NotFound

from .conftest import NODE, Daemon, _node_ready, wait_for

pytestmark = pytest.mark.integration
IMAGE = "localhost/busybox:demo"
NS = "demo"


@pytest.fixture
def dns_daemon(podman_service, runtime, store_file: Path, api, tmp_path: Path) -> Iterator[Daemon]:
    """`kctl daemon` with cluster DNS on any free port; its node Ready when the test starts."""
    proc = Daemon(store=store_file, url=podman_service.url, log=tmp_path / "daemon.log",
                  extra=("--cluster-dns-port", "0"))
    proc.start()
    try:
        wait_for(lambda: _node_ready(api), what="node it-node Ready", daemon=proc)
        yield proc
    finally:
        proc.stop()


def _get(api, resource: str, name: str, namespace: str) -> dict | None:
    try:
        return api.get(api.resource(resource), name, namespace=namespace)
    except NotFound:
        return None


def _ready_slice(api) -> dict | None:
    found = _get(api, "endpointslices.discovery.k8s.io", "kube-dns", "kube-system")
    endpoints = (found or {}).get("endpoints") or []
    return found if endpoints and all(e["conditions"]["ready"] for e in endpoints) else None


def _ask(address: str, port: int, name: str, qtype: str = "A") -> DNSRecord:
    return DNSRecord.parse(DNSRecord.question(name, qtype).send(address, port, timeout=5))


def _addresses(reply: DNSRecord) -> list[str]:
    return sorted(str(rr.rdata) for rr in reply.rr if rr.rtype == QTYPE.A)


def _pod(name: str, script: str, **spec: object) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, **spec,
                     "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", script]}]}}


def _pod_ip(api, name: str) -> str | None:
    pod = _get(api, "pods", name, NS) or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (pod.get("status") or {}).get("conditions") or [])
    return (pod.get("status") or {}).get("podIP") if ready else None


# a DNS question over TCP (2-byte length first) for web.demo.svc.cluster.local A, id 0x1234, for busybox printf
QUERY = (r"\000\054\022\064\001\000\000\001\000\000\000\000\000\000\003web\004demo\003svc\007cluster"
         r"\005local\000\000\001\000\001")


def test_cluster_dns_from_the_daemon(dns_daemon: Daemon, api, kctl, podman_service) -> None:
    """Service, headless and pod-hostname names resolve; resolv.conf is the kubelet's; strangers are REFUSED."""
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    slice_ = wait_for(lambda: _ready_slice(api), what="the kube-dns slice, ready", daemon=dns_daemon)
    port = slice_["ports"][0]["port"]
    advertised = slice_["endpoints"][0]["addresses"][0]
    kube_dns = _get(api, "services", "kube-dns", "kube-system")
    assert kube_dns["spec"]["clusterIP"] == "10.96.0.10" and not kube_dns["spec"].get("selector")

    api.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": NS},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                         "template": {"metadata": {"labels": {"app": "web"}},
                                      "spec": {"containers": [{"name": "web", "image": IMAGE,
                                                               "imagePullPolicy": "Never",
                                                               "command": ["sleep", "3600"]}]}}}})
    web = api.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
                      "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}})
    api.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db", "namespace": NS},
                "spec": {"clusterIP": "None", "selector": {"app": "db-0"}, "ports": [{"port": 5432}]}})
    api.create(_pod("db-0", "sleep 3600", hostname="db-0", subdomain="db"))
    api.create(_pod("client", "sleep 3600"))

    for address in ("127.0.0.1", advertised):  # the daemon's informer sees the new Service within moments
        reply = wait_for(lambda: (r := _ask(address, port, "web.demo.svc.cluster.local")).rr and r,
                         what=f"web answered at {address}", daemon=dns_daemon)
        assert reply.header.rcode == RCODE.NOERROR and _addresses(reply) == [web["spec"]["clusterIP"]], address
    srv = _ask("127.0.0.1", port, "_http._tcp.web.demo.svc.cluster.local", "SRV")
    assert [str(rr.rdata) for rr in srv.rr] == ["0 100 80 web.demo.svc.cluster.local."]
    db_ip = wait_for(lambda: _pod_ip(api, "db-0"), what="pod db-0 Ready with an IP", daemon=dns_daemon)
    for name in ("db.demo.svc.cluster.local", "db-0.db.demo.svc.cluster.local"):
        reply = wait_for(lambda: (r := _ask("127.0.0.1", port, name)).rr and r, what=f"{name} answered",
                         daemon=dns_daemon)
        assert _addresses(reply) == [db_ip], name

    wait_for(lambda: _pod_ip(api, "client"), what="pod client Ready", daemon=dns_daemon)
    conf = kctl("exec", "-n", NS, "client", "--", "cat", "/etc/resolv.conf")
    assert conf.returncode == 0, conf.stderr
    lines = conf.stdout.decode().splitlines()
    assert "nameserver 10.96.0.10" in lines
    assert [line for line in lines if line.startswith("nameserver")] == ["nameserver 10.96.0.10"]
    search = next(line.split()[1:] for line in lines if line.startswith("search"))
    assert search[:3] == ["demo.svc.cluster.local", "svc.cluster.local", "cluster.local"]
    assert "options ndots:5" in lines

    # from a pod (busybox nc: TCP only), straight at the daemon: answered when its address is in the pod CIDR (the
    # pod network's), refused when the pod is on Podman's default network (no pod network on this host yet)
    pod_ip = _pod_ip(api, "client")
    in_cluster = ipaddress.ip_address(pod_ip) in ipaddress.ip_network("10.244.0.0/16")
    asked = kctl("exec", "-n", NS, "client", "--", "sh", "-c", _ask_over_tcp(advertised, port))
    assert asked.returncode == 0, asked.stderr
    assert _rcode(asked.stdout) == (RCODE.NOERROR if in_cluster else RCODE.REFUSED), (pod_ip, asked.stdout)

    # a container of the host outside the cluster (Podman's own network, not a Node, not the pod CIDR): REFUSED
    name = "kctl-it-dns-stranger"
    try:
        stranger = subprocess.run(["podman", "--url", podman_service.url, "run", "--rm", "--name", name, IMAGE,
                                   "sh", "-c", _ask_over_tcp(advertised, port)], capture_output=True, timeout=120)
    finally:
        subprocess.run(["podman", "--url", podman_service.url, "rm", "-f", "--ignore", name], capture_output=True,
                       timeout=120)
    assert stranger.returncode == 0, stranger.stderr
    assert _rcode(stranger.stdout) == RCODE.REFUSED, stranger.stdout


def _ask_over_tcp(address: str, port: int) -> str:
    """A shell line asking QUERY over TCP and printing the reply's first bytes as decimal numbers."""
    return f"printf '{QUERY}' | nc {address} {port} | od -An -tu1 | head -1"


def _rcode(printed: bytes) -> int:
    """The RCODE of a reply printed by _ask_over_tcp (after the length: id 0x1234, flags)."""
    numbers = [int(b) for b in printed.split()[:6]]
    assert numbers[2:4] == [0x12, 0x34], printed
    return numbers[5] & 0x0F
