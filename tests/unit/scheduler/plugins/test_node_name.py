"""NodeName: a pod that names a node fits only there."""

from __future__ import annotations

import pytest
from plugin_harness import make_node, make_pod, reasons, run_filter, snapshot_of

from kctl.scheduler.framework import CycleState
from kctl.scheduler.nodeinfo import PodInfo
from kctl.scheduler.plugins.node_name import NodeName

NODES = [make_node("a"), make_node("b")]

CASES = [
    ("no-node-name", make_pod("p"), "a", ()),
    ("names-this-node", make_pod("p", node_name="a"), "a", ()),
]


@pytest.mark.parametrize("pod,node,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_filter_accepts(pod, node, expected):
    """A pod naming no node, or naming this node, passes."""
    assert reasons(run_filter(NodeName(), pod, snapshot_of(NODES), node)) == expected


def test_filter_rejects_other_node():
    """A pod naming another node is rejected there, unresolvably."""
    plugin = NodeName()
    status = plugin.filter(CycleState(), PodInfo(make_pod("p", node_name="a")), snapshot_of(NODES).get("b"))
    assert status is not None and status.is_rejected
    assert status.reasons == ("node(s) didn't match the requested node name",)
