"""NodePorts: a pod's hostPorts must be free on the node."""

from __future__ import annotations

import pytest
from plugin_harness import make_node, make_pod, reasons, run_filter, snapshot_of

from kctl.scheduler.plugins.node_ports import NodePorts

BUSY = ("node(s) didn't have free ports for the requested pod ports",)


def _placed(ports: list[dict]) -> dict:
    pod = make_pod("placed", node_name="n")
    pod["spec"]["containers"][0]["ports"] = ports
    return pod


CASES = [
    ("no-host-ports", [], make_pod("p"), ()),
    ("free-port", [{"containerPort": 80, "hostPort": 8080}], make_pod("p", host_ports=[9090]), ()),
    ("same-port", [{"containerPort": 80, "hostPort": 8080}], make_pod("p", host_ports=[8080]), BUSY),
    ("same-port-other-protocol", [{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}],
     make_pod("p", host_ports=[8080]), ()),
    ("specific-ip-vs-wildcard", [{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}],
     make_pod("p", host_ports=[8080]), BUSY),
]


@pytest.mark.parametrize("used,pod,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_filter(used, pod, expected):
    """Same port and protocol on the same or a wildcard IP conflicts."""
    snapshot = snapshot_of([make_node("n")], [_placed(used)])
    assert reasons(run_filter(NodePorts(), pod, snapshot, "n")) == expected


def test_two_specific_ips_do_not_conflict():
    """hostIP 10.0.0.1:8080 and 10.0.0.2:8080 can share a node."""
    pod = make_pod("p")
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.2"}]
    snapshot = snapshot_of([make_node("n")], [_placed([{"containerPort": 80, "hostPort": 8080,
                                                          "hostIP": "10.0.0.1"}])])
    assert run_filter(NodePorts(), pod, snapshot, "n") is None
