"""Services across hosts, end to end, on a test bed of its own (issue 14's tests).

Hosts h1-h3 (tests/e2e/conftest.py's bed and daemon, but a bed for this module alone, so
that its last test can take it down and look for leftovers). One namespace for the module
holds a 3-replica Deployment `web` spread one pod per host (busybox httpd; the CGI
/cgi-bin/who answers "<pod name> <client address>", so a reply says which replica served
and whom it saw), a client pod on h1, and Services of each kind in front of `web`.
Verified: a ClusterIP by its DNS name reaches all replicas from h1; pod to pod across
hosts without NAT; a NodePort on h2 answers with replicas of h1 and h3; LoadBalancer
status lists the hosts; a headless Service resolves to the ready pod IPs (and SRV); an
unready replica leaves the Service within 2 s; deleting a pod refuses no client; a cut
and healed host gets its routes and rules back (about 20 s: not a `faults` test); `kctl node remove`
takes a host's routes off the others; and `TestBed.down` leaves nothing of kctl behind.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from kctl.testing import testbed
from kctl.testing.testbed import TestBed

from .conftest import GRACE, HOSTS, TOLERATION, Cluster, _skip_reason

pytestmark = pytest.mark.e2e

IMAGE = "localhost/busybox:demo"
NS = "e2e-services"
CLUSTER_CIDR = "10.244.0.0/16"   # kctl daemon's --cluster-cidr default
SLEEP = "trap 'exit 0' TERM; sleep 3600 & wait"
WHO_CGI = '#!/bin/sh\necho "Content-Type: text/plain"\necho\necho "$(hostname) $REMOTE_ADDR"\n'
# httpd as PID 1 ignores SIGTERM: a deleted replica keeps serving for its grace period.
SERVER = (f"mkdir -p /www/cgi-bin /tmp && printf '%s' {shlex.quote(WHO_CGI)} > /www/cgi-bin/who"
          " && chmod +x /www/cgi-bin/who && touch /tmp/ready && exec httpd -f -p 0.0.0.0:8080 -h /www")
GRACE_SECONDS = 3
UNREADY_WITHIN = 2.0             # seconds: the bound for an unready replica to leave a Service
REQUESTS = 30
LOOPED = 50                      # requests looping while a replica is deleted


def web_deployment() -> dict:
    """3 replicas, one per host (hosts tainted unreachable do not count), ready while /tmp/ready exists."""
    container = {"name": "httpd", "image": IMAGE, "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c", SERVER],
                 "ports": [{"name": "http", "containerPort": 8080}],
                 "readinessProbe": {"exec": {"command": ["test", "-f", "/tmp/ready"]},
                                    "periodSeconds": 1, "failureThreshold": 1, "successThreshold": 1}}
    spread = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
              "nodeTaintsPolicy": "Honor", "labelSelector": {"matchLabels": {"app": "web"}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": NS},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"terminationGracePeriodSeconds": GRACE_SECONDS,
                                           "topologySpreadConstraints": [spread], "containers": [container]}}}}


def service(name: str, kind: str = "ClusterIP", *, headless: bool = False) -> dict:
    spec: dict = {"type": kind, "selector": {"app": "web"},
                  "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
    if headless:
        spec["clusterIP"] = "None"
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def client_pod(name: str, node: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1, "containers": [
                {"name": "client", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
                 "command": ["sh", "-c", SLEEP]}]}}


@pytest.fixture(scope="module")
def testbed() -> Iterator[TestBed]:
    """h1-h3 on a bed of this module's own (overrides the session bed); removed after it, whatever happened."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    bed = TestBed(tempfile.mkdtemp(prefix="kctl-e2e-svc-bed-"))
    try:
        try:
            bed.up(len(HOSTS))
        except testbed.TestBedError as error:
            pytest.fail(f"the test bed did not come up: {error}")
        yield bed
    finally:
        bed.down()


@pytest.fixture(scope="module")
def web(cluster: Cluster) -> Iterator[Cluster]:
    """Namespace e2e-services: Deployment web Ready on h1-h3, Services web (ClusterIP), web-np (NodePort),
    web-lb (LoadBalancer), web-headless, and the client pod on h1; deleted after the module."""
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    try:
        cluster.apply(web_deployment(), service("web"), service("web-np", "NodePort"),
                      service("web-lb", "LoadBalancer"), service("web-headless", headless=True),
                      client_pod("client", "h1"))
        cluster.wait(lambda: sorted(p["spec"]["nodeName"] for p in ready_web(cluster)) == list(HOSTS),
                     what="3 web replicas Ready, one per host",
                     detail=lambda: [(p["metadata"]["name"], p["spec"].get("nodeName"), _ready(p))
                                     for p in cluster.pods(NS)])
        cluster.wait(lambda: any(p["metadata"]["name"] == "client" for p in cluster.running(NS)),
                     what="the client pod Running on h1")
        # programmed: the Service answers the client once (how fast is benchmarks/services.py's business)
        url = f"http://web.{NS}.svc.cluster.local/cgi-bin/who"
        answer = lambda: cluster.exec("client", NS, "sh", "-c", fetch_loop(url, 1)).stdout  # noqa: E731
        cluster.wait(lambda: any(address for _, address in replies(answer())),
                     what="Service web answering the client pod", timeout=60, detail=answer)
        yield cluster
    finally:
        if cluster.daemon.process is not None:  # the last test stops it itself
            cluster.delete_namespace(NS)


# -- helpers -------------------------------------------------------------------------------------------------


def _ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def ready_web(cluster: Cluster) -> list[dict]:
    """The web replicas that are Ready and not being deleted."""
    return [p for p in cluster.pods(NS) if (p["metadata"].get("labels") or {}).get("app") == "web"
            and _ready(p) and not p["metadata"].get("deletionTimestamp")]


def web_by_node(cluster: Cluster) -> dict[str, dict]:
    return {p["spec"]["nodeName"]: p for p in ready_web(cluster)}


def get_service(cluster: Cluster, name: str) -> dict:
    return cluster.api.get(cluster.api.resource("services"), name, namespace=NS)


def in_pod(cluster: Cluster, pod: str, script: str, *, timeout: float = 120) -> subprocess.CompletedProcess:
    """`kctl exec POD -- sh -c SCRIPT` in the module's namespace; fails the test when kctl exec itself fails."""
    done = cluster.exec(pod, NS, "sh", "-c", script, timeout=timeout)
    assert done.returncode == 0, f"exec in {pod} failed ({done.returncode}): {done.stderr.decode()}"
    return done


def fetch_loop(url: str, count: int, *, pause: float = 0.0) -> str:
    """A shell loop fetching url count times, 5 s each (busybox 1.35's `wget -T` segfaults); FAILED on errors."""
    rest = f"sleep {pause}; " if pause else ""
    return (f"i=0; while [ $i -lt {count} ]; do timeout 5 wget -q -O- {url} 2>&1 || echo FAILED; "
            f"{rest}i=$((i+1)); done")


def replies(output: bytes) -> list[tuple[str, str]]:
    """(replica, client address) of each reply line of fetch_loop's output; other lines as (line, "")."""
    found = []
    for line in output.decode().splitlines():
        fields = line.split()
        found.append((fields[0], fields[1]) if len(fields) == 2 and not line.startswith("wget") else (line, ""))
    return found


def on_host(cluster: Cluster, name: str, *argv: str) -> str:
    """stdout of a command run in the bed host's network namespace (ip, nft: the host's own view)."""
    done = subprocess.run([*cluster.bed.host(name).nsenter(), *argv], capture_output=True, timeout=60)
    return done.stdout.decode() if done.returncode == 0 else ""


def routes(cluster: Cluster, name: str) -> dict[str, str]:
    """The host's IPv4 routes that go via a gateway: destination -> gateway."""
    table = json.loads(on_host(cluster, name, "ip", "-j", "-4", "route", "show") or "[]")
    return {r["dst"]: r.get("gateway", "") for r in table if r.get("gateway")}


def pod_cidr(cluster: Cluster, node: str) -> str:
    return cluster.api.get(cluster.api.resource("nodes"), node)["spec"].get("podCIDR", "")


def kctl_table(cluster: Cluster, name: str) -> str:
    """`nft list table ip kctl` on the host ("" when it has none)."""
    return on_host(cluster, name, "nft", "list", "table", "ip", "kctl")


def endpoint_addresses(cluster: Cluster, service_name: str, *, ready_only: bool = False) -> set[str]:
    """The addresses in the Service's EndpointSlices (only the ready endpoints' with ready_only)."""
    slices = [s for s in cluster.api.list(cluster.api.resource("endpointslices"), namespace=NS)[0]
              if (s["metadata"].get("labels") or {}).get("kubernetes.io/service-name") == service_name]
    return {a for s in slices for e in s.get("endpoints") or () for a in e.get("addresses") or ()
            if not ready_only or (e.get("conditions") or {}).get("ready")}


def routes_to_others(cluster: Cluster, name: str, hosts: list[str]) -> bool:
    """Whether host `name` routes every other host's podCIDR via that host's address (flannel host-gw)."""
    have = routes(cluster, name)
    return all(have.get(pod_cidr(cluster, other)) == cluster.bed.host(other).address
               for other in hosts if other != name)


# -- tests -------------------------------------------------------------------------------------------------


def test_cluster_ip_by_dns_name_reaches_all_three_replicas(web: Cluster) -> None:
    """From a pod on h1, 30 requests to http://web.NS.svc.cluster.local all answer, from the replicas of h1, h2 and
    h3, which see the client pod's own IP (no NAT between pods)."""
    url = f"http://web.{NS}.svc.cluster.local/cgi-bin/who"
    client_ip = next(p for p in web.pods(NS) if p["metadata"]["name"] == "client")["status"]["podIP"]
    got = replies(in_pod(web, "client", fetch_loop(url, REQUESTS)).stdout)
    assert len(got) == REQUESTS and {address for _, address in got} == {client_ip}, "\n".join(map(str, got))
    assert {name for name, _ in got} == {p["metadata"]["name"] for p in ready_web(web)}, got


def test_pod_on_h1_reaches_pod_on_h3_by_ip_and_is_seen_by_its_own_ip(web: Cluster) -> None:
    """Pod IPs are in the cluster CIDR; h1's client reaches h3's replica by IP and that replica sees the client's IP."""
    server = web_by_node(web)["h3"]
    client = next(p for p in web.pods(NS) if p["metadata"]["name"] == "client")
    server_ip, client_ip = server["status"]["podIP"], client["status"]["podIP"]
    for ip in (server_ip, client_ip):
        assert ipaddress.ip_address(ip) in ipaddress.ip_network(CLUSTER_CIDR), ip
    assert ipaddress.ip_address(server_ip) in ipaddress.ip_network(pod_cidr(web, "h3"))
    got = replies(in_pod(web, "client", fetch_loop(f"http://{server_ip}:8080/cgi-bin/who", 3)).stdout)
    assert got == [(server["metadata"]["name"], client_ip)] * 3


def test_node_port_on_h2_answers_with_replicas_from_h1_and_h3(web: Cluster) -> None:
    """From the control host, the NodePort at h2's address reaches (among others) the replicas on h1 and h3."""
    node_port = get_service(web, "web-np")["spec"]["ports"][0]["nodePort"]
    url = f"http://{web.bed.host('h2').address}:{node_port}/cgi-bin/who"
    seen = set()
    for _ in range(REQUESTS):
        with urllib.request.urlopen(url, timeout=5) as reply:
            seen.add(reply.read().decode().split()[0])
    by_node = web_by_node(web)
    assert {by_node["h1"]["metadata"]["name"], by_node["h3"]["metadata"]["name"]} <= seen, seen


def test_load_balancer_status_lists_the_hosts_and_answers_on_its_port(web: Cluster) -> None:
    """type LoadBalancer (ServiceLB): status.loadBalancer.ingress lists h1-h3's IPs; port 80 answers on each."""
    def ingress() -> set[str]:
        status = get_service(web, "web-lb").get("status") or {}
        return {i.get("ip", "") for i in (status.get("loadBalancer") or {}).get("ingress") or ()}

    addresses = {web.bed.host(name).address for name in HOSTS}
    web.wait(lambda: ingress() == addresses, what="web-lb's ingress = the hosts' IPs", timeout=30, detail=ingress)
    for address in sorted(addresses):
        with urllib.request.urlopen(f"http://{address}:80/cgi-bin/who", timeout=5) as reply:
            assert reply.read().decode().split()[0] in {p["metadata"]["name"] for p in ready_web(web)}


def test_headless_service_resolves_to_the_ready_pod_ips_with_srv(web: Cluster) -> None:
    """nslookup of the headless Service gives the ready pods' IPs; SRV for its named port gives one per pod."""
    name = f"web-headless.{NS}.svc.cluster.local"
    looked = in_pod(web, "client", f"nslookup -type=A {name}").stdout.decode()
    answers = looked.split("\n\n", 1)[-1]  # after the "Server:/Address:" block
    assert set(re.findall(r"Address:\s*(\d+\.\d+\.\d+\.\d+)\s*$", answers, re.M)) == {
        p["status"]["podIP"] for p in ready_web(web)}, looked
    srv = in_pod(web, "client", f"nslookup -type=SRV _http._tcp.{name}").stdout.decode()
    assert len(re.findall(r"service = \d+ \d+ 8080 \S+", srv)) == 3, srv


def test_unready_replica_leaves_the_service_within_2_s(web: Cluster) -> None:
    """Readiness lost (the probe's file removed): 2 s after the store shows it, no request reaches that replica."""
    victim = web_by_node(web)["h2"]["metadata"]["name"]
    in_pod(web, victim, "rm /tmp/ready")
    try:
        def unready() -> float | None:
            pod = next((p for p in web.pods(NS) if p["metadata"]["name"] == victim), None)
            return time.monotonic() if pod is not None and not _ready(pod) else None

        since = web.wait(unready, what=f"{victim} not Ready", timeout=30)
        time.sleep(max(0.0, since + UNREADY_WITHIN - time.monotonic()))
        url = f"http://web.{NS}.svc.cluster.local/cgi-bin/who"
        got = replies(in_pod(web, "client", fetch_loop(url, REQUESTS)).stdout)
        assert len(got) == REQUESTS and victim not in {name for name, _ in got}, got
    finally:
        in_pod(web, victim, "touch /tmp/ready")
        web.wait(lambda: len(ready_web(web)) == 3, what="3 web replicas Ready again")


def test_deleting_a_pod_refuses_no_client_while_others_are_ready(web: Cluster) -> None:
    """Requests looping through the ClusterIP while a replica is deleted (and replaced) all succeed."""
    victim = web_by_node(web)["h3"]["metadata"]["name"]
    url = f"http://web.{NS}.svc.cluster.local/cgi-bin/who"
    # about 25 s of requests (from 3 s before the delete): the grace period, the replacement's start
    loop = subprocess.Popen([sys.executable, "-m", "kctl", "exec", "client", "-n", NS, "--", "sh", "-c",
                             fetch_loop(url, LOOPED, pause=0.2)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "KCTL_STORE": str(web.store)})
    try:
        time.sleep(3)
        deleted = web.kctl("delete", "pod", victim, "-n", NS, "--wait=false")
        assert deleted.returncode == 0, deleted.stderr.decode()
        out, err = loop.communicate(timeout=150)
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.communicate()
    assert loop.returncode == 0, err.decode()
    got = replies(out)
    failed = [(i, line) for i, (line, address) in enumerate(got) if not address]  # i: about 0.5 s per request
    assert not failed and len(got) == LOOPED, f"{len(got)} lines, failures (index, line): {failed}"
    web.wait(lambda: len(ready_web(web)) == 3, what="3 web replicas Ready after the replacement")


def test_host_cut_off_and_healed_gets_routes_and_rules_back(web: Cluster) -> None:
    """h3 cut: its replica replaced on h1/h2 and not ready; healed: the old endpoint gone, routes and rules back."""
    evicted = web_by_node(web)["h3"]
    evicted_ip = evicted["status"]["podIP"]
    web.bed.cut("h3")
    try:
        web.wait(lambda: web.ready("h3") == "Unknown", what="h3 Ready=Unknown", timeout=GRACE + 30)
        web.wait(lambda: len(ready_web(web)) == 3 and "h3" not in web_by_node(web),
                 what="3 web replicas Ready away from h3", timeout=GRACE + TOLERATION + 60)
        # while h3 is away its pod is only terminating (as in Kubernetes): listed, but not ready
        web.wait(lambda: evicted_ip not in endpoint_addresses(web, "web", ready_only=True),
                 what="h3's old endpoint not ready", timeout=30, detail=lambda: endpoint_addresses(web, "web"))
    finally:
        web.bed.heal("h3")
    web.wait(lambda: web.ready("h3") == "True", what="h3 Ready again after the heal")
    web.wait(lambda: evicted_ip not in endpoint_addresses(web, "web"), what="h3's old endpoint gone after the heal",
             timeout=60, detail=lambda: endpoint_addresses(web, "web"))
    cluster_ip = get_service(web, "web")["spec"]["clusterIP"]
    web.wait(lambda: all(routes_to_others(web, h, list(HOSTS)) for h in HOSTS), what="routes between h1-h3",
             timeout=30, detail=lambda: {h: routes(web, h) for h in HOSTS})
    web.wait(lambda: cluster_ip in kctl_table(web, "h3"), what="h3's kctl table holding web's ClusterIP",
             timeout=30)
    assert {p["status"]["podIP"] for p in ready_web(web)} == endpoint_addresses(web, "web")
    ready_ips = endpoint_addresses(web, "web")

    def h3_rules_current() -> bool:  # the table h3 had before the cut still names the old endpoint until it syncs
        table = kctl_table(web, "h3")
        return all(ip in table for ip in ready_ips) and evicted_ip not in table

    web.wait(h3_rules_current, what="h3's rules naming the current endpoints only", timeout=60,
             detail=lambda: kctl_table(web, "h3"))
    # from h3's own network namespace, through the rules it got back (with a default route, as a real host has:
    # without a route covering the Service CIDR, the host's connect() fails before netfilter sees it)
    subprocess.run([*web.bed.host("h3").nsenter(), "ip", "route", "replace", "default", "via", web.bed.state.gateway],
                   check=True, capture_output=True, timeout=30)
    def ask() -> str:
        return on_host(web, "h3", "timeout", "5", "wget", "-q", "-t", "1", "-O-", f"http://{cluster_ip}/cgi-bin/who")

    web.wait(lambda: ask(), what="h3 reaching the ClusterIP after the heal", timeout=30)  # rules/neighbours settle
    seen = set()
    for _ in range(REQUESTS):
        got = ask()
        seen.add(got.split()[0] if got else "FAILED")
    assert seen == {p["metadata"]["name"] for p in ready_web(web)}, seen


def test_removing_a_host_removes_its_routes_on_the_others(web: Cluster) -> None:
    """A 4th host gets a podCIDR routed from h1-h3; `kctl node remove` takes those routes (and its own) away."""
    host = web.bed.add()
    try:
        web.add_node(host.name)
        web.wait(lambda: web.ready(host.name) == "True", what=f"{host.name} Ready")
        web.wait(lambda: pod_cidr(web, host.name), what=f"{host.name}'s podCIDR")
        cidr = pod_cidr(web, host.name)
        everyone = [*HOSTS, host.name]
        web.wait(lambda: all(routes_to_others(web, h, everyone) for h in everyone),
                 what=f"routes between h1-h3 and {host.name}", timeout=30,
                 detail=lambda: {h: routes(web, h) for h in everyone})
        removed = web.kctl("node", "remove", host.name, "--timeout", "2m", timeout=150)
        assert removed.returncode == 0, removed.stderr.decode()
        web.wait(lambda: not any(cidr in routes(web, h) for h in HOSTS),
                 what=f"{host.name}'s podCIDR {cidr} unrouted on h1-h3", timeout=30,
                 detail=lambda: {h: routes(web, h) for h in HOSTS})
        others = {pod_cidr(web, h) for h in HOSTS}
        web.wait(lambda: not others & set(routes(web, host.name)), timeout=30,
                 what=f"{host.name}'s own routes to h1-h3's podCIDRs removed with it",
                 detail=lambda: routes(web, host.name))
        web.wait(lambda: kctl_table(web, host.name) == "", timeout=30,
                 what=f"{host.name}'s kube-proxy table (ip kctl) removed with it")
    finally:
        if web.ready(host.name):  # the test failed before removing it
            web.kctl("node", "remove", host.name, "--force")


def test_testbed_down_leaves_no_kctl_table_route_or_network(web: Cluster) -> None:
    """Last: the bed's pod networks are its hosts' own; daemon stopped and bed down, nothing of them is left."""
    folder, netns = web.bed.folder, [h.netns for h in web.bed.hosts]
    subnet = web.bed.state.gateway.rsplit(".", 1)[0] + "."          # the bed's 10.77.<id>.
    bridge = web.bed.state.bridge
    cidrs = {pod_cidr(web, h) for h in HOSTS}
    for host in HOSTS:  # each host's Podman network lives in its own config folder, inside the bed's
        config = Path(web.bed.host(host).network_config_dir)
        assert any(pod_cidr(web, host) in p.read_text() for p in config.glob("*.json")), (host, config)
    web.delete_namespace(NS)
    web.daemon.stop()
    web.bed.down()
    assert not Path(folder).exists()
    assert not set(netns) & set(os.listdir("/run/netns") if os.path.isdir("/run/netns") else ())
    ruleset = subprocess.run(["nft", "list", "ruleset"], capture_output=True, timeout=30).stdout.decode()
    assert subnet not in ruleset
    routes_here = json.loads(subprocess.run(["ip", "-j", "-4", "route", "show"], capture_output=True,
                                            timeout=30).stdout or b"[]")
    assert not [r for r in routes_here if r.get("dev") == bridge or r.get("gateway", "").startswith(subnet)
                or (r.get("dst") in cidrs and r.get("gateway", "").startswith("10.77."))], routes_here
