"""DefaultPreemption and PodDisruptionBudgets: victims whose eviction would violate a budget are reprieved first,
and the node with the fewest such victims wins (kube's filterPodsWithPDBViolation and pickOneNodeForPreemption)."""

from __future__ import annotations

import pytest
from plugin_harness import make_node, make_pod, snapshot_of

from kctl.scheduler.framework import Code, CycleState, Framework, Handle, PluginRef, Status
from kctl.scheduler.nodeinfo import PodInfo
from kctl.scheduler.plugins.default_preemption import DefaultPreemption, split_by_pdb_violation
from kctl.scheduler.plugins.node_resources_fit import NodeResourcesFit

SHORT = Status(Code.UNSCHEDULABLE, ("Insufficient cpu",))


def _budget(allowed: int, *, selector: dict | None = None, namespace: str = "default",
            disrupted: tuple[str, ...] = ()) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}} if selector is None else selector},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": {n: "2026-12-04T12:00:00Z" for n in disrupted}}}


def _info(name: str, labels: dict | None = None, **kwargs) -> PodInfo:
    return PodInfo(make_pod(name, labels=labels, **kwargs))


WEB = {"app": "web"}


@pytest.mark.parametrize("budgets, violating", [
    ([_budget(1)], ["w2"]),                              # the budget allows one: the second web pod violates it
    ([_budget(0)], ["w1", "w2"]),
    ([_budget(2)], []),
    ([_budget(0, disrupted=("w1",))], ["w2"]),           # already counted by the API server: spends nothing
    ([_budget(0, selector={})], []),                     # an empty selector selects nothing here
    ([_budget(0, namespace="other")], []),               # another namespace's budget
    ([], []),
])
def test_split_by_pdb_violation(budgets, violating):
    """Each budget's allowed disruptions are spent in order; pods past it violate, the rest (in order) do not."""
    pods = [_info("w1", WEB), _info("x", {"app": "x"}), _info("w2", WEB), _info("bare")]
    bad, good = split_by_pdb_violation(pods, budgets)
    assert [p.name for p in bad] == violating
    assert [p.name for p in good] == [p.name for p in pods if p.name not in violating]


def _setup(nodes: list[dict], placed: list[dict], budgets: list[dict]) -> DefaultPreemption:
    handle = Handle(snapshot=snapshot_of(nodes, placed))
    fit = NodeResourcesFit(handle=handle)
    preemption = DefaultPreemption(handle=handle)
    preemption.budgets = lambda: budgets  # the lister, as the informer would answer
    Framework("default-scheduler", {fit.NAME: fit, preemption.NAME: preemption},
              {"filter": [PluginRef(fit.NAME)], "postFilter": [PluginRef(preemption.NAME)]}, handle=handle)
    return preemption


def test_a_budgeted_pod_is_reprieved_before_a_more_important_one():
    """Of two candidates for one victim, the pod a budget protects is kept, though the other has higher priority."""
    placed = [make_pod("guarded", cpu="1", priority=1, labels=WEB, node_name="n"),
              make_pod("free", cpu="1", priority=2, node_name="n")]
    vip = _info("vip", cpu="1", priority=10)
    without = _setup([make_node("n", cpu="2")], placed, [])
    assert [v.name for v in without.select_victims(CycleState(), vip, without.handle.snapshot.get("n"))] == \
        ["guarded"]
    with_budget = _setup([make_node("n", cpu="2")], placed, [_budget(0)])
    assert [v.name for v in with_budget.select_victims(CycleState(), vip, with_budget.handle.snapshot.get("n"),
                                                      [_budget(0)])] == ["free"]


def test_the_node_with_fewer_budget_violations_wins():
    """Node x's victim is less important but violates a budget; node y's does not: y is chosen."""
    nodes = [make_node("x", cpu="1"), make_node("y", cpu="1")]
    placed = [make_pod("guarded", cpu="1", priority=1, labels=WEB, node_name="x"),
              make_pod("free", cpu="1", priority=5, node_name="y")]
    vip = _info("vip", cpu="1", priority=10)
    assert _setup(nodes, placed, []).find_candidate(CycleState(), vip, {"x": SHORT, "y": SHORT}).node_name == "x"
    chosen = _setup(nodes, placed, [_budget(0)]).find_candidate(CycleState(), vip, {"x": SHORT, "y": SHORT})
    assert (chosen.node_name, [v.name for v in chosen.victims], chosen.pdb_violations) == ("y", ["free"], 0)


def test_budgets_are_read_through_the_api_without_informers(api):
    """With an API and no informers, the budgets are listed from the API (kube's pdbLister)."""
    pdb = api.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
                      "spec": {"minAvailable": 1, "selector": {"matchLabels": WEB}}})
    preemption = DefaultPreemption(handle=Handle(api=api))
    assert [b["metadata"]["uid"] for b in preemption.budgets()] == [pdb["metadata"]["uid"]]
    assert DefaultPreemption(handle=Handle()).budgets() == []
