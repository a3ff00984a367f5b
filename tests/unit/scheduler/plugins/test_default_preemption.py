"""DefaultPreemption: evict the fewest, least important lower-priority pods to make room."""

from __future__ import annotations

import pytest
from plugin_harness import make_node, make_pod, snapshot_of

from kctl.scheduler.framework import Code, CycleState, Framework, Handle, PluginRef, Status
from kctl.scheduler.nodeinfo import PodInfo
from kctl.scheduler.plugins.default_preemption import Candidate, DefaultPreemption
from kctl.scheduler.plugins.node_resources_fit import NodeResourcesFit

SHORT = Status(Code.UNSCHEDULABLE, ("Insufficient cpu",))


def _setup(nodes: list[dict], placed: list[dict], *, api=None) -> tuple[DefaultPreemption, Handle]:
    snapshot = snapshot_of(nodes, placed)
    handle = Handle(api=api, snapshot=snapshot)
    fit = NodeResourcesFit(handle=handle)
    preemption = DefaultPreemption(handle=handle)
    Framework("default-scheduler", {fit.NAME: fit, preemption.NAME: preemption},
              {"filter": [PluginRef(fit.NAME)], "postFilter": [PluginRef(preemption.NAME)]}, handle=handle)
    return preemption, handle


CASES = [
    ("evicts-lower-priority", [make_pod("low", cpu="2", priority=1, node_name="n")], 10, ("low",)),
    ("keeps-equal-priority", [make_pod("peer", cpu="2", priority=10, node_name="n")], 10, None),
    ("reprieves-what-is-not-needed",
     [make_pod("low-a", cpu="1", priority=1, node_name="n"), make_pod("low-b", cpu="1", priority=5, node_name="n")],
     10, ("low-a",)),
]


@pytest.mark.parametrize("placed,priority,victims", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_select_victims(placed, priority, victims):
    """Only pods of lower priority go, and only as many as the preemptor needs."""
    preemption, handle = _setup([make_node("n", cpu="2")], placed)
    pod = PodInfo(make_pod("vip", cpu="1", priority=priority))
    got = preemption.select_victims(CycleState(), pod, handle.snapshot.get("n"))
    assert (None if got is None else tuple(v.name for v in got)) == victims


def test_candidate_ranking():
    """The node whose most important victim matters least wins, then fewer victims."""
    low = PodInfo(make_pod("low", priority=1))
    mid = PodInfo(make_pod("mid", priority=5))
    assert min([Candidate("x", (mid,)), Candidate("y", (low, low))], key=Candidate.rank).node_name == "y"
    assert min([Candidate("x", (low, low)), Candidate("y", (low,))], key=Candidate.rank).node_name == "y"


def test_unresolvable_nodes_are_not_candidates():
    """A node rejected as UnschedulableAndUnresolvable is not tried."""
    preemption, _ = _setup([make_node("n", cpu="2")], [make_pod("low", cpu="2", priority=1, node_name="n")])
    pod = PodInfo(make_pod("vip", cpu="1", priority=10))
    unresolvable = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) had untolerated taint {a: b}",))
    node, status = preemption.post_filter(CycleState(), pod, {"n": unresolvable})
    assert node is None and status.is_rejected


def test_preemption_policy_never():
    """preemptionPolicy: Never opts the pod out."""
    preemption, _ = _setup([make_node("n", cpu="2")], [make_pod("low", cpu="2", priority=1, node_name="n")])
    pod = make_pod("vip", cpu="1", priority=10)
    pod["spec"]["preemptionPolicy"] = "Never"
    node, status = preemption.post_filter(CycleState(), PodInfo(pod), {"n": SHORT})
    assert node is None and "preemptionPolicy=Never" in status.reasons[0]


def test_post_filter_evicts_and_nominates(api):
    """The victims are deleted through the API and the preemptor gets status.nominatedNodeName."""
    pods = api.resource("pods")
    low = make_pod("low", cpu="2", priority=1)
    vip = make_pod("vip", cpu="1", priority=10)
    for p in (low, vip):
        del p["metadata"]["uid"]
        value = p["spec"].pop("priority")  # the Priority admission plugin sets it from the pod's class
        api.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"p{value}"},
                    "value": value})
        p["spec"]["priorityClassName"] = f"p{value}"
    low = api.create(low)
    api.bind("default", "low", "n")
    vip = api.create(vip)
    low = api.get(pods, "low", namespace="default")
    preemption, _ = _setup([make_node("n", cpu="2")], [low], api=api)
    node, status = preemption.post_filter(CycleState(), PodInfo(vip), {"n": SHORT})
    assert (node, status) == ("n", None)
    remaining = {p["metadata"]["name"]: p for p in api.list(pods, namespace="default")[0]}
    assert "low" not in remaining or remaining["low"]["metadata"].get("deletionTimestamp")
    assert remaining["vip"]["status"]["nominatedNodeName"] == "n"
