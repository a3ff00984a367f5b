"""The pod network across hosts (kctl.agent.podnetwork), end to end on the test bed (tests/e2e/conftest.py).

Hosts h1-h3 are network namespaces on one bridge (one L2 segment), each with its own
Podman (own network definitions) reached over SSH. Verified: each host gets the `kctl`
bridge with its Node's podCIDR and a route (proto 76) to every other host's podCIDR via
that host's address; a pod on h1 fetches from a pod on h3 by its IP and the server sees
the client pod's own IP (no NAT between pods); a pod reaching an address outside the
cluster CIDR (the control host) is masqueraded to its host's address; Pod status has
the real podIP and hostIP; the pod network's definitions live in the host's own folder,
so `testbed down` (deleting the namespaces and folders) leaves nothing of it behind.
"""

from __future__ import annotations

import contextlib
import http.server
import ipaddress
import json
import subprocess
import threading
from pathlib import Path
from typing import Iterator

import pytest

from kctl.agent.podnetwork.plan import NETWORK_NAME, ROUTE_PROTO, TABLE
from kctl.testing.testbed import Host

from .conftest import HOSTS, Cluster

pytestmark = pytest.mark.e2e

IMAGE = "localhost/busybox:demo"
# an httpd whose CGI answers with the client's address as the server sees it
SERVER = ("mkdir -p /www/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho $REMOTE_ADDR\\n'"
          " > /www/cgi-bin/ip && chmod +x /www/cgi-bin/ip && exec httpd -f -p 8080 -h /www")
SLEEP = "trap 'exit 0' TERM; sleep 3600 & wait"


def pod(name: str, namespace: str, node: str, script: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1, "containers": [
                {"name": "app", "image": IMAGE, "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c", script]}]}}


def on_host(host: Host, *argv: str) -> str:
    """Run a command in the host's network namespace; its stdout."""
    done = subprocess.run([*host.nsenter(), *argv], capture_output=True, text=True, timeout=30, check=False)
    return done.stdout


def routes(host: Host) -> dict[str, str]:
    """The host's kctl routes: podCIDR -> gateway."""
    listed = json.loads(on_host(host, "ip", "-j", "route", "show", "proto", str(ROUTE_PROTO)) or "[]")
    return {row["dst"]: row.get("gateway", "") for row in listed}


def pod_cidr(cluster: Cluster, name: str) -> str:
    return (cluster.api.get(cluster.api.resource("nodes"), name).get("spec") or {}).get("podCIDR", "")


@contextlib.contextmanager
def address_echo(address: str) -> Iterator[int]:
    """An HTTP server on `address` (this machine, outside the cluster CIDR) answering with the client's IP."""

    class Echo(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = f"{self.client_address[0]}\n".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((address, 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_pods_reach_each_other_across_hosts_by_their_own_ips(cluster: Cluster, namespace: str):
    """h1's pod fetches from h3's pod by IP and h3 sees h1's pod IP; routes on every host; outside is masqueraded."""
    bed = cluster.bed
    hosts = {name: bed.host(name) for name in HOSTS}
    cidrs = {name: cluster.wait(lambda name=name: pod_cidr(cluster, name), what=f"node {name}'s podCIDR")
             for name in HOSTS}
    for name, host in hosts.items():
        wanted = {cidrs[other]: hosts[other].address for other in HOSTS if other != name}
        cluster.wait(lambda host=host, wanted=wanted: all(routes(host).get(c) == via for c, via in wanted.items()),
                     what=f"{name}'s routes to the other hosts' pods", detail=lambda host=host: routes(host))
        assert Path(host.network_config_dir, f"{NETWORK_NAME}.json").exists()  # in the host's folder
        assert f"table ip {TABLE}" in on_host(host, "nft", "list", "tables")

    cluster.apply(pod("server", namespace, "h3", SERVER), pod("client", namespace, "h1", SLEEP))
    running = cluster.wait(lambda: len(cluster.running(namespace)) == 2 and
                           {p["metadata"]["name"]: p for p in cluster.running(namespace)},
                           what="server and client Running")
    server_ip, client_ip = (running[name]["status"]["podIP"] for name in ("server", "client"))
    assert ipaddress.ip_address(server_ip) in ipaddress.ip_network(cidrs["h3"])
    assert ipaddress.ip_address(client_ip) in ipaddress.ip_network(cidrs["h1"])
    assert running["server"]["status"]["hostIP"] == hosts["h3"].address
    assert running["client"]["status"]["hostIP"] == hosts["h1"].address

    def fetch(url: str) -> str:
        """What the server at url answered, as an address ("" on failure; busybox 1.35's `wget -T` segfaults)."""
        done = cluster.exec("client", namespace, "timeout", "5", "wget", "-q", "-O", "-", url, timeout=60)
        text = done.stdout.decode().strip() if done.returncode == 0 else ""
        return text.strip("[]").removeprefix("::ffff:")  # httpd's REMOTE_ADDR is [::ffff:A.B.C.D]

    seen = cluster.wait(lambda: fetch(f"http://{server_ip}:8080/cgi-bin/ip"), what="h1's pod reaching h3's pod")
    assert seen == client_ip  # no NAT between pods

    gateway = bed.state.gateway  # this machine on the bed's bridge: outside the cluster CIDR
    with address_echo(gateway) as port:
        seen = cluster.wait(lambda: fetch(f"http://{gateway}:{port}/"), what="h1's pod reaching the control host")
    assert seen == hosts["h1"].address  # masqueraded to its host's address


def test_removed_host_leaves_no_route_and_loses_its_own(cluster: Cluster):
    """`kctl node remove`: the other hosts' routes to it go, and its own table, routes and network are removed."""
    host = cluster.bed.add()
    h1 = cluster.bed.host("h1")
    try:
        cluster.add_node(host.name)
        cidr = cluster.wait(lambda: pod_cidr(cluster, host.name), what=f"node {host.name}'s podCIDR")
        cluster.wait(lambda: routes(h1).get(cidr) == host.address, what=f"h1's route to {host.name}'s pods",
                     detail=lambda: routes(h1))
        cluster.wait(lambda: len(routes(host)) >= len(HOSTS) and Path(host.network_config_dir, "kctl.json").exists(),
                     what=f"{host.name}'s own pod network", detail=lambda: routes(host))
        removed = cluster.kctl("node", "remove", host.name, "--timeout", "1m", timeout=90)
        assert removed.returncode == 0, removed.stderr.decode()
        cluster.wait(lambda: cidr not in routes(h1), what=f"h1's route to {host.name}'s pods gone",
                     detail=lambda: routes(h1))
        cluster.wait(lambda: not routes(host) and f"table ip {TABLE}" not in on_host(host, "nft", "list", "tables")
                     and not Path(host.network_config_dir, f"{NETWORK_NAME}.json").exists(),
                     what=f"{host.name}'s own routes, table and network removed", detail=lambda: routes(host))
    finally:
        if cluster.ready(host.name):  # the test failed before removing it
            cluster.kctl("node", "remove", host.name, "--force")
