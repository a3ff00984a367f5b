"""The pod network plugin (kctl.agent.podnetwork): its plan, its passes against MemoryRuntime, sandboxes joining it."""

from __future__ import annotations

import json
import threading
import time

import pytest
from podharness import make_pod

from kctl.agent.podnetwork import PodNetwork
from kctl.agent.podnetwork.plan import (NodeRoute, current_routes, delete_table_script, render_table, route_commands,
                                        wanted_routes)
from kctl.agent.sandbox import NETWORK_NOT_READY
from kctl.runtime.interface import ExecResult, PodSandboxSpec
from kctl.runtime.memory import MemoryRuntime

LIST_ROUTES = ["ip", "-j", "route", "show", "proto", "76"]


def node(name: str, cidr: str = "", ip: str = "") -> dict:
    """A Node with an optional podCIDR and InternalIP."""
    obj: dict = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}, "status": {}}
    if cidr:
        obj["spec"] = {"podCIDR": cidr, "podCIDRs": [cidr]}
    if ip:
        obj["status"] = {"addresses": [{"type": "InternalIP", "address": ip}]}
    return obj


FLEET = [node("h1", "10.244.1.0/24", "10.77.0.11"), node("h2", "10.244.2.0/24", "10.77.0.12"),
         node("h3", "10.244.3.0/24", "10.77.0.13")]


# -- the plan (pure) ----------------------------------------------------------------------------------

def test_table_script_is_exact():
    """The nft script: replaced atomically, a null SNAT inside the cluster CIDR before netavark's, masquerade out."""
    assert render_table(cluster_cidr="10.244.0.0/16", pod_cidr="10.244.1.0/24") == (
        "table ip kctl-net\n"
        "delete table ip kctl-net\n"
        "table ip kctl-net {\n"
        "\tchain postrouting {\n"
        "\t\ttype nat hook postrouting priority srcnat - 10; policy accept;\n"
        "\t\t# pod to pod (any host): no NAT, the other pod sees this pod's own address\n"
        "\t\tip saddr 10.244.0.0/16 ip daddr 10.244.0.0/16 meta mark & 0x4000 == 0 snat ip to ip saddr\n"
        "\t\t# pod to outside the cluster CIDR: the host's address\n"
        "\t\tip saddr 10.244.1.0/24 ip daddr != 10.244.0.0/16 ip daddr != 224.0.0.0/4 masquerade\n"
        "\t}\n"
        "}\n")
    assert delete_table_script() == "table ip kctl-net\ndelete table ip kctl-net\n"


def test_wanted_routes_skip_this_node_and_incomplete_ones():
    """Routes go to every other Node with a podCIDR and an InternalIP that is not this host's."""
    nodes = [*FLEET, node("h4", "10.244.4.0/24"), node("h5", "", "10.77.0.15"),
             node("h6", "10.244.6.0/24", "10.77.0.11")]
    assert wanted_routes(nodes, me="h1", my_ip="10.77.0.11") == {
        "10.244.2.0/24": NodeRoute("h2", "10.244.2.0/24", "10.77.0.12"),
        "10.244.3.0/24": NodeRoute("h3", "10.244.3.0/24", "10.77.0.13")}


@pytest.mark.parametrize(("current", "wanted", "commands"), [
    ({}, {"10.244.2.0/24": "10.77.0.12"},
     [["ip", "route", "replace", "10.244.2.0/24", "via", "10.77.0.12", "proto", "76"]]),
    ({"10.244.2.0/24": "10.77.0.12"}, {"10.244.2.0/24": "10.77.0.12"}, []),
    ({"10.244.2.0/24": "10.77.0.99"}, {"10.244.2.0/24": "10.77.0.12"},
     [["ip", "route", "replace", "10.244.2.0/24", "via", "10.77.0.12", "proto", "76"]]),
    ({"10.244.2.0/24": "10.77.0.12", "10.244.9.0/24": "10.77.0.19"}, {"10.244.2.0/24": "10.77.0.12"},
     [["ip", "route", "del", "10.244.9.0/24", "proto", "76"]]),
    ({"10.244.9.0/24": "10.77.0.19"}, {}, [["ip", "route", "del", "10.244.9.0/24", "proto", "76"]]),
], ids=["add", "keep", "gateway-moved", "stale-deleted", "all-gone"])
def test_route_commands(current, wanted, commands):
    """Only the differences become commands: replace what is missing or wrong, delete what no Node wants."""
    routes = {cidr: NodeRoute("n", cidr, via) for cidr, via in wanted.items()}
    assert route_commands(current, routes) == commands


def test_current_routes_parse_ip_json():
    """`ip -j route show proto 76` output becomes dst -> gateway; junk reads as no routes."""
    listed = json.dumps([{"dst": "10.244.2.0/24", "gateway": "10.77.0.12", "dev": "eth0", "flags": []},
                         {"dst": "10.9.9.9", "gateway": "10.77.0.13", "dev": "eth0", "flags": []}])
    assert current_routes(listed) == {"10.244.2.0/24": "10.77.0.12", "10.9.9.9/32": "10.77.0.13"}
    assert current_routes("not json") == {} and current_routes("") == {}


# -- passes against MemoryRuntime ---------------------------------------------------------------------

@pytest.fixture
def network(api):
    """make(name, runtime): a PodNetwork whose Node informer has listed (passes are run by the test)."""
    stop = threading.Event()

    def make(name: str = "h1", runtime: MemoryRuntime | None = None, *, pod_cidr_grace: float = 0.0) -> PodNetwork:
        plugin = PodNetwork(api, name, runtime or MemoryRuntime(), host_ip="10.77.0.11", pod_cidr_grace=pod_cidr_grace)
        plugin.nodes.start(stop)
        assert plugin.nodes.wait_for_sync(10)
        return plugin

    yield make
    stop.set()


def create(api, *nodes: dict) -> None:
    for obj in nodes:
        api.create(obj)


def wait_nodes(plugin: PodNetwork, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(plugin.nodes.list()) != count:
        assert time.monotonic() < deadline, "the Node informer did not catch up"
        time.sleep(0.02)


def commands(runtime: MemoryRuntime) -> list[list[str]]:
    return [argv for argv, _ in runtime.host_commands]


def node_events(api, reason: str) -> list[dict]:
    return [e for e in api.list(api.resource("events"), namespace="default")[0] if e["reason"] == reason]


def test_pass_makes_network_forwarding_table_and_routes(api, network):
    """A Node with a podCIDR: the kctl bridge with it, ip_forward, the nft table, a route per other Node."""
    create(api, *FLEET)
    runtime = MemoryRuntime()
    plugin = network("h1", runtime)
    assert plugin.pod_network() is None  # nothing decided yet: sandboxes wait
    assert plugin.reconcile()
    assert runtime.networks == {"kctl": "10.244.1.0/24"}
    assert plugin.pod_network() == "kctl"
    assert commands(runtime) == [
        ["id", "-u"],
        ["sysctl", "-w", "net.ipv4.ip_forward=1"],
        ["nft", "-f", "-"],
        LIST_ROUTES,
        ["ip", "route", "replace", "10.244.2.0/24", "via", "10.77.0.12", "proto", "76"],
        ["ip", "route", "replace", "10.244.3.0/24", "via", "10.77.0.13", "proto", "76"]]
    nft_stdin = runtime.host_commands[2][1]
    assert nft_stdin == render_table(cluster_cidr="10.244.0.0/16", pod_cidr="10.244.1.0/24").encode()


def test_pass_fixes_only_what_differs(api, network):
    """Routes already right are left alone; a stale one (a Node gone) is deleted, a moved one replaced."""
    create(api, *FLEET)
    runtime = MemoryRuntime()
    runtime.set_host_result(ExecResult(0, json.dumps([
        {"dst": "10.244.2.0/24", "gateway": "10.77.0.12"}, {"dst": "10.244.3.0/24", "gateway": "10.77.0.99"},
        {"dst": "10.244.7.0/24", "gateway": "10.77.0.17"}]).encode(), b""), argv=LIST_ROUTES)
    plugin = network("h1", runtime)
    assert plugin.reconcile()
    assert [argv for argv in commands(runtime) if argv[:2] == ["ip", "route"]] == [
        ["ip", "route", "replace", "10.244.3.0/24", "via", "10.77.0.13", "proto", "76"],
        ["ip", "route", "del", "10.244.7.0/24", "proto", "76"]]


def test_node_removed_its_route_goes_on_the_next_pass(api, network):
    """When a Node is deleted, the other hosts' next pass deletes the route to its podCIDR."""
    create(api, *FLEET)
    runtime = MemoryRuntime()
    plugin = network("h1", runtime)
    runtime.set_host_result(ExecResult(0, json.dumps([
        {"dst": "10.244.2.0/24", "gateway": "10.77.0.12"},
        {"dst": "10.244.3.0/24", "gateway": "10.77.0.13"}]).encode(), b""), argv=LIST_ROUTES)
    api.delete(api.resource("nodes"), "h3")
    wait_nodes(plugin, 2)
    assert plugin.reconcile()
    assert [argv for argv in commands(runtime) if argv[:2] == ["ip", "route"]] == [
        ["ip", "route", "del", "10.244.3.0/24", "proto", "76"]]


@pytest.mark.parametrize(("nodes", "uid", "reason"), [
    ([node("h1", "", "10.77.0.11")], "0", None),
    ([node("h1", "10.244.1.0/24", "10.77.0.11")], "1000", "PodNetworkRootless"),
    ([node("h1", "10.244.1.0/24", "10.77.0.11"), node("h2", "10.244.2.0/24", "10.77.0.11")], "0",
     "PodNetworkSharedHost"),
], ids=["no-podCIDR", "rootless", "shared-host"])
def test_default_network_kept(api, network, nodes, uid, reason):
    """No podCIDR, a rootless host, or two Nodes on one host: Podman's default network, said once."""
    create(api, *nodes)
    runtime = MemoryRuntime()
    runtime.set_host_result(ExecResult(0, f"{uid}\n".encode(), b""), argv=["id", "-u"])
    plugin = network("h1", runtime)
    assert plugin.reconcile() and plugin.reconcile()
    assert plugin.pod_network() == ""
    assert runtime.networks == {}
    assert not [argv for argv in commands(runtime) if argv[0] in ("nft", "ip", "sysctl")]
    if reason:
        assert len(node_events(api, reason)) == 1
        assert node_events(api, reason)[0]["count"] == 1
    else:
        assert node_events(api, "PodNetworkRootless") == [] and node_events(api, "PodNetworkSharedHost") == []


def test_network_with_another_subnet_remade_when_unused(api, network):
    """A kctl network of another subnet that no pod uses is removed and made with the podCIDR."""
    create(api, *FLEET)
    runtime = MemoryRuntime()
    runtime.ensure_network("kctl", subnet="10.244.9.0/24", gateway="10.244.9.1", labels={})
    plugin = network("h1", runtime)
    assert plugin.reconcile()
    assert runtime.networks == {"kctl": "10.244.1.0/24"}
    assert runtime.count("remove_network") == 1


def test_network_with_another_subnet_kept_while_pods_use_it(api, network):
    """A kctl network of another subnet with a running pod in it is kept, with a Warning on the Node."""
    create(api, *FLEET)
    runtime = MemoryRuntime()
    runtime.ensure_network("kctl", subnet="10.244.9.0/24", gateway="10.244.9.1", labels={})
    runtime.create_pod(PodSandboxSpec(name="old", labels={}, network="kctl"))
    plugin = network("h1", runtime)
    assert plugin.reconcile()
    assert runtime.networks == {"kctl": "10.244.9.0/24"}
    assert plugin.pod_network() == "kctl"
    [event] = node_events(api, "PodNetworkSubnetMismatch")
    assert event["type"] == "Warning" and "10.244.9.0/24" in event["message"]


def test_failed_command_is_one_warning_and_retried(api, network):
    """nft failing: the pass says so once (the command's last word), the network is still joined."""
    create(api, *FLEET)
    runtime = MemoryRuntime()
    runtime.set_host_result(ExecResult(1, b"", b"Error: syntax error\nnft: boom\n"), argv=["nft"])
    plugin = network("h1", runtime)
    assert not plugin.reconcile() and not plugin.reconcile()
    assert plugin.pod_network() == "kctl"
    [event] = node_events(api, "PodNetworkFailed")
    assert event["type"] == "Warning" and event["count"] == 1
    assert event["message"] == "pod network of node h1: nft table ip kctl-net: nft -f - exited 1: nft: boom"


def test_unreachable_host_leaves_pods_waiting(api, network):
    """A host that cannot be reached: the pass fails and new sandboxes keep waiting."""
    create(api, *FLEET)
    runtime = MemoryRuntime()
    runtime.host_error = "ssh: connect to host 10.77.0.11 port 22: No route to host"
    plugin = network("h1", runtime)
    assert not plugin.reconcile()
    assert plugin.pod_network() is None


def test_stop_after_node_removed_tears_the_host_down(api, network):
    """Stopping after the Node is gone removes the table, kctl's routes and the network; not when it exists."""
    create(api, *FLEET)
    runtime = MemoryRuntime()
    runtime.set_host_result(ExecResult(0, json.dumps([{"dst": "10.244.2.0/24", "gateway": "10.77.0.12"}]).encode(),
                                       b""), argv=LIST_ROUTES)
    plugin = network("h1", runtime)
    assert plugin.reconcile()
    plugin.stop()
    assert runtime.networks == {"kctl": "10.244.1.0/24"}  # the Node is still there: the host keeps it
    before = len(runtime.host_commands)
    api.delete(api.resource("nodes"), "h1")
    plugin.stop()
    assert runtime.networks == {}
    after = runtime.host_commands[before:]
    assert after[0] == (["nft", "-f", "-"], delete_table_script().encode())
    assert [argv for argv, _ in after[1:]] == [LIST_ROUTES, ["ip", "route", "del", "10.244.2.0/24", "proto", "76"]]


def test_started_plugin_reconciles_on_its_own(api, network):
    """start(): the first pass runs by itself once the Nodes are listed (pods wait for it)."""
    create(api, *FLEET)
    runtime = MemoryRuntime()
    plugin = PodNetwork(api, "h1", runtime, host_ip="10.77.0.11")
    plugin.start()
    try:
        assert plugin.wait_first_pass(10)
        assert plugin.pod_network() == "kctl"
    finally:
        plugin.stop()


# -- sandboxes join it ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("joined", "network"), [("kctl", "kctl"), ("", "")], ids=["pod-network", "default"])
def test_sandbox_joins_the_pod_network(node, joined, network):
    """A new sandbox joins the network the plugin names ("" : Podman's default)."""
    node.ctx.pod_network = lambda: joined
    node.runtime.ensure_network("kctl", subnet="10.244.1.0/24", gateway="10.244.1.1", labels={})
    node.sync(make_pod())
    [pod] = node.runtime.list_pods({})
    assert pod.ip.startswith("10.244.1.") == (network == "kctl")
    assert node.pod["status"]["podIP"] == pod.ip


def test_sandbox_waits_while_the_network_is_not_ready(node):
    """No sandbox is made while the pod network is not ready; the pod waits in ContainerCreating."""
    node.ctx.pod_network = lambda: None
    result = node.sync(make_pod())
    assert node.runtime.list_pods({}) == []
    waiting = node.pod["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting == {"reason": "ContainerCreating", "message": NETWORK_NOT_READY}
    assert result.requeue_after is not None and result.requeue_after <= 1.0


def test_one_bad_route_does_not_stop_the_others(api, network):
    """A route the kernel refuses (gateway not on this segment) fails alone; the next is still made."""
    create(api, *FLEET)
    runtime = MemoryRuntime()
    runtime.set_host_result(ExecResult(2, b"", b"Error: Nexthop has invalid gateway.\n"),
                            argv=["ip", "route", "replace", "10.244.2.0/24"])
    plugin = network("h1", runtime)
    assert not plugin.reconcile()
    assert ["ip", "route", "replace", "10.244.3.0/24", "via", "10.77.0.13", "proto", "76"] in commands(runtime)
    [event] = node_events(api, "PodNetworkFailed")
    assert event["message"] == ("pod network of node h1: route to 10.244.2.0/24: ip route replace exited 2: "
                                "Error: Nexthop has invalid gateway.")


def test_teardown_of_an_unreachable_host_gives_up_at_once(api, network):
    """A removed host that cannot be reached: one failed attempt, not one wait per step; its network is left."""
    create(api, *FLEET)
    runtime = MemoryRuntime()
    plugin = network("h1", runtime)
    assert plugin.reconcile()
    before = len(runtime.host_commands)
    runtime.host_error = "cannot be reached"
    api.delete(api.resource("nodes"), "h1")
    plugin.stop()
    assert len(runtime.host_commands) == before + 1
    assert runtime.networks == {"kctl": "10.244.1.0/24"}


def test_no_pass_while_the_host_is_known_unreachable(api):
    """While the heartbeat says the host cannot be reached, the started plugin runs no commands."""
    create(api, *FLEET)
    runtime = MemoryRuntime()
    plugin = PodNetwork(api, "h1", runtime, host_ip="10.77.0.11", paused=lambda: True)
    plugin.start()
    try:
        assert not plugin.wait_first_pass(1.0)
        assert runtime.host_commands == []
    finally:
        plugin.stop()


def test_node_without_pod_cidr_waits_only_its_grace(api, network):
    """A Node without podCIDR keeps new sandboxes waiting for the grace after its agent starts when a control plane
    recorded the cluster network (node-ipam may be about to give it one), then gets Podman's default network."""
    from kctl.client.clusterconfig import ClusterNetwork, write_cluster_network

    create(api, node("h1", "", "10.77.0.11"))
    waiting = network("h1", MemoryRuntime(), pod_cidr_grace=60)
    assert waiting.pod_network() == ""  # no control plane recorded the cluster network: no node-ipam to wait for
    write_cluster_network(api, ClusterNetwork())
    assert waiting.pod_network() is None
    assert waiting.reconcile() and waiting.pod_network() is None
    plugin = network("h1", MemoryRuntime())
    assert plugin.passes == 0 and plugin.pod_network() == ""


def test_a_pod_cidr_given_after_a_pass_keeps_sandboxes_waiting_for_the_network(api, network):
    """A pass saw no podCIDR (default network); node-ipam then gives one: until the next pass has made the
    network, new sandboxes wait, none starts on Podman's default network (CI caught pods at 10.88.x.x)."""
    create(api, node("h1", "", "10.77.0.11"))
    plugin = network("h1", MemoryRuntime())
    assert plugin.reconcile() and plugin.pod_network() == ""  # no podCIDR, grace over: default network
    current = api.get(api.resource("nodes"), "h1")
    current["spec"]["podCIDR"] = "10.244.0.0/24"
    api.update(current)
    deadline = time.monotonic() + 10
    while not (plugin.nodes.get(None, "h1") or {}).get("spec", {}).get("podCIDR"):
        assert time.monotonic() < deadline, "the Node informer did not catch up"
        time.sleep(0.02)
    assert plugin.pod_network() is None  # the network is not made yet: wait
    assert plugin.reconcile() and plugin.pod_network() == "kctl"
