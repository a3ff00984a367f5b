"""PodTopologySpread: maxSkew over topology domains, hard (Filter) and soft (Score)."""

from __future__ import annotations

import pytest
from plugin_harness import ZONE, handle_for, make_node, make_pod, reasons, run_filter, run_score, snapshot_of

from kctl.scheduler.framework import Code
from kctl.scheduler.plugins.pod_topology_spread import PodTopologySpread

SKEW = ("node(s) didn't match pod topology spread constraints",)
MISSING = ("node(s) didn't match pod topology spread constraints (missing required label)",)
APP = {"app": "web"}


def spread(max_skew: int = 1, key: str = ZONE, when: str = "DoNotSchedule", **extra) -> list[dict]:
    return [{"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
             "labelSelector": {"matchLabels": APP}, **extra}]


NODES = [make_node("a1", labels={ZONE: "a"}), make_node("a2", labels={ZONE: "a"}),
         make_node("b1", labels={ZONE: "b"}), make_node("nolabel")]


def placed(node: str, n: int, labels: dict = APP, namespace: str = "default") -> list[dict]:
    return [make_pod(f"{node}-{i}", labels=labels, node_name=node, namespace=namespace) for i in range(n)]


FILTER_CASES = [
    ("balanced-any-zone", spread(), [], "a1", ()),
    ("zone-a-ahead", spread(), placed("a1", 1), "a2", SKEW),
    ("zone-b-behind", spread(), placed("a1", 1), "b1", ()),
    ("max-skew-2-allows", spread(2), placed("a1", 1), "a2", ()),
    ("node-without-key", spread(), [], "nolabel", MISSING),
    ("other-labels-not-counted", spread(), placed("a1", 3, {"app": "db"}), "a2", ()),
    ("other-namespace-not-counted", spread(), placed("a1", 3, namespace="other"), "a2", ()),
    ("min-domains-forces-zero-minimum", spread(1, minDomains=3), placed("b1", 1) + placed("a1", 1), "b1", SKEW),
    ("schedule-anyway-does-not-filter", spread(when="ScheduleAnyway"), placed("a1", 5), "a2", ()),
]


@pytest.mark.parametrize("constraints,existing,node,expected", [c[1:] for c in FILTER_CASES],
                         ids=[c[0] for c in FILTER_CASES])
def test_filter(constraints, existing, node, expected):
    """count(domain) + self - min(domains) must stay within maxSkew."""
    snapshot = snapshot_of(NODES, existing)
    pod = make_pod("new", labels=APP, spread=constraints)
    assert reasons(run_filter(PodTopologySpread(handle=handle_for(snapshot)), pod, snapshot, node)) == expected


def test_missing_key_is_unresolvable():
    """A node without the topology key can never satisfy the constraint."""
    snapshot = snapshot_of(NODES)
    pod = make_pod("new", labels=APP, spread=spread())
    status = run_filter(PodTopologySpread(handle=handle_for(snapshot)), pod, snapshot, "nolabel")
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_node_selector_limits_domains():
    """With nodeAffinityPolicy Honor, zones the pod cannot go to do not hold the minimum down."""
    nodes = [make_node("a1", labels={ZONE: "a", "disk": "ssd"}), make_node("b1", labels={ZONE: "b"})]
    snapshot = snapshot_of(nodes, placed("a1", 2))
    pod = make_pod("new", labels=APP, spread=spread(), node_selector={"disk": "ssd"})
    assert run_filter(PodTopologySpread(handle=handle_for(snapshot)), pod, snapshot, "a1") is None


def test_score_prefers_emptier_domain():
    """ScheduleAnyway: the zone with fewer matching pods scores higher."""
    nodes = NODES[:3]
    snapshot = snapshot_of(nodes, placed("a1", 2) + placed("b1", 0))
    pod = make_pod("new", labels=APP, spread=spread(when="ScheduleAnyway"))
    scores = run_score(PodTopologySpread(handle=handle_for(snapshot)), pod, snapshot)
    assert scores["b1"] == 100
    assert scores["a1"] == scores["a2"] < scores["b1"]
