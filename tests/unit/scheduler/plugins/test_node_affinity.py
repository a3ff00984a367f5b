"""NodeAffinity: nodeSelector, required terms with every operator, preferred terms scoring."""

from __future__ import annotations

import pytest
from plugin_harness import make_node, make_pod, reasons, run_filter, run_score, snapshot_of

from kctl.scheduler.framework import Code
from kctl.scheduler.plugins.node_affinity import NodeAffinity

NO = ("node(s) didn't match Pod's node affinity/selector",)
NODE = make_node("n", labels={"disk": "ssd", "zone": "a", "cores": "8"})
OTHER = make_node("m", labels={"disk": "hdd"})


def required(*expressions: dict, fields: list[dict] | None = None) -> dict:
    term: dict = {"matchExpressions": list(expressions)}
    if fields:
        term["matchFields"] = fields
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def expr(key: str, op: str, *values: str) -> dict:
    e: dict = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


FILTER_CASES = [
    ("nothing-asked", make_pod("p"), ()),
    ("node-selector-match", make_pod("p", node_selector={"disk": "ssd"}), ()),
    ("node-selector-mismatch", make_pod("p", node_selector={"disk": "hdd"}), NO),
    ("node-selector-missing-label", make_pod("p", node_selector={"gpu": "yes"}), NO),
    ("in", make_pod("p", affinity=required(expr("disk", "In", "ssd", "nvme"))), ()),
    ("in-mismatch", make_pod("p", affinity=required(expr("disk", "In", "hdd"))), NO),
    ("not-in", make_pod("p", affinity=required(expr("disk", "NotIn", "hdd"))), ()),
    ("not-in-missing-label-matches", make_pod("p", affinity=required(expr("gpu", "NotIn", "yes"))), ()),
    ("exists", make_pod("p", affinity=required(expr("zone", "Exists"))), ()),
    ("exists-mismatch", make_pod("p", affinity=required(expr("gpu", "Exists"))), NO),
    ("does-not-exist", make_pod("p", affinity=required(expr("gpu", "DoesNotExist"))), ()),
    ("does-not-exist-mismatch", make_pod("p", affinity=required(expr("zone", "DoesNotExist"))), NO),
    ("gt", make_pod("p", affinity=required(expr("cores", "Gt", "4"))), ()),
    ("gt-mismatch", make_pod("p", affinity=required(expr("cores", "Gt", "8"))), NO),
    ("lt", make_pod("p", affinity=required(expr("cores", "Lt", "16"))), ()),
    ("lt-not-a-number", make_pod("p", affinity=required(expr("disk", "Lt", "16"))), NO),
    ("expressions-are-anded", make_pod("p", affinity=required(expr("disk", "In", "ssd"), expr("zone", "In", "b"))),
     NO),
    ("match-fields-name", make_pod("p", affinity=required(fields=[expr("metadata.name", "In", "n")])), ()),
    ("selector-and-affinity-both-needed", make_pod("p", node_selector={"disk": "hdd"},
                                                   affinity=required(expr("zone", "Exists"))), NO),
]


@pytest.mark.parametrize("pod,expected", [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES])
def test_filter(pod, expected):
    """nodeSelector entries and required terms decide; a mismatch is unresolvable."""
    status = run_filter(NodeAffinity(), pod, snapshot_of([NODE, OTHER]), "n")
    assert reasons(status) == expected
    if expected:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_terms_are_ored():
    """A node matching any one of several nodeSelectorTerms passes."""
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [expr("disk", "In", "hdd")]}, {"matchExpressions": [expr("zone", "In", "a")]}]}}}
    assert run_filter(NodeAffinity(), make_pod("p", affinity=affinity), snapshot_of([NODE, OTHER]), "n") is None


def test_match_fields_other_node_rejected():
    """metadata.name In [m] leaves node n out."""
    pod = make_pod("p", affinity=required(fields=[expr("metadata.name", "In", "m")]))
    assert run_filter(NodeAffinity(), pod, snapshot_of([NODE, OTHER]), "n") is not None


def test_added_affinity_applies_to_every_pod():
    """addedAffinity (scheduler-enforced) rejects nodes even for pods that ask nothing."""
    plugin = NodeAffinity({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expr("disk", "In", "hdd")]}]}}})
    assert run_filter(plugin, make_pod("p"), snapshot_of([NODE, OTHER]), "n") is not None
    assert run_filter(plugin, make_pod("p"), snapshot_of([NODE, OTHER]), "m") is None


def test_preferred_terms_score():
    """Summed weights of matching preferred terms, normalized to 100 for the best node."""
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 80, "preference": {"matchExpressions": [expr("disk", "In", "ssd")]}},
        {"weight": 20, "preference": {"matchExpressions": [expr("zone", "Exists")]}},
    ]}}
    nodes = [NODE, OTHER, make_node("z", labels={"zone": "b"})]
    assert run_score(NodeAffinity(), make_pod("p", affinity=affinity), snapshot_of(nodes)) == {
        "n": 100, "m": 0, "z": 20}
