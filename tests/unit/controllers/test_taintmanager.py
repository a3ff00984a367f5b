"""The taint manager: NoExecute taints evict pods that do not tolerate them, after their toleration."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from lifecycle_harness import FakeClock, Queue, wait_for

from kctl.machinery.times import format_time
from kctl.client.informer import InformerFactory
from kctl.controllers.base import ControllerContext, Recorder
from kctl.controllers.nodelifecycle import TAINT_NOT_READY, TAINT_UNREACHABLE
from kctl.controllers.taintmanager import TaintManager, TaintManagerSettings, effective_tolerations, eviction_time

T0 = dt.datetime(2030, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
UNREACHABLE = {"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": format_time(T0)}




# -- pure parts ------------------------------------------------------------------------------

@pytest.mark.parametrize("tolerations, expected", [
    ([], [{"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
          {"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
    ([{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}],
     [{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10},
      {"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
    ([{"operator": "Exists"}], [{"operator": "Exists"}]),
    ([{"key": TAINT_NOT_READY, "operator": "Exists"}, {"key": TAINT_UNREACHABLE, "operator": "Exists"}],
     [{"key": TAINT_NOT_READY, "operator": "Exists"}, {"key": TAINT_UNREACHABLE, "operator": "Exists"}]),
    ([{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoSchedule"}],
     [{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoSchedule"},
      {"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
      {"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
], ids=["none-gets-both", "own-unreachable-kept", "tolerate-all", "any-effect", "noschedule-does-not-count"])
def test_default_tolerations(tolerations, expected):
    """DefaultTolerationSeconds' rule: 300 s tolerations only where the pod has none of its own."""
    assert effective_tolerations({"spec": {"tolerations": tolerations}}, 300) == expected


ADDED = {(TAINT_UNREACHABLE, None): T0, ("dedicated", "db"): T0 + dt.timedelta(seconds=100)}


@pytest.mark.parametrize("taints, tolerations, after", [
    ([UNREACHABLE], [], "now"),
    ([UNREACHABLE], [{"key": TAINT_UNREACHABLE, "operator": "Exists", "tolerationSeconds": 60}], 60),
    ([UNREACHABLE], [{"key": TAINT_UNREACHABLE, "operator": "Exists", "tolerationSeconds": 60},
                     {"operator": "Exists", "tolerationSeconds": 20}], 20),
    ([UNREACHABLE], [{"key": TAINT_UNREACHABLE, "operator": "Exists", "tolerationSeconds": -5}], 0),
    ([UNREACHABLE], [{"key": TAINT_UNREACHABLE, "operator": "Exists"}], None),
    ([UNREACHABLE, {"key": "dedicated", "value": "db", "effect": "NoExecute"}],
     [{"operator": "Exists", "tolerationSeconds": 30}], 30),
    ([UNREACHABLE, {"key": "dedicated", "value": "db", "effect": "NoExecute"}],
     [{"key": TAINT_UNREACHABLE, "operator": "Exists"},
      {"key": "dedicated", "operator": "Equal", "value": "db", "tolerationSeconds": 5}], 105),
    ([UNREACHABLE, {"key": "dedicated", "value": "db", "effect": "NoExecute"}],
     [{"key": TAINT_UNREACHABLE, "operator": "Exists"}], "now"),
], ids=["untolerated", "seconds", "shortest-matching", "negative-is-zero", "forever", "earliest-taint",
        "per-taint-time-added", "one-untolerated"])
def test_eviction_time(taints, tolerations, after):
    """When a pod must go: now, its toleration seconds after the taint was added, or never."""
    when = eviction_time(taints, tolerations, added=ADDED)
    if after == "now":
        assert when == dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    elif after is None:
        assert when is None
    else:
        assert when == T0 + dt.timedelta(seconds=after)


# -- reconcile by hand ----------------------------------------------------------------------

@pytest.fixture
def manager(api):
    """A TaintManager (default toleration 300 s) over synced informers, a fake clock at T0, nodes n1 n2."""
    for name in ("n1", "n2"):
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}})
    stop = threading.Event()
    informers = InformerFactory(api)
    ctx = ControllerContext(api=api, informers=informers, recorder=Recorder(api, component="test"),
                            clock=FakeClock(T0))
    controller = TaintManager(settings=TaintManagerSettings(default_toleration_seconds=300))
    controller.register(ctx, Queue())
    informers.start(stop)
    wait_for(informers.has_synced, what="informers synced")
    yield controller
    stop.set()


def make_pod(api, name: str, *, node: str = "n1", tolerations: list | None = None) -> dict:
    spec = {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                       "spec": spec})


def taint(api, manager, node: str, taints: list[dict]) -> None:
    obj = api.get(api.resource("nodes"), node)
    obj["spec"]["taints"] = taints
    api.update(obj)
    wait_for(lambda: (manager.nodes.get("", node)["spec"].get("taints") or []) == taints, what="taints cached")


def pod(api, name: str) -> dict | None:
    from kctl.machinery.errors import NotFound

    try:
        return api.get(api.resource("pods"), name, namespace="default")
    except NotFound:
        return None


def cached(manager, *names: str) -> None:
    wait_for(lambda: all(manager.pods.get("default", n) for n in names), what="pods cached")


def test_default_toleration_then_graceful_eviction(api, manager):
    """A plain pod stays 300 s on an unreachable node, then is marked for deletion with an Event."""
    make_pod(api, "web")
    cached(manager, "web")
    taint(api, manager, "n1", [UNREACHABLE])
    assert "default/web" in manager.queue.keys, "a node's new NoExecute taint queues its pods"
    assert manager.reconcile("default/web") == pytest.approx(300, abs=0.1)
    manager.ctx.clock.advance(299)
    assert manager.reconcile("default/web") == pytest.approx(1, abs=0.1)
    assert not pod(api, "web")["metadata"].get("deletionTimestamp")
    manager.ctx.clock.advance(1)
    assert manager.reconcile("default/web") is None
    gone = pod(api, "web")
    assert gone is not None and gone["metadata"].get("deletionTimestamp"), "graceful: the agent finishes it"
    target = next(c for c in gone["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["status"], target["reason"]) == ("True", "DeletionByTaintManager")
    events, _ = api.list(api.resource("events"), namespace="default")
    assert [(e["reason"], e["message"]) for e in events if e["involvedObject"]["name"] == "web"] == [
        ("TaintManagerEviction", "Marking for deletion Pod default/web")]


def test_tolerations_decide(api, manager):
    """Untolerated: at once; own seconds: after them; no seconds: stays; other nodes: untouched."""
    make_pod(api, "plain")
    make_pod(api, "short", tolerations=[{"key": "maint", "operator": "Exists", "effect": "NoExecute",
                                         "tolerationSeconds": 30}])
    make_pod(api, "forever", tolerations=[{"key": "maint", "operator": "Exists", "effect": "NoExecute"}])
    make_pod(api, "elsewhere", node="n2")
    cached(manager, "plain", "short", "forever", "elsewhere")
    taint(api, manager, "n1", [{"key": "maint", "effect": "NoExecute", "timeAdded": format_time(T0)}])
    assert manager.reconcile("default/plain") is None
    assert pod(api, "plain")["metadata"].get("deletionTimestamp")
    assert manager.reconcile("default/short") == pytest.approx(30, abs=0.1)
    assert manager.reconcile("default/forever") is None
    assert manager.reconcile("default/elsewhere") is None
    manager.ctx.clock.advance(31)
    manager.reconcile("default/short")
    manager.reconcile("default/forever")
    assert pod(api, "short")["metadata"].get("deletionTimestamp")
    assert not pod(api, "forever")["metadata"].get("deletionTimestamp")
    assert not pod(api, "elsewhere")["metadata"].get("deletionTimestamp")


def test_taint_removed_in_time_cancels(api, manager):
    """A node that recovers before the toleration ends keeps its pods."""
    make_pod(api, "web")
    cached(manager, "web")
    taint(api, manager, "n1", [UNREACHABLE])
    assert manager.reconcile("default/web") == pytest.approx(300, abs=0.1)
    manager.ctx.clock.advance(200)
    taint(api, manager, "n1", [])
    manager.ctx.clock.advance(200)
    assert manager.reconcile("default/web") is None
    assert not pod(api, "web")["metadata"].get("deletionTimestamp")


def test_taint_without_time_added_counts_from_first_sight(api, manager):
    """A NoExecute taint written without timeAdded is timed from when the manager first saw it."""
    make_pod(api, "web", tolerations=[{"key": "maint", "operator": "Exists", "tolerationSeconds": 60}])
    cached(manager, "web")
    manager.ctx.clock.advance(1000)
    taint(api, manager, "n1", [{"key": "maint", "effect": "NoExecute"}])
    assert manager.reconcile("default/web") == pytest.approx(60, abs=0.1)
    manager.ctx.clock.advance(30)
    assert manager.reconcile("default/web") == pytest.approx(30, abs=0.1)


def test_daemonset_pods_stay(api, manager):
    """DaemonSet pods carry not-ready/unreachable tolerations without seconds: never evicted for them."""
    from kctl.controllers.daemonset import new_pod

    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet",
          "metadata": {"name": "agent", "namespace": "default", "uid": "ds-uid", "generation": 1},
          "spec": {"template": {"metadata": {"labels": {"app": "agent"}},
                                "spec": {"containers": [{"name": "a", "image": "busybox"}]}}}}
    body = new_pod(ds, "n1", "hash")
    body["metadata"]["name"] = "agent-x"
    body["metadata"].pop("ownerReferences")
    api.create(body)
    cached(manager, "agent-x")
    taint(api, manager, "n1", [UNREACHABLE, {"key": TAINT_NOT_READY, "effect": "NoExecute",
                                             "timeAdded": format_time(T0)}])
    manager.ctx.clock.advance(10_000)
    assert manager.reconcile("default/agent-x") is None
    assert not pod(api, "agent-x")["metadata"].get("deletionTimestamp")


def test_default_is_a_setting(api, manager):
    """default_toleration_seconds is the daemon's setting, applied to pods as stored."""
    manager.settings = TaintManagerSettings(default_toleration_seconds=5)
    make_pod(api, "web")
    cached(manager, "web")
    taint(api, manager, "n1", [UNREACHABLE])
    assert manager.reconcile("default/web") == pytest.approx(5, abs=0.1)
    assert "tolerations" not in pod(api, "web")["spec"], "the pod's spec is left as written"


def test_gone_and_terminating_pods_are_success(api, manager):
    """Not found, or already terminating: nothing to do."""
    assert manager.reconcile("default/nope") is None
    make_pod(api, "leaving")
    api.delete(api.resource("pods"), "leaving", namespace="default")
    wait_for(lambda: (manager.pods.get("default", "leaving") or {"metadata": {}})["metadata"].get(
        "deletionTimestamp"), what="terminating pod cached")
    taint(api, manager, "n1", [{"key": "maint", "effect": "NoExecute"}])
    assert manager.reconcile("default/leaving") is None
    events, _ = api.list(api.resource("events"), namespace="default")
    assert [e for e in events if e["reason"] == "TaintManagerEviction"] == []


def test_pod_tolerating_unreachable_stays_through_a_partition(api):
    """A 40 s partition (grace 10 s, heartbeat 2 s, default toleration 5 s) with the agent silent: the
    only lifecycle taint ever on the node is unreachable, its pods are Ready=False within grace + 5 s,
    the pod tolerating unreachable stays bound, the plain one is evicted; the heal clears the taints."""
    from lifecycle_harness import post_node_ready, renew_lease

    from kctl.controllers.nodelifecycle import NodeLifecycleController, NodeLifecycleSettings

    grace, heartbeat = 10.0, 2.0
    clock = FakeClock(T0)
    stop = threading.Event()
    informers = InformerFactory(api)
    ctx = ControllerContext(api=api, informers=informers, recorder=Recorder(api, component="test"), clock=clock)
    lifecycle = NodeLifecycleController(settings=NodeLifecycleSettings(grace_period=grace))
    evictor = TaintManager(settings=TaintManagerSettings(default_toleration_seconds=5))
    lifecycle.register(ctx, Queue())
    evictor.register(ctx, Queue())
    try:
        for name in ("n1", "n2"):
            api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}})
            renew_lease(api, name, T0)
            post_node_ready(api, name, "True", T0)
        tolerant = make_pod(api, "tolerant", tolerations=[
            {"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}])
        make_pod(api, "plain")
        for p in (tolerant, pod(api, "plain")):
            p["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            api.update_status(p)
        informers.start(stop)
        wait_for(informers.has_synced, what="informers synced")
        wait_for(lambda: all((lifecycle.pods.get("default", n) or {}).get("status") for n in ("tolerant", "plain"))
                 and all(lifecycle.leases.get("kube-node-lease", n) for n in ("n1", "n2")), what="all cached")
        keys_seen: set[str] = set()
        not_ready_at = None
        for step in range(1, 21):  # 20 heartbeats: n2 beats, n1 (cut off) says nothing
            clock.advance(heartbeat)
            stamp = renew_lease(api, "n2", clock.value)
            wait_for(lambda: (lifecycle.heartbeat_seen("n2") or (None,))[0] == stamp, what="n2 renewal seen")
            lifecycle.reconcile("n1")
            wait_for(lambda: lifecycle.nodes.get("", "n1") == api.get(api.resource("nodes"), "n1"),
                     what="n1 cached as stored")
            keys_seen |= {t["key"] for t in lifecycle.nodes.get("", "n1")["spec"].get("taints") or ()}
            if not_ready_at is None and not any(c.get("status") == "True" for c in pod(api, "tolerant")["status"]
                                                ["conditions"] if c["type"] == "Ready"):
                not_ready_at = step * heartbeat
            for name in ("tolerant", "plain"):
                wait_for(lambda: evictor.pods.get("default", name) == pod(api, name), what=f"{name} cached")
                evictor.reconcile(f"default/{name}")
        assert keys_seen == {TAINT_UNREACHABLE}, "the taint key is stable for the whole partition"
        assert not_ready_at is not None and not_ready_at <= grace + 5
        assert pod(api, "plain")["metadata"].get("deletionTimestamp"), "no toleration of its own: evicted"
        survivor = pod(api, "tolerant")
        assert not survivor["metadata"].get("deletionTimestamp") and survivor["spec"]["nodeName"] == "n1"
        # the heal: the agent renews the Lease, then posts Ready
        stamp = renew_lease(api, "n1", clock.value)
        wait_for(lambda: (lifecycle.heartbeat_seen("n1") or (None,))[0] == stamp, what="n1 renewal seen")
        post_node_ready(api, "n1", "True", clock.value)
        wait_for(lambda: lifecycle.nodes.get("", "n1")["status"]["conditions"][0]["status"] == "True",
                 what="n1 Ready cached")
        lifecycle.reconcile("n1")
        assert (api.get(api.resource("nodes"), "n1")["spec"].get("taints") or []) == []
        assert not pod(api, "tolerant")["metadata"].get("deletionTimestamp")
    finally:
        stop.set()
