"""InterPodAffinity: required/preferred pod affinity and anti-affinity by topology domain."""

from __future__ import annotations

import pytest
from plugin_harness import ZONE, HOSTNAME, handle_for, make_node, make_pod, reasons, run_filter, run_score, snapshot_of

from kctl.scheduler.plugins.inter_pod_affinity import InterPodAffinity

AFF = ("node(s) didn't match pod affinity rules",)
ANTI = ("node(s) didn't match pod anti-affinity rules",)
EXISTING = ("node(s) didn't satisfy existing pods anti-affinity rules",)

NODES = [make_node("a1", labels={ZONE: "a"}), make_node("a2", labels={ZONE: "a"}), make_node("b1", labels={ZONE: "b"})]


def term(labels: dict, key: str = ZONE, **extra) -> dict:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def affinity(kind: str, *terms: dict) -> dict:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


DB = make_pod("db", labels={"app": "db"}, node_name="a1")

FILTER_CASES = [
    ("affinity-same-zone", make_pod("p", affinity=affinity("podAffinity", term({"app": "db"}))), [DB], "a2", ()),
    ("affinity-other-zone", make_pod("p", affinity=affinity("podAffinity", term({"app": "db"}))), [DB], "b1", AFF),
    ("affinity-by-hostname", make_pod("p", affinity=affinity("podAffinity", term({"app": "db"}, HOSTNAME))), [DB],
     "a2", AFF),
    ("affinity-first-of-group", make_pod("p", labels={"app": "web"},
                                         affinity=affinity("podAffinity", term({"app": "web"}))), [], "b1", ()),
    ("affinity-nothing-matches", make_pod("p", affinity=affinity("podAffinity", term({"app": "cache"}))), [DB],
     "a1", AFF),
    ("affinity-other-namespace", make_pod("p", namespace="x", affinity=affinity("podAffinity", term({"app": "db"}))),
     [DB], "a1", AFF),
    ("affinity-listed-namespace", make_pod("p", namespace="x", affinity=affinity(
        "podAffinity", term({"app": "db"}, namespaces=["default"]))), [DB], "a1", ()),
    ("anti-affinity-same-zone", make_pod("p", affinity=affinity("podAntiAffinity", term({"app": "db"}))), [DB],
     "a2", ANTI),
    ("anti-affinity-other-zone", make_pod("p", affinity=affinity("podAntiAffinity", term({"app": "db"}))), [DB],
     "b1", ()),
    ("existing-anti-affinity", make_pod("p", labels={"app": "web"}),
     [make_pod("lonely", node_name="a1", affinity=affinity("podAntiAffinity", term({"app": "web"})))], "a2",
     EXISTING),
    ("existing-anti-affinity-other-zone", make_pod("p", labels={"app": "web"}),
     [make_pod("lonely", node_name="a1", affinity=affinity("podAntiAffinity", term({"app": "web"})))], "b1", ()),
]


@pytest.mark.parametrize("pod,existing,node,expected", [c[1:] for c in FILTER_CASES],
                         ids=[c[0] for c in FILTER_CASES])
def test_filter(pod, existing, node, expected):
    """Required terms are judged per topology domain, in both directions for anti-affinity."""
    snapshot = snapshot_of(NODES, existing)
    assert reasons(run_filter(InterPodAffinity(handle=handle_for(snapshot)), pod, snapshot, node)) == expected


def _preferred(kind: str, weight: int, labels: dict) -> dict:
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "podAffinityTerm": term(labels)}]}}


def test_preferred_affinity_scores_zone_with_match():
    """Preferred affinity: the zone holding a matching pod gets 100, the other 0."""
    snapshot = snapshot_of(NODES, [DB])
    pod = make_pod("p", affinity=_preferred("podAffinity", 10, {"app": "db"}))
    assert run_score(InterPodAffinity(handle=handle_for(snapshot)), pod, snapshot) == {"a1": 100, "a2": 100, "b1": 0}


def test_preferred_anti_affinity_scores_zone_without_match():
    """Preferred anti-affinity: the zone without a matching pod wins."""
    snapshot = snapshot_of(NODES, [DB])
    pod = make_pod("p", affinity=_preferred("podAntiAffinity", 10, {"app": "db"}))
    assert run_score(InterPodAffinity(handle=handle_for(snapshot)), pod, snapshot) == {"a1": 0, "a2": 0, "b1": 100}


def test_existing_pods_preferences_count():
    """A placed pod that prefers pods like the incoming one draws it to its zone."""
    existing = make_pod("fan", node_name="b1", affinity=_preferred("podAffinity", 5, {"app": "web"}))
    snapshot = snapshot_of(NODES, [existing])
    pod = make_pod("p", labels={"app": "web"})
    assert run_score(InterPodAffinity(handle=handle_for(snapshot)), pod, snapshot) == {"a1": 0, "a2": 0, "b1": 100}
