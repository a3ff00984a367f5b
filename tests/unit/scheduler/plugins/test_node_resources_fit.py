"""NodeResourcesFit: requests against allocatable minus what is placed; strategy scoring."""

from __future__ import annotations

import pytest
from plugin_harness import make_node, make_pod, reasons, run_filter, run_score, snapshot_of

from kctl.scheduler.framework import Code
from kctl.scheduler.plugins.node_resources_fit import NodeResourcesFit

FILTER_CASES = [
    ("fits-empty-node", make_node("n", cpu="2", memory="4Gi"), [], make_pod("p", cpu="1", memory="1Gi"), ()),
    ("no-requests-fit-anywhere", make_node("n", cpu="1", memory="1Gi"),
     [make_pod("big", cpu="1", memory="1Gi", node_name="n")], make_pod("p"), ()),
    ("insufficient-cpu", make_node("n", cpu="2"), [make_pod("q", cpu="1500m", node_name="n")],
     make_pod("p", cpu="600m"), ("Insufficient cpu",)),
    ("exactly-fits", make_node("n", cpu="2"), [make_pod("q", cpu="1500m", node_name="n")],
     make_pod("p", cpu="500m"), ()),
    ("insufficient-memory", make_node("n", memory="1Gi"), [], make_pod("p", memory="2Gi"), ("Insufficient memory",)),
    ("both-short", make_node("n", cpu="1", memory="1Gi"), [], make_pod("p", cpu="2", memory="2Gi"),
     ("Insufficient cpu", "Insufficient memory")),
    ("too-many-pods", make_node("n", pods=1), [make_pod("q", node_name="n")], make_pod("p"), ("Too many pods",)),
    ("extended-resource", make_node("n", extra={"example.com/gpu": "1"}), [],
     make_pod("p", extra={"example.com/gpu": "2"}), ("Insufficient example.com/gpu",)),
    ("finished-pods-free-room", make_node("n", cpu="1"),
     [dict(make_pod("done", cpu="1", node_name="n"), status={"phase": "Succeeded"})], make_pod("p", cpu="1"), ()),
]


@pytest.mark.parametrize("node,placed,pod,expected", [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES])
def test_filter(node, placed, pod, expected):
    """Every shortfall is one reason, in kube's words."""
    status = run_filter(NodeResourcesFit(), pod, snapshot_of([node], placed), "n")
    assert reasons(status) == expected
    if expected:
        assert status.code is Code.UNSCHEDULABLE  # preemption may help


def test_ignored_resource_group():
    """ignoredResourceGroups leaves the group's extended resources out of the check."""
    plugin = NodeResourcesFit({"ignoredResourceGroups": ["example.com"]})
    pod = make_pod("p", extra={"example.com/gpu": "2"})
    assert run_filter(plugin, pod, snapshot_of([make_node("n")]), "n") is None


NODES = [make_node("empty", cpu="4", memory="8Gi"), make_node("half", cpu="4", memory="8Gi")]
PLACED = [make_pod("q", cpu="2", memory="4Gi", node_name="half")]

SCORE_CASES = [
    # LeastAllocated: (4000-1000)/4000 -> 75, (8-2)/8 -> 75 on the empty node; 25 and 25 on the half one
    ("least-allocated", {}, {"empty": 75, "half": 25}),
    ("most-allocated", {"scoringStrategy": {"type": "MostAllocated"}}, {"empty": 25, "half": 75}),
    ("least-allocated-cpu-only", {"scoringStrategy": {"type": "LeastAllocated",
                                                      "resources": [{"name": "cpu", "weight": 1}]}},
     {"empty": 75, "half": 25}),
]


@pytest.mark.parametrize("args,expected", [c[1:] for c in SCORE_CASES], ids=[c[0] for c in SCORE_CASES])
def test_score(args, expected):
    """The scoring strategy decides whether emptier or fuller nodes win."""
    pod = make_pod("p", cpu="1", memory="2Gi")
    assert run_score(NodeResourcesFit(args), pod, snapshot_of(NODES, PLACED)) == expected


def test_unknown_strategy_is_refused():
    """A scoringStrategy type kube does not have is a configuration error."""
    with pytest.raises(ValueError, match="Bogus"):
        NodeResourcesFit({"scoringStrategy": {"type": "Bogus"}})
