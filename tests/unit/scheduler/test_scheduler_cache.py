"""The scheduler cache: node accounting, assume/confirm/forget/expire, and incremental snapshots."""

from __future__ import annotations

import pytest
from scheduler_harness import FakeClock, node, pod

from kctl.scheduler.cache import SchedulerCache
from kctl.scheduler.nodeinfo import PodInfo, Snapshot


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def cache(clock):
    c = SchedulerCache(assumed_ttl=30, clock=clock)
    c.add_node(node("n1"))
    c.add_node(node("n2"))
    return c


def requested_cpu(cache: SchedulerCache, name: str) -> int:
    return cache.node_info(name).requested.milli_cpu


def test_assume_counts_then_forget_frees(cache):
    """An assumed pod's requests count on its node at once; forgetting it gives them back."""
    pi = PodInfo(pod("p", cpu="500m"))
    cache.assume_pod(pi, "n1")
    assert requested_cpu(cache, "n1") == 500 and cache.is_assumed("default/p")
    cache.forget_pod("default/p")
    assert requested_cpu(cache, "n1") == 0 and not cache.has_pod("default/p")


def test_assume_twice_is_refused(cache):
    """A pod already in the cache cannot be assumed again."""
    pi = PodInfo(pod("p", cpu="1"))
    cache.assume_pod(pi, "n1")
    with pytest.raises(ValueError):
        cache.assume_pod(pi, "n2")


@pytest.mark.parametrize("bound_to, expect_n1, expect_n2", [
    ("n1", 500, 0),
    ("n2", 0, 500),
], ids=["same-node", "elsewhere"])
def test_confirm(cache, bound_to, expect_n1, expect_n2):
    """The informer seeing the pod bound confirms the assumption, moving it if it landed elsewhere."""
    cache.assume_pod(PodInfo(pod("p", cpu="500m")), "n1")
    cache.finish_binding("default/p")
    cache.add_pod(pod("p", cpu="500m", node_name=bound_to))
    assert not cache.is_assumed("default/p")
    assert (requested_cpu(cache, "n1"), requested_cpu(cache, "n2")) == (expect_n1, expect_n2)


def test_forget_does_not_touch_confirmed_pods(cache):
    """Forget only drops assumed pods: a confirmed pod stays counted."""
    cache.assume_pod(PodInfo(pod("p", cpu="1")), "n1")
    cache.add_pod(pod("p", cpu="1", node_name="n1"))
    cache.forget_pod("default/p")
    assert requested_cpu(cache, "n1") == 1000


@pytest.mark.parametrize("finished, wait, expired", [
    (True, 31, True),
    (True, 29, False),
    (False, 3600, False),
], ids=["past-ttl", "within-ttl", "binding-not-finished"])
def test_expire(cache, clock, finished, wait, expired):
    """An assumed pod whose binding finished but never showed up expires after the TTL."""
    cache.assume_pod(PodInfo(pod("p", cpu="1")), "n1")
    if finished:
        cache.finish_binding("default/p")
    clock.advance(wait)
    assert cache.cleanup_expired() == (["default/p"] if expired else [])
    assert requested_cpu(cache, "n1") == (0 if expired else 1000)


@pytest.mark.parametrize("phase, counted", [
    ("Running", True), ("Pending", True), ("Succeeded", False), ("Failed", False),
], ids=["running", "pending", "succeeded", "failed"])
def test_finished_pods_free_their_node(cache, phase, counted):
    """Succeeded and Failed pods no longer take room on their node."""
    cache.add_pod(pod("p", cpu="1", node_name="n1"))
    cache.update_pod({**pod("p", cpu="1", node_name="n1"), "status": {"phase": phase}})
    assert requested_cpu(cache, "n1") == (1000 if counted else 0)


def test_remove_pod_and_ports(cache):
    """Removing a pod gives back its requests and host ports."""
    obj = pod("p", cpu="1", node_name="n1")
    obj["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    cache.add_pod(obj)
    assert len(cache.node_info("n1").used_ports) == 1
    cache.remove_pod(obj)
    ni = cache.node_info("n1")
    assert ni.used_ports == [] and ni.requested.milli_cpu == 0


def test_snapshot_copies_only_changed_nodes(cache):
    """update_snapshot replaces the NodeInfo of a changed node and keeps the others as they were."""
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    before = {n: snapshot.get(n) for n in ("n1", "n2")}
    cache.assume_pod(PodInfo(pod("p", cpu="1")), "n1")
    cache.update_snapshot(snapshot)
    assert snapshot.get("n2") is before["n2"]
    assert snapshot.get("n1") is not before["n1"] and snapshot.get("n1").requested.milli_cpu == 1000
    assert before["n1"].requested.milli_cpu == 0  # what an earlier cycle saw did not change under it
    assert [n.name for n in snapshot.node_info_list] == ["n1", "n2"]


def test_removed_node_leaves_snapshot_but_its_pods_stay_accounted(cache):
    """A deleted Node leaves the snapshot; its pods are still known until they are deleted."""
    cache.add_pod(pod("p", cpu="1", node_name="n2"))
    cache.remove_node("n2")
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    assert [n.name for n in snapshot.node_info_list] == ["n1"]
    assert cache.has_pod("default/p")
    cache.add_node(node("n2"))
    cache.update_snapshot(snapshot)
    assert snapshot.get("n2").requested.milli_cpu == 1000


def test_snapshot_counters_and_zone_order():
    """The snapshot counts tainted and cordoned nodes, and interleaves zones (kube's node tree)."""
    cache = SchedulerCache()
    zone = "topology.kubernetes.io/zone"
    for name, z in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")):
        cache.add_node(node(name, labels={zone: z}))
    cache.update_node(node("a2", labels={zone: "a"}, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]))
    cache.update_node(node("b2", labels={zone: "b"}, unschedulable=True))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    assert [n.name for n in snapshot.node_info_list] == ["a1", "b1", "a2", "b2"]
    assert (snapshot.tainted_nodes, snapshot.unschedulable_nodes) == (1, 1)
    cache.update_node(node("a2", labels={zone: "a"}))
    cache.update_snapshot(snapshot)
    assert snapshot.tainted_nodes == 0


@pytest.mark.parametrize("change, copied", [
    ({"status": {"phase": "Running", "podIP": "10.0.0.5"}}, False),
    ({"metadata": {"name": "p", "namespace": "default", "labels": {"app": "x"}}}, True),
], ids=["status-only", "labels"])
def test_status_updates_do_not_dirty_the_node(cache, change, copied):
    """A bound pod's status update (the node agent's) does not make the next snapshot copy its node."""
    obj = pod("p", cpu="1", node_name="n1")
    cache.add_pod(obj)
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    before = snapshot.get("n1")
    cache.update_pod({**obj, **change})
    cache.update_snapshot(snapshot)
    assert (snapshot.get("n1") is not before) is copied
    assert cache.node_info("n1").requested.milli_cpu == 1000


def test_expire_looks_only_at_finished_bindings_in_order(cache, clock):
    """Only unconfirmed pods whose binding finished expire, each at its own deadline; confirmed,
    forgotten and never-finished pods do not, and a re-finished pod gets a new deadline."""
    for name in ("a", "b", "c", "d", "e"):
        cache.assume_pod(PodInfo(pod(name, cpu="100m")), "n1")
    cache.finish_binding("default/a")  # due at 30
    clock.advance(10)
    cache.finish_binding("default/b")  # due at 40, but confirmed below
    cache.finish_binding("default/e")  # due at 40, forgotten and assumed again below
    clock.advance(10)
    cache.finish_binding("default/c")  # due at 50
    cache.add_pod(pod("b", cpu="100m", node_name="n1"))
    cache.forget_pod("default/e")
    cache.assume_pod(PodInfo(pod("e", cpu="100m")), "n2")
    clock.advance(5)
    cache.finish_binding("default/e")  # due at 55
    clock.advance(6)  # t = 31
    assert cache.cleanup_expired() == ["default/a"]
    clock.advance(14)  # t = 45
    assert cache.cleanup_expired() == []
    clock.advance(6)  # t = 51
    assert cache.cleanup_expired() == ["default/c"]
    clock.advance(5)  # t = 56
    assert cache.cleanup_expired() == ["default/e"]
    clock.advance(3600)
    assert cache.cleanup_expired() == []  # d's binding never finished; b was confirmed
    assert cache.is_assumed("default/d") and cache.has_pod("default/b") and not cache.is_assumed("default/b")
    assert cache._finished == {}


def test_expire_does_not_walk_every_cached_pod(cache):
    """With thousands of confirmed pods and none pending, cleanup looks at nothing."""
    for i in range(2000):
        cache.add_pod(pod(f"p{i}", cpu="1m", node_name="n1"))
    cache._pods = _NoIteration(cache._pods)
    assert cache.cleanup_expired() == []


class _NoIteration(dict):
    """A dict that fails the test if anything iterates over it."""

    def __iter__(self):
        raise AssertionError("cleanup_expired iterated over every cached pod")

    def items(self):
        raise AssertionError("cleanup_expired iterated over every cached pod")
