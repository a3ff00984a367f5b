"""The rendered rules do what they say in a real kernel: a private network namespace, real `nft`, real TCP."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from proxy_cases import ep, eps, svc

PROBE = Path(__file__).parent / "netns_probe.py"
BRIDGE_PROBE = Path(__file__).parent / "bridge_probe.py"


def _missing() -> str | None:
    for tool in ("nft", "unshare", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if os.geteuid() != 0:
        return "a network namespace and nft need root"
    return None


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> dict:
    """Rules for three Services loaded (twice) in a throwaway namespace, and what connections met there."""
    pods = [ep("10.244.1.2", "h1"), ep("10.244.1.3", "h1")]
    services = [
        svc("web", type_="NodePort", ports=[{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP",
                                             "nodePort": 30080}]),
        svc("empty", cluster_ip="10.96.0.21", type_="NodePort",
            ports=[{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30081}]),
        svc("sticky", cluster_ip="10.96.0.22", sessionAffinity="ClientIP"),
    ]
    slices = [eps("web", pods), eps("empty", [], ports=[]), eps("sticky", pods)]
    case = tmp_path_factory.mktemp("nft") / "case.json"
    case.write_text(json.dumps({"services": services, "slices": slices, "node": "h1", "addresses": ["10.77.0.11"],
                                "cidr": "10.244.0.0/16"}))
    done = subprocess.run(["unshare", "-n", sys.executable, str(PROBE), str(case)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


def test_clusterip_reaches_every_ready_endpoint(probe):
    """Connections to the ClusterIP are spread at random over the ready endpoints."""
    assert set(probe["clusterip"]) == {"10.244.1.2", "10.244.1.3"}


def test_nodeport_on_the_node_address(probe):
    """The NodePort answers on the node's address."""
    assert set(probe["nodeport"]) <= {"10.244.1.2", "10.244.1.3"} and len(probe["nodeport"]) == 10


def test_session_affinity_keeps_a_client_on_one_endpoint(probe):
    """sessionAffinity ClientIP: every connection of one client meets the same endpoint."""
    assert len(set(probe["sticky"])) == 1 and probe["sticky"][0] in ("10.244.1.2", "10.244.1.3")


@pytest.mark.parametrize("what", ["empty", "empty-nodeport", "undefined-port"])
def test_no_endpoints_is_refused_at_once(probe, what):
    """A Service without endpoints, or a ClusterIP port it does not serve, refuses the connection (no hang)."""
    assert probe[what] == "refused"


def test_other_tables_are_left_alone(probe):
    """Loading the script (twice) leaves the other tables in place."""
    assert "table ip other" in probe["tables"] and "table ip kctl" in probe["tables"]


def test_in_place_sync_keeps_affinity_and_drops_what_went(probe):
    """Synced in place, a client keeps its endpoint; a removed Service leaves no chain behind."""
    assert set(probe["sticky-after-in-place"]) == {probe["sticky"][0]}
    assert "expires" in probe["listing-without-first"], "the affinity set still holds the client"
    assert "demo/web/" not in probe["listing-without-first"]
    assert "demo/sticky/" in probe["listing-without-first"]
    assert probe["sticky-after-removal"] == probe["sticky"][0]


def test_pods_on_one_bridge_reach_their_service(tmp_path):
    """From a pod, the ClusterIP reaches the pod itself (hairpin) and its neighbour on the same bridge."""
    pods = [ep("10.244.1.2", "h1"), ep("10.244.1.3", "h1")]
    case = tmp_path / "case.json"
    case.write_text(json.dumps({"services": [svc("web")], "slices": [eps("web", pods)]}))
    done = subprocess.run(["unshare", "-n", sys.executable, str(BRIDGE_PROBE), str(case)], capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)["answers"]
    assert {a.split()[0] for a in answers} == {"10.244.1.2", "10.244.1.3"}, answers
    assert all(a.split()[1] == "10.244.1.1" for a in answers), "a backend reaching its own Service is masqueraded"
