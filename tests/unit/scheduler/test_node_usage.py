"""NodeInfo.usage and the many-nodes forms that share one answer per distinct usage: they
must answer exactly as the plugins' per-node Filter and Score do, and the scheduler must
place every pod where the per-node path would."""

from __future__ import annotations

import random

import pytest
from scheduler_harness import node, pod

from kctl.scheduler.cache import SchedulerCache
from kctl.scheduler.config import Profile, SchedulerConfig
from kctl.scheduler.framework import CycleState
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo, Snapshot, per_usage
from kctl.scheduler.plugins.balanced_allocation import NodeResourcesBalancedAllocation
from kctl.scheduler.plugins.node_resources_fit import NodeResourcesFit
from kctl.scheduler.plugins.registry import registry
from kctl.scheduler.scheduler import Scheduler

GPU = "example.com/gpu"
STRATEGIES = {
    "least": {},
    "most": {"scoringStrategy": {"type": "MostAllocated"}},
    "ratio": {"scoringStrategy": {"type": "RequestedToCapacityRatio", "resources": [
        {"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}, {"name": GPU, "weight": 3}],
        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}}},
    "least-gpu": {"scoringStrategy": {"type": "LeastAllocated", "resources": [
        {"name": "cpu", "weight": 1}, {"name": GPU, "weight": 2}]}},
}


def varied_node(i: int) -> dict:
    """Nodes of a few sizes: some with few pod slots, a GPU resource or ephemeral storage."""
    n = node(f"n{i:03d}", cpu=("500m", "1", "2", "4")[i % 4], memory=("1Gi", "2Gi", "8Gi")[i % 3],
             pods=(3, 110)[i % 5 != 0])
    allocatable = n["status"]["allocatable"]
    if i % 7 == 0:
        allocatable[GPU] = str(i % 3)
    if i % 4 == 1:
        allocatable["ephemeral-storage"] = "10Gi"
    return n


def varied_pod(i: int, **fields) -> dict:
    """Pods asking for nothing, cpu only, memory only, both; some a GPU or ephemeral storage."""
    cpu = (None, "100m", "300m", "1")[i % 4]
    memory = (None, "200Mi", "1Gi")[i % 3]
    p = pod(f"p{i:03d}", cpu=cpu, memory=memory, **fields)
    requests = p["spec"]["containers"][0].setdefault("resources", {}).setdefault("requests", {})
    if i % 11 == 0:
        requests[GPU] = "1"
    if i % 6 == 5:
        requests["ephemeral-storage"] = "3Gi"
    return p


def varied_snapshot() -> Snapshot:
    cache = SchedulerCache()
    for i in range(40):
        cache.add_node(varied_node(i))
    for i in range(60):
        cache.add_pod(varied_pod(i, node_name=f"n{(i * 7) % 40:03d}"))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    return snapshot


def same_size_nodes() -> list[NodeInfo]:
    """Nodes alike but for their pods: full (2 pods without containers), empty, one pod that
    requests nothing (scored as 100m / 200Mi), one pod without containers (scored as nothing)."""
    out = []
    for name, pods in (("full", [{}, {}]), ("empty", []), ("requests-nothing", [None]), ("bare", [{}])):
        ni = NodeInfo(node(name, cpu="1", memory="1Gi", pods=2))
        for i, spec in enumerate(pods):
            p = pod(f"{name}-{i}", node_name=name)
            if spec is not None:
                p["spec"]["containers"] = []
            ni.add_pod(PodInfo(p))
        out.append(ni)
    return out


def test_usage_is_shared_by_nodes_in_the_same_state_and_follows_changes():
    a, b = NodeInfo(node("a", cpu="2")), NodeInfo(node("b", cpu="2"))
    assert a.usage is b.usage
    p = PodInfo(pod("p", cpu="1", node_name="a"))
    a.add_pod(p)
    assert a.usage is not b.usage
    b.add_pod(PodInfo(pod("q", cpu="1", node_name="b")))
    assert a.usage is b.usage  # same requests, same count
    copy = a.clone()
    assert copy.usage is a.usage
    copy.remove_pod(p.key)
    assert copy.usage is not a.usage and copy.usage is NodeInfo(node("c", cpu="2")).usage
    a.set_node(node("a", cpu="3"))
    assert a.usage is not b.usage
    # every figure counts: the pod count, scalar resources, the non-zero requests
    c, d = NodeInfo(node("c")), NodeInfo(node("d"))
    c.add_pod(PodInfo(pod("empty", node_name="c")))  # requests nothing, counts 100m / 200Mi for scoring
    assert c.usage is not d.usage
    e, f = NodeInfo(node("e")), NodeInfo(node("f"))
    e.node["status"]["allocatable"][GPU] = "1"
    e.set_node(e.node)
    assert e.usage is not f.usage
    assert len({id(n.usage) for n in same_size_nodes()}) == 4  # the pod count and the scoring form count too


def test_per_usage_asks_once_per_distinct_usage():
    same = [NodeInfo(node(f"s{i}")) for i in range(6)]
    other = NodeInfo(node("big", cpu="64"))
    asked: list[str] = []

    def answer(n: NodeInfo) -> int:
        asked.append(n.name)
        return int(n.allocatable.milli_cpu)

    nodes = same[:3] + [other] + same[3:]
    assert per_usage(nodes, answer, lambda ns: pytest.fail("most nodes share their usage")) == [
        4000, 4000, 4000, 64000, 4000, 4000, 4000]
    assert len(asked) == 2
    # most nodes differ: the node-by-node form answers
    distinct = [NodeInfo(node(f"d{i}", cpu=str(i + 1))) for i in range(4)]
    assert per_usage(distinct, answer, lambda ns: [-1] * len(ns)) == [-1] * 4


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_many_nodes_forms_answer_as_each_node_does(strategy):
    snapshot = varied_snapshot()
    nodes = (snapshot.node_info_list + same_size_nodes()) * 3  # the same states again: shared answers
    fit = NodeResourcesFit(STRATEGIES[strategy])
    fit_ignoring = NodeResourcesFit({**STRATEGIES[strategy], "ignoredResources": [GPU]})
    balanced = NodeResourcesBalancedAllocation({"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]}
                                               if strategy == "ratio" else None)
    rejected = 0
    for i in range(30):
        pi, state = PodInfo(varied_pod(i)), CycleState()
        for plugin in (fit, fit_ignoring):
            statuses = plugin.filter_nodes(state, pi, nodes)
            assert statuses == [plugin.filter(state, pi, n) for n in nodes]
            rejected += sum(s is not None for s in statuses)
            assert plugin.score_nodes(state, pi, nodes) == [plugin.score(state, pi, n) for n in nodes]
        assert balanced.score_nodes(state, pi, nodes) == [balanced.score(state, pi, n) for n in nodes]
    assert rejected  # some nodes are full, too small or without the GPU


class PerNodeFit(NodeResourcesFit):
    filter_nodes = None
    score_nodes = None


class PerNodeBalanced(NodeResourcesBalancedAllocation):
    score_nodes = None


def placements(strategy: str, *, per_node: bool) -> list[tuple[str, str | None]]:
    """Where a scheduler puts 300 varied pods on 150 varied nodes (each cycle assumes its pod)."""
    reg = registry()
    if per_node:
        reg[PerNodeFit.NAME], reg[PerNodeBalanced.NAME] = PerNodeFit, PerNodeBalanced
    config = SchedulerConfig((Profile(plugin_config={"NodeResourcesFit": STRATEGIES[strategy]}),))
    sched = Scheduler(None, config=config, registry=reg, rng=random.Random(7))
    for i in range(150):
        sched.on_node_add(varied_node(i))
    for i in range(40):
        sched.on_pod_add(varied_pod(1000 + i, node_name=f"n{(i * 13) % 150:03d}"))
    chosen: list[tuple[str, str | None]] = []
    assume = sched.cache.assume_pod
    sched.cache.assume_pod = lambda pi, node_name: (chosen.append((pi.key, node_name)), assume(pi, node_name))
    for i in range(300):
        sched.on_pod_add(varied_pod(i))
    while (qpi := sched.queue.pop(timeout=0)) is not None:
        before = len(chosen)
        sched.schedule_one(qpi)
        if len(chosen) == before:
            chosen.append((qpi.key, None))  # fits nowhere
    return chosen


@pytest.mark.parametrize("strategy", ["least", "most", "least-gpu"])
def test_scheduler_places_pods_as_the_per_node_path_does(strategy):
    fast, slow = placements(strategy, per_node=False), placements(strategy, per_node=True)
    assert fast == slow
    assert len(fast) == 300
    assert len({n for _, n in fast if n}) > 50  # spread over many nodes
    assert any(n is None for _, n in fast)  # and some fit nowhere


def test_per_usage_keeps_the_grouping_for_the_same_list_only():
    """With the cycle's state, a second plugin given the same list reuses the grouping; a list
    that grew since (or another list) is grouped again."""
    state = CycleState()
    nodes = [NodeInfo(node(f"s{i}")) for i in range(4)]
    cpu = lambda n: n.allocatable.milli_cpu  # noqa: E731
    each = lambda ns: pytest.fail("most nodes share their usage")  # noqa: E731
    assert per_usage(nodes, cpu, each, state=state) == [4000] * 4
    assert per_usage(nodes, lambda n: -1, each, state=state) == [-1] * 4
    nodes += [NodeInfo(node("big", cpu="64"))] * 2
    assert per_usage(nodes, cpu, each, state=state) == [4000] * 4 + [64000] * 2
    other = nodes[:2] + [NodeInfo(node("small", cpu="1"))] * 4
    assert per_usage(other, cpu, each, state=state) == [4000] * 2 + [1000] * 4
