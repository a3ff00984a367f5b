"""kube-proxy's nftables rendering: golden files per case, the real `nft` accepts them, and the model beneath."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from proxy_cases import ADDRESSES, CASES, CLUSTER_CIDR, CURRENT, LISTING, ep, eps, svc

from kctl.agent.proxy import TABLE, render
from kctl.agent.proxy.nftables import table_objects
from kctl.agent.proxy.model import Endpoint, service_ports, usable

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("KCTL_UPDATE_GOLDEN") == "1"


def rendered(name: str) -> str:
    services, slices, node, addresses = CASES[name]
    return render(services, slices, node=node, node_addresses=addresses, cluster_cidr=CLUSTER_CIDR,
                  current=CURRENT.get(name))


def flat(text: str) -> str:
    """The script with each map element on its own `add element T MAP { KEY : VALUE }` line."""
    out, container = [], None
    for line in text.splitlines():
        if container is None and line.startswith("add element ") and line.endswith("{"):
            container = line[:-1].rstrip()
        elif container is not None and line == "}":
            container = None
        elif container is not None:
            entry = line.strip()
            out.append(entry if entry.startswith("#") else f"{container} {{ {entry.rstrip(',')} }}")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", sorted(CASES), ids=sorted(CASES))
def test_golden(name):
    """The script for each case is exactly its golden file (KCTL_UPDATE_GOLDEN=1 rewrites them)."""
    path = GOLDEN / f"{name}.nft"
    text = rendered(name)
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"no golden file {path}: run with KCTL_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text()


def test_every_golden_file_has_a_case():
    """No stale golden file is left behind."""
    assert sorted(p.stem for p in GOLDEN.glob("*.nft")) == sorted(CASES)


def test_script_owns_one_table_only():
    """Every command names table ip kctl, and the table is created, deleted and made again first."""
    for name in CASES:
        commands = [line for line in flat(rendered(name)).splitlines() if line and not line.startswith("#")]
        first = [c.split(" {")[0] for c in commands[:3]]
        if name in CURRENT:
            assert first[:2] == [f"add table {TABLE}", f"flush table {TABLE}"]
        else:
            assert first == [f"add table {TABLE}", f"delete table {TABLE}", f"add table {TABLE}"]
        for command in commands:
            assert re.match(rf"(add|delete|flush) (table|chain|rule|map|set|element) {TABLE}( |$)", command), command


@pytest.mark.parametrize("name, wanted, unwanted", [
    ("clusterip", ["dnat ip to numgen random mod 3 map { 0 : 10.244.1.2 . 8080 , 1 : 10.244.2.2 . 8080 , "
                   "2 : 10.244.3.2 . 8080 }", "10.96.0.20 . tcp . 80 : goto service-",
                   "ip saddr != 10.244.0.0/16 jump mark-for-masquerade"],
     ["reject-chain }"]),
    ("no-endpoints-reject", ["no-endpoint-services { 10.96.0.20 . tcp . 80 : goto reject-chain }",
                             "no-endpoint-nodeports { tcp . 30080 : goto reject-chain }"], ["dnat to"]),
    ("nodeport", ["service-nodeports { tcp . 30080 : goto external-", "node-addresses { 10.77.0.12, 192.168.50.2 }"],
     []),
    ("loadbalancer", ["service-nodeports { tcp . 8000 : goto external-", "tcp . 31000 : goto external-",
                      "service-ips { 10.77.0.12 . tcp . 8000 : goto external-"], []),
    ("session-affinity", ["flags dynamic,timeout ; timeout 600s", "update @affinity-", "ip saddr @affinity-"], []),
    ("external-local-here", ["goto local-", "dnat to 10.244.2.2:8080", "fib saddr type local"], []),
    ("external-local-elsewhere", [" drop\n"], ["goto local-"]),
    ("internal-local", ["10.96.0.20 . tcp . 80 : goto local-", "no-endpoint-services { 10.96.0.21 . tcp . 80 : drop }"],
     ["dnat to 10.244.2.2", "dnat to 10.244.2.7"]),
    ("terminating", ["dnat to 10.244.1.2:8080"], ["numgen", "10.244.2.2", "10.244.3.2"]),
    ("terminating-only", ["dnat to 10.244.1.2:8080"], ["dnat to 10.244.2.2"]),
    ("multi-port", ["meta l4proto udp dnat ip to numgen random mod 2 map { 0 : 10.244.1.5 . 5353 , "
                    "1 : 10.244.2.5 . 53 }", "meta l4proto tcp dnat to 10.244.1.5:9153", "10.96.0.10 . udp . 53 :"],
     ["10.244.2.5 . 9153"]),
    ("no-rules", ["tcp . 30090 : goto external-"], ["headless", "demo/ext/"]),
    ("port-conflict", ["# demo/b/tcp/http: tcp . 8000 is already demo/a/tcp/http's; skipped"], []),
    ("external-ips", ["192.0.2.10 . tcp . 80 : goto external-"], []),
], ids=lambda v: v if isinstance(v, str) else None)
def test_case_behaviour(name, wanted, unwanted):
    """Each case's script says what the case is about (a readable check beside the golden file)."""
    text = flat(rendered(name))
    for fragment in wanted:
        assert fragment in text, fragment
    for fragment in unwanted:
        assert fragment not in text, fragment


def test_in_place_sync_keeps_wanted_sets_and_drops_the_rest():
    """Given the current table, the script flushes rules and maps, keeps affinity sets, deletes what went."""
    assert table_objects(LISTING) == {("map", "service-ips"), ("set", "node-addresses"),
                                      ("set", "affinity-STALESET"), ("chain", "services"),
                                      ("chain", "service-OLDOLDOL-demo/old/tcp/http")}
    lines = rendered("in-place").splitlines()
    assert "delete table ip kctl" not in lines
    assert {"flush map ip kctl service-ips", "flush set ip kctl node-addresses", "delete set ip kctl affinity-STALESET",
            "delete chain ip kctl service-OLDOLDOL-demo/old/tcp/http"} <= set(lines)
    assert not any(line.startswith(("flush set ip kctl affinity-", "delete chain ip kctl services")) for line in lines)
    assert table_objects("") == set()


def test_hairpin_masquerade():
    """A pod that reaches its own Service (and may land on itself) is masqueraded (hairpin)."""
    assert re.search(r"add rule ip kctl service-\S+ ip saddr \{ 10.244.1.2, 10.244.2.2, 10.244.3.2 \} "
                     r"jump mark-for-masquerade", rendered("clusterip"))
    text = rendered("session-affinity")  # per-endpoint chains: exact
    for ip in ("10.244.1.2", "10.244.2.2"):
        assert re.search(rf"add rule ip kctl endpoint-\S+__{re.escape(ip)}/8080 ip saddr {re.escape(ip)} "
                         r"jump mark-for-masquerade", text)


def test_output_is_deterministic():
    """Input order does not change the script (golden files stay stable)."""
    services, slices, node, addresses = CASES["internal-local"]
    assert render(services[::-1], slices[::-1], node=node, node_addresses=addresses[::-1],
                  cluster_cidr=CLUSTER_CIDR) == rendered("internal-local")


@pytest.mark.parametrize("kwargs, message", [
    ({"cluster_cidr": "10.244.0.0/33"}, "cluster CIDR '10.244.0.0/33' is not a network"),
    ({"cluster_cidr": "fd00::/64"}, "is not IPv4"),
    ({"node_addresses": ["10.77.0.300"]}, "node address '10.77.0.300' is not an IP address"),
    ({"node_addresses": ["fd00::1"]}, "node address 'fd00::1' is not IPv4"),
], ids=["bad-cidr", "v6-cidr", "bad-address", "v6-address"])
def test_bad_input_is_one_clear_error(kwargs, message):
    """A bad CIDR or node address is a ValueError naming it."""
    args = {"node": "h1", "node_addresses": ADDRESSES, "cluster_cidr": CLUSTER_CIDR, **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        render([svc("web")], [eps("web", [])], **args)


@pytest.mark.parametrize("endpoints, expected", [
    ([Endpoint("10.0.0.1", 80), Endpoint("10.0.0.2", 80, ready=False, serving=False)], ["10.0.0.1"]),
    ([Endpoint("10.0.0.1", 80, ready=False, serving=True, terminating=True), Endpoint("10.0.0.2", 80)],
     ["10.0.0.2"]),
    ([Endpoint("10.0.0.1", 80, ready=False, serving=True, terminating=True),
      Endpoint("10.0.0.2", 80, ready=False, serving=False, terminating=True)], ["10.0.0.1"]),
    ([Endpoint("10.0.0.1", 80, ready=True, serving=True, terminating=True)], ["10.0.0.1"]),
    ([Endpoint("10.0.0.1", 80, ready=False, serving=False)], []),
], ids=["ready-only", "terminating-skipped", "terminating-fallback", "publish-not-ready-terminating", "none"])
def test_usable_endpoints(endpoints, expected):
    """Ready endpoints take new connections; serving terminating ones only when none is ready."""
    assert [e.ip for e in usable(endpoints)] == expected


def test_model_joins_ports_by_name_and_protocol():
    """A Service port's endpoints come from slice ports of the same name and protocol; unknown ready is ready."""
    service = svc("web", ports=[{"name": "http", "port": 80, "protocol": "TCP"},
                                {"name": "http", "port": 80, "protocol": "UDP"}])
    slices = [eps("web", [{"addresses": ["10.244.1.2"], "nodeName": "h1"}],
                  ports=[{"name": "http", "port": 8080, "protocol": "TCP"}]),
              eps("web", [ep("10.244.1.3", "h1")], name="web-v6", ports=[{"name": "http", "port": 8080}]),
              dict(eps("web", [ep("fd00::1", "h1")], name="web-x"), addressType="IPv6")]
    tcp, udp = service_ports([service], slices)
    assert [(e.ip, e.port, e.ready) for e in tcp.endpoints] == [("10.244.1.2", 8080, True), ("10.244.1.3", 8080, True)]
    assert udp.endpoints == ()


def _nft_usable() -> str | None:
    for tool in ("nft", "unshare"):
        if shutil.which(tool) is None:
            return f"the {tool} command is not installed (Debian packages nftables, util-linux)"
    if os.geteuid() != 0:
        return "nft -c needs root (CAP_NET_ADMIN)"
    return None


@pytest.mark.skipif(_nft_usable() is not None, reason=str(_nft_usable()))
@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.nft")), ids=lambda p: p.stem)
def test_nft_accepts_golden_file(path, tmp_path):
    """The real `nft -c -f` (check only) accepts every golden file, in a private namespace holding its case's table."""
    before = tmp_path / "current.nft"
    before.write_text(CURRENT.get(path.stem, ""))
    result = subprocess.run(["unshare", "-n", "sh", "-ec", 'nft -f "$1"; nft -c -f "$2"', "check", str(before),
                             str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
