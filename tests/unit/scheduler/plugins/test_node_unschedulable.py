"""NodeUnschedulable: cordoned nodes take no new pods unless the pod tolerates the taint."""

from __future__ import annotations

import pytest
from plugin_harness import make_node, make_pod, reasons, run_filter, snapshot_of

from kctl.scheduler.framework import Code
from kctl.scheduler.plugins.node_unschedulable import NodeUnschedulable

REJECT = ("node(s) were unschedulable",)
TOLERATE = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}

CASES = [
    ("schedulable-node", make_node("n"), make_pod("p"), ()),
    ("cordoned-node", make_node("n", unschedulable=True), make_pod("p"), REJECT),
    ("cordoned-but-tolerated", make_node("n", unschedulable=True), make_pod("p", tolerations=[TOLERATE]), ()),
    ("tolerates-everything", make_node("n", unschedulable=True), make_pod("p", tolerations=[{"operator": "Exists"}]),
     ()),
    ("tolerates-other-key", make_node("n", unschedulable=True),
     make_pod("p", tolerations=[{"key": "x", "operator": "Exists"}]), REJECT),
]


@pytest.mark.parametrize("node,pod,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_filter(node, pod, expected):
    """Only cordoned nodes reject, and only pods without the matching toleration."""
    assert reasons(run_filter(NodeUnschedulable(), pod, snapshot_of([node, make_node("other")]), "n")) == expected


def test_rejection_is_unresolvable():
    """Preemption cannot help on a cordoned node."""
    status = run_filter(NodeUnschedulable(), make_pod("p"), snapshot_of([make_node("n", unschedulable=True)]), "n")
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
