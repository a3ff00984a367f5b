"""The node lifecycle controller: silent nodes turn Unknown and are tainted, live ones are cleared.

Unit tests drive `reconcile` by hand with a fake clock over the real store; the last test
runs the whole loop (manager, scheduler, fake kubelets) for a Deployment on three nodes.
"""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from lifecycle_harness import FakeClock, Queue, running, wait_for

from kctl.machinery.times import format_time, parse_time
from kctl.client.informer import InformerFactory
from kctl.controllers.base import ControllerContext, Recorder
from kctl.controllers.nodelifecycle import (LEASE_NAMESPACE, STATUS_UNKNOWN_MESSAGE, STATUS_UNKNOWN_REASON,
                                           TAINT_NOT_READY, TAINT_UNREACHABLE, NodeLifecycleController,
                                           NodeLifecycleSettings, lifecycle_taints)

T0 = dt.datetime(2030, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
GRACE = 40.0




def add_node(api, name: str, *, ready: str = "True", when: dt.datetime = T0, taints: list | None = None) -> dict:
    status = {"conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady", "message": "ok",
                              "lastHeartbeatTime": format_time(when), "lastTransitionTime": format_time(when)}]}
    return api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                       "spec": {"taints": taints} if taints else {}, "status": status})


def post_ready(api, name: str, ready: str, when: dt.datetime) -> dict:
    """What an agent's heartbeat writes: the Ready condition, with a new lastHeartbeatTime."""
    node = api.get(api.resource("nodes"), name)
    node["status"]["conditions"] = [{"type": "Ready", "status": ready, "reason": "KubeletReady", "message": "ok",
                                     "lastHeartbeatTime": format_time(when), "lastTransitionTime": format_time(when)}]
    return api.update_status(node)


def renew(api, name: str, when: dt.datetime) -> str:
    """Create or renew kube-node-lease/<name> with renewTime `when`; returns the renewTime."""
    from kctl.machinery.errors import NotFound

    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    rt = api.resource("leases")
    try:
        lease = api.get(rt, name, namespace=LEASE_NAMESPACE)
    except NotFound:
        try:
            api.get(api.resource("namespaces"), LEASE_NAMESPACE)
        except NotFound:
            api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NAMESPACE}})
        api.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
                    "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": stamp}})
        return stamp
    lease["spec"]["renewTime"] = stamp
    api.update(lease)
    return stamp


def alive(api, controller, *names: str) -> None:
    """These nodes renew their Leases now, and the controller has seen it."""
    for name in names:
        stamp = renew(api, name, controller.ctx.clock.value)
        wait_for(lambda: (controller.heartbeat_seen(name) or (None,))[0] == stamp, what=f"{name} renewal seen")


def node(api, name: str) -> dict:
    return api.get(api.resource("nodes"), name)


def ready_of(obj: dict) -> dict:
    return next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")


def lifecycle_taints_of(obj: dict) -> list[tuple[str, str]]:
    return sorted((t["key"], t["effect"]) for t in (obj.get("spec") or {}).get("taints") or ()
                  if t["key"] in (TAINT_NOT_READY, TAINT_UNREACHABLE))


def events_about(api, name: str, reason: str, namespace: str = "default") -> list[dict]:
    items, _ = api.list(api.resource("events"), namespace=namespace)
    return [e for e in items if e["involvedObject"]["name"] == name and e["reason"] == reason]


@pytest.fixture
def lifecycle(api):
    """A NodeLifecycleController (grace 40 s) over synced informers, with a fake clock at T0."""
    stop = threading.Event()
    clock = FakeClock(T0)
    informers = InformerFactory(api)
    ctx = ControllerContext(api=api, informers=informers, recorder=Recorder(api, component="test"), clock=clock)
    controller = NodeLifecycleController(settings=NodeLifecycleSettings(grace_period=GRACE))
    controller.register(ctx, Queue())
    informers.start(stop)
    wait_for(informers.has_synced, what="informers synced")
    yield controller
    stop.set()


def settle(controller, name: str, predicate) -> None:
    """Wait until the controller's cache shows node `name` as predicate wants."""
    wait_for(lambda: (n := controller.nodes.get("", name)) is not None and predicate(n), what=f"node {name} cached")


def cached_lease(controller, name: str, stamp: str) -> None:
    wait_for(lambda: ((controller.leases.get(LEASE_NAMESPACE, name) or {}).get("spec") or {}).get("renewTime")
             == stamp, what=f"lease {name} cached")


# -- pure parts ------------------------------------------------------------------------------

NOW = T0 + dt.timedelta(seconds=90)
OLD = format_time(T0)


@pytest.mark.parametrize("taints, key, no_execute, expected", [
    ([], None, True, []),
    ([], TAINT_UNREACHABLE, True, [{"key": TAINT_UNREACHABLE, "effect": "NoSchedule"},
                                   {"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": format_time(NOW)}]),
    ([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}], TAINT_NOT_READY, True,
     [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}, {"key": TAINT_NOT_READY, "effect": "NoSchedule"},
      {"key": TAINT_NOT_READY, "effect": "NoExecute", "timeAdded": format_time(NOW)}]),
    ([{"key": TAINT_NOT_READY, "effect": "NoSchedule"}, {"key": TAINT_NOT_READY, "effect": "NoExecute",
                                                         "timeAdded": OLD}], TAINT_UNREACHABLE, True,
     [{"key": TAINT_UNREACHABLE, "effect": "NoSchedule"},
      {"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": OLD}]),
    ([{"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": OLD}], TAINT_UNREACHABLE, True,
     [{"key": TAINT_UNREACHABLE, "effect": "NoSchedule"},
      {"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": OLD}]),
    ([{"key": TAINT_UNREACHABLE, "effect": "NoSchedule"}, {"key": TAINT_UNREACHABLE, "effect": "NoExecute"},
      {"key": "x", "effect": "NoExecute"}], None, True, [{"key": "x", "effect": "NoExecute"}]),
    ([{"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": OLD}], TAINT_UNREACHABLE, False,
     [{"key": TAINT_UNREACHABLE, "effect": "NoSchedule"}]),
], ids=["ready-none", "unreachable-added", "others-kept", "swap-keeps-time-added", "kept-as-is", "ready-clears",
        "disruption-no-noexecute"])
def test_lifecycle_taints(taints, key, no_execute, expected):
    """The not-ready/unreachable taints follow the Ready condition; others are never touched."""
    assert lifecycle_taints(taints, key, now=NOW, no_execute=no_execute) == expected


# -- reconcile by hand ----------------------------------------------------------------------

def test_silent_node_turns_unknown_and_tainted(api, lifecycle):
    """No heartbeat for the grace period: conditions Unknown, unreachable taints, NodeNotReady event."""
    for name in ("n1", "n2", "n3"):
        add_node(api, name)
        cached_lease(lifecycle, name, renew(api, name, T0))
    assert lifecycle.reconcile("n1") == pytest.approx(GRACE, abs=0.1), "requeued when its lease would expire"
    assert lifecycle_taints_of(node(api, "n1")) == []
    lifecycle.ctx.clock.advance(GRACE)
    assert lifecycle.reconcile("n1") == pytest.approx(0, abs=0.1), "not yet: the grace is not exceeded"
    assert ready_of(node(api, "n1"))["status"] == "True"
    lifecycle.ctx.clock.advance(1)
    alive(api, lifecycle, "n2", "n3")
    assert lifecycle.reconcile("n1") is None
    after = node(api, "n1")
    ready = ready_of(after)
    assert (ready["status"], ready["reason"], ready["message"]) == ("Unknown", STATUS_UNKNOWN_REASON,
                                                                    STATUS_UNKNOWN_MESSAGE)
    assert ready["lastHeartbeatTime"] == format_time(T0), "the last heartbeat is kept"
    assert lifecycle_taints_of(after) == [(TAINT_UNREACHABLE, "NoExecute"), (TAINT_UNREACHABLE, "NoSchedule")]
    no_execute = next(t for t in after["spec"]["taints"] if t["effect"] == "NoExecute")
    assert parse_time(no_execute["timeAdded"]) == T0 + dt.timedelta(seconds=GRACE + 1)
    assert [e["message"] for e in events_about(api, "n1", "NodeNotReady", namespace="default")] == [
        "Node n1 status is now: NodeNotReady"]
    settle(lifecycle, "n1", lambda n: ready_of(n)["status"] == "Unknown" and n["spec"].get("taints"))
    assert lifecycle.reconcile("n1") is None
    assert node(api, "n1")["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"], "idempotent"


def test_lease_renewal_keeps_node_alive(api, lifecycle):
    """Each renewal seen moves the expiry: the requeue is grace seconds after the renewal was seen."""
    add_node(api, "n1")
    add_node(api, "n2")
    cached_lease(lifecycle, "n1", renew(api, "n1", T0))
    assert lifecycle.reconcile("n1") == pytest.approx(GRACE, abs=0.1)
    lifecycle.ctx.clock.advance(30)
    cached_lease(lifecycle, "n1", renew(api, "n1", T0 + dt.timedelta(seconds=30)))
    lifecycle.ctx.clock.advance(20)
    assert lifecycle.reconcile("n1") == pytest.approx(GRACE - 20, abs=0.1)
    assert ready_of(node(api, "n1"))["status"] == "True"


def test_node_without_lease_lives_on_status_heartbeats(api, lifecycle):
    """Without a Lease the Ready condition's lastHeartbeatTime is the heartbeat."""
    add_node(api, "n1")
    add_node(api, "n2")
    settle(lifecycle, "n1", lambda n: True)
    assert lifecycle.reconcile("n1") == pytest.approx(GRACE, abs=0.1)
    lifecycle.ctx.clock.advance(35)
    beat = T0 + dt.timedelta(seconds=35)
    post_ready(api, "n1", "True", beat)
    settle(lifecycle, "n1", lambda n: ready_of(n)["lastHeartbeatTime"] == format_time(beat))
    lifecycle.ctx.clock.advance(35)
    assert lifecycle.reconcile("n1") == pytest.approx(5, abs=0.1)
    lifecycle.ctx.clock.advance(6)
    lifecycle.reconcile("n1")
    assert ready_of(node(api, "n1"))["status"] == "Unknown"


def test_clock_skew_does_not_matter(api, lifecycle):
    """A host whose clock is an hour behind is alive as long as its renewals keep coming."""
    add_node(api, "n1", when=T0 - dt.timedelta(hours=1))
    add_node(api, "n2")
    cached_lease(lifecycle, "n1", renew(api, "n1", T0 - dt.timedelta(hours=1)))
    assert lifecycle.reconcile("n1") == pytest.approx(GRACE, abs=0.1)
    assert ready_of(node(api, "n1"))["status"] == "True"


def test_not_ready_then_silent_then_ready_again(api, lifecycle):
    """Ready=False -> not-ready taints; then silence -> unreachable (same timeAdded); Ready -> cleared."""
    add_node(api, "n1")
    add_node(api, "n2", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
    cached_lease(lifecycle, "n2", renew(api, "n2", T0))
    post_ready(api, "n2", "False", T0)
    settle(lifecycle, "n2", lambda n: ready_of(n)["status"] == "False")
    lifecycle.reconcile("n2")
    first = node(api, "n2")
    assert lifecycle_taints_of(first) == [(TAINT_NOT_READY, "NoExecute"), (TAINT_NOT_READY, "NoSchedule")]
    added = next(t["timeAdded"] for t in first["spec"]["taints"] if t["effect"] == "NoExecute")
    settle(lifecycle, "n2", lambda n: len(n["spec"].get("taints") or ()) == 3)
    lifecycle.ctx.clock.advance(GRACE + 1)
    alive(api, lifecycle, "n1")
    lifecycle.reconcile("n2")
    silent = node(api, "n2")
    assert ready_of(silent)["status"] == "Unknown"
    assert lifecycle_taints_of(silent) == [(TAINT_UNREACHABLE, "NoExecute"), (TAINT_UNREACHABLE, "NoSchedule")]
    assert next(t["timeAdded"] for t in silent["spec"]["taints"] if t["effect"] == "NoExecute") == added
    assert events_about(api, "n2", "NodeNotReady") == [], "it was not Ready before: no NodeNotReady"
    settle(lifecycle, "n2", lambda n: ready_of(n)["status"] == "Unknown" and
           lifecycle_taints_of(n) == lifecycle_taints_of(silent))
    # the host answers again: its agent renews the Lease, then posts Ready
    stamp = renew(api, "n2", lifecycle.ctx.clock.value)
    cached_lease(lifecycle, "n2", stamp)
    assert lifecycle.reconcile("n2") == pytest.approx(GRACE, abs=0.1)
    assert lifecycle_taints_of(node(api, "n2")) != [], "the taints stay until the agent posts Ready"
    post_ready(api, "n2", "True", lifecycle.ctx.clock.value)
    settle(lifecycle, "n2", lambda n: ready_of(n)["status"] == "True")
    lifecycle.reconcile("n2")
    back = node(api, "n2")
    assert back["spec"]["taints"] == [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]


def test_pods_marked_not_ready_with_events(api, lifecycle):
    """A Ready node going Unknown: its pods' Ready turns False, each with a NodeNotReady Event."""
    add_node(api, "n1")
    add_node(api, "n2")
    pod = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                      "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}})
    pod["status"] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": format_time(T0)},
        {"type": "ContainersReady", "status": "True", "lastTransitionTime": format_time(T0)}]}
    api.update_status(pod)
    wait_for(lambda: (lifecycle.pods.get("default", "web") or {}).get("status"), what="pod cached")
    settle(lifecycle, "n2", lambda n: True)
    lifecycle.reconcile("n1")
    lifecycle.ctx.clock.advance(GRACE + 1)
    lifecycle.reconcile("n1")
    after = api.get(api.resource("pods"), "web", namespace="default")
    conditions = {c["type"]: c["status"] for c in after["status"]["conditions"]}
    assert conditions == {"Ready": "False", "ContainersReady": "True"}
    assert [e["message"] for e in events_about(api, "web", "NodeNotReady")] == ["Node is not ready"]


def test_every_node_silent_is_master_disruption(api, lifecycle):
    """When no node is Ready, the nodes turn Unknown but get no NoExecute taint: nothing is evicted."""
    add_node(api, "n1")
    settle(lifecycle, "n1", lambda n: True)
    lifecycle.reconcile("n1")
    lifecycle.ctx.clock.advance(GRACE + 1)
    lifecycle.reconcile("n1")
    alone = node(api, "n1")
    assert ready_of(alone)["status"] == "Unknown"
    assert lifecycle_taints_of(alone) == [(TAINT_UNREACHABLE, "NoSchedule")]


def test_leaving_disruption_taints_the_still_silent(api, lifecycle):
    """All nodes silent: no NoExecute; one comes back Ready: the others get theirs (queued for it)."""
    for name in ("n1", "n2"):
        add_node(api, name)
        settle(lifecycle, name, lambda n: True)
    lifecycle.ctx.clock.advance(GRACE + 1)
    for name in ("n1", "n2"):
        lifecycle.reconcile(name)
        settle(lifecycle, name, lambda n: ready_of(n)["status"] == "Unknown")
    for name in ("n1", "n2"):  # n1, judged first, already counts n2 as silent
        assert lifecycle_taints_of(node(api, name)) == [(TAINT_UNREACHABLE, "NoSchedule")]
    for name in ("n1", "n2"):  # the writes above are all seen
        settle(lifecycle, name, lambda n: (n["spec"].get("taints") or []) != [])
    lifecycle.queue.keys.clear()
    post_ready(api, "n1", "True", lifecycle.ctx.clock.value)
    settle(lifecycle, "n1", lambda n: ready_of(n)["status"] == "True")
    assert "n2" in lifecycle.queue.keys, "a Ready flip queues every node"
    lifecycle.reconcile("n2")
    assert lifecycle_taints_of(node(api, "n2")) == [(TAINT_UNREACHABLE, "NoExecute"),
                                                    (TAINT_UNREACHABLE, "NoSchedule")]


def test_never_posted_node_gets_ready_unknown(api, lifecycle):
    """A Node with no conditions and no Lease is left alone for the grace, then Ready Unknown."""
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}, "spec": {}})
    add_node(api, "n2")
    settle(lifecycle, "bare", lambda n: True)
    settle(lifecycle, "n2", lambda n: True)
    assert lifecycle.reconcile("bare") == pytest.approx(GRACE, abs=0.1)
    assert (node(api, "bare").get("spec") or {}).get("taints") is None
    lifecycle.ctx.clock.advance(GRACE + 1)
    alive(api, lifecycle, "n2")
    lifecycle.reconcile("bare")
    ready = ready_of(node(api, "bare"))
    assert (ready["status"], ready["reason"], ready["message"]) == ("Unknown", "NodeStatusNeverUpdated",
                                                                    "Kubelet never posted node status.")
    assert lifecycle_taints_of(node(api, "bare")) == [(TAINT_UNREACHABLE, "NoExecute"),
                                                      (TAINT_UNREACHABLE, "NoSchedule")]


def test_missing_node_is_success(lifecycle):
    """Not found is success."""
    assert lifecycle.reconcile("nowhere") is None


# -- the whole loop ---------------------------------------------------------------------------

def test_silent_node_pods_move_to_other_nodes(api):
    """3 nodes, 6 replicas; one node's Lease stops: Unknown + tainted after the grace, its pods
    evicted after the default toleration and replaced on the other nodes; back, it is untainted."""
    from kctl.controllers.deployment import DeploymentController
    from kctl.controllers.podgc import PodGCController
    from kctl.controllers.replicaset import ReplicaSetController
    from kctl.controllers.taintmanager import TaintManager, TaintManagerSettings
    from kctl.scheduler.scheduler import Scheduler
    from kctl.testing.fake_kubelet import FakeKubelet

    clock = FakeClock(T0)
    names = ["n1", "n2", "n3"]
    stop = threading.Event()
    agent_stops = {name: threading.Event() for name in names}
    for name in names:  # one fake agent per node, so one can fall silent alone
        FakeKubelet(api, nodes=[name], clock=clock).start(agent_stops[name])
    for name in names:
        renew(api, name, T0)
    controllers = [ReplicaSetController(), DeploymentController(),
                   NodeLifecycleController(settings=NodeLifecycleSettings(grace_period=GRACE)),
                   TaintManager(settings=TaintManagerSettings(default_toleration_seconds=300)), PodGCController()]
    lifecycle = controllers[-3]
    scheduler = Scheduler(api)
    threading.Thread(target=scheduler.run, args=(stop,), daemon=True).start()
    pods_rt = api.resource("pods")

    def pods(*, live: bool = True) -> list[dict]:
        items = [p for p in api.list(pods_rt, namespace="default")[0] if p["metadata"]["name"].startswith("web-")]
        return [p for p in items if bool(p["metadata"].get("deletionTimestamp")) != live]

    def placement() -> dict[str, int]:
        counts: dict[str, int] = {}
        for p in pods():
            counts[p["spec"].get("nodeName") or ""] = counts.get(p["spec"].get("nodeName") or "", 0) + 1
        return counts

    def all_ready(count: int) -> bool:
        live = pods()
        return len(live) == count and all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or ())
            for p in live)

    def pass_time(seconds: float, *, silent: str) -> None:
        """Move the clock in 5 s beats; at each the live nodes renew and the controller sees it, so
        whenever it looks, none of them has been silent for more than a beat."""
        while seconds > 0:
            clock.advance(min(5.0, seconds))
            seconds -= 5.0
            for name in set(names) - {silent}:
                stamp = renew(api, name, clock.value)
                wait_for(lambda: (lifecycle.heartbeat_seen(name) or (None,))[0] == stamp,
                         what=f"{name} renewal seen")

    try:
        with running(api, controllers, clock=clock) as manager:
            api.create({"apiVersion": "apps/v1", "kind": "Deployment",
                        "metadata": {"name": "web", "namespace": "default"},
                        "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "web"}},
                                 "template": {"metadata": {"labels": {"app": "web"}},
                                              "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
            wait_for(lambda: all_ready(6) and "" not in placement(), what="6 pods running")
            # the node with most pods goes silent (its agent is stopped: nothing renews or deletes)
            counts = placement()
            bad = max(sorted(counts), key=lambda n: counts[n])
            good = sorted(set(names) - {bad})
            on_bad = [p["metadata"]["name"] for p in pods() if p["spec"]["nodeName"] == bad]
            assert len(on_bad) >= 2
            agent_stops[bad].set()
            pass_time(GRACE + 1, silent=bad)
            manager.queue("nodelifecycle").add(bad)
            wait_for(lambda: ready_of(node(api, bad))["status"] == "Unknown"
                     and lifecycle_taints_of(node(api, bad)) == [(TAINT_UNREACHABLE, "NoExecute"),
                                                                 (TAINT_UNREACHABLE, "NoSchedule")],
                     what="the silent node Unknown and tainted unreachable")
            assert all(ready_of(node(api, name))["status"] == "True" for name in good)
            assert all(not p["metadata"].get("deletionTimestamp") for p in pods(live=True)
                       if p["metadata"]["name"] in on_bad), "tolerated for 300 s: not evicted yet"
            pass_time(300, silent=bad)
            for name in on_bad:
                manager.queue("taintmanager").add(f"default/{name}")
            wait_for(lambda: {p["metadata"]["name"] for p in pods(live=False)} == set(on_bad),
                     what="the silent node's pods evicted (terminating)")
            wait_for(lambda: all_ready(6) and set(placement()) == set(good), what="replacements on the others")
            wait_for(lambda: all(events_about(api, name, "TaintManagerEviction") for name in on_bad),
                     what="a TaintManagerEviction event on each evicted pod")
            # the host answers again: its agent fences (deletes the evicted pods), renews, posts Ready
            back_stop = threading.Event()
            try:
                FakeKubelet(api, nodes=[bad], clock=clock).start(back_stop)
                wait_for(lambda: pods(live=False) == [], what="evicted pods finished by the agent")
                renew(api, bad, clock.value)
                post_ready(api, bad, "True", clock.value)
                wait_for(lambda: lifecycle_taints_of(node(api, bad)) == [], what="the node untainted")
            finally:
                back_stop.set()
            assert all_ready(6)
    finally:
        stop.set()
        for agent_stop in agent_stops.values():
            agent_stop.set()


# -- MarkPodsNotReady on every transition, the agent's cause, late posts ---------------------

def ready_pod(api, name: str, node_name: str) -> dict:
    """A pod bound to `node_name` whose agent reported it Ready."""
    pod = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                      "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "nginx"}]}})
    pod["status"] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": format_time(T0)},
        {"type": "ContainersReady", "status": "True", "lastTransitionTime": format_time(T0)}]}
    return api.update_status(pod)


def pod_ready(api, name: str) -> str:
    pod = api.get(api.resource("pods"), name, namespace="default")
    return next(c["status"] for c in pod["status"]["conditions"] if c["type"] == "Ready")


def pod_cached(controller, name: str, ready: str) -> None:
    wait_for(lambda: any(c["type"] == "Ready" and c["status"] == ready for c in
                         ((controller.pods.get("default", name) or {}).get("status") or {}).get("conditions") or ()),
             what=f"pod {name} cached Ready={ready}")


def beat(api, controller, name: str, ready: str) -> None:
    """The agent's heartbeat: renew the Lease, then post Ready (both seen by the controller)."""
    now = controller.ctx.clock.value
    cached_lease(controller, name, renew(api, name, now))
    post_ready(api, name, ready, now)
    settle(controller, name, lambda n: ready_of(n)["status"] == ready
           and ready_of(n)["lastHeartbeatTime"] == format_time(now))


def go_silent(api, controller, name: str, *, alive_too: str = "n2") -> None:
    """`name` renews nothing for longer than the grace (`alive_too` keeps renewing); then reconciled."""
    controller.ctx.clock.advance(GRACE + 1)
    alive(api, controller, alive_too)
    controller.reconcile(name)
    settle(controller, name, lambda n: ready_of(n)["status"] == "Unknown" and lifecycle_taints_of(n))


@pytest.mark.parametrize("transition", ["True->False", "True->Unknown", "False->Unknown", "Unknown->True"])
def test_pods_marked_not_ready_on_every_transition(api, lifecycle, transition):
    """Every change of the node's Ready away from True marks its Ready pods not ready, whoever wrote it."""
    before, after = transition.split("->")
    add_node(api, "n1")
    add_node(api, "n2")
    cached_lease(lifecycle, "n2", renew(api, "n2", T0))
    beat(api, lifecycle, "n1", before) if before != "Unknown" else None
    if before == "Unknown":
        go_silent(api, lifecycle, "n1")
    lifecycle.reconcile("n1")  # the controller has seen the node as it was before
    ready_pod(api, "web", "n1")  # Ready now (an agent's write, or a pod that was Ready all along)
    pod_cached(lifecycle, "web", "True")
    marked_before = events_about(api, "web", "NodeNotReady")
    if after == "Unknown":
        go_silent(api, lifecycle, "n1")
    else:
        beat(api, lifecycle, "n1", after)
        lifecycle.reconcile("n1")
    node_events = [e["message"] for e in events_about(api, "n1", "NodeNotReady")]
    if after == "True":
        assert pod_ready(api, "web") == "True", "a node Ready again leaves its pods to the agent"
        assert lifecycle_taints_of(node(api, "n1")) == []
        return
    assert pod_ready(api, "web") == "False"
    assert len(events_about(api, "web", "NodeNotReady")) == len(marked_before) + 1
    assert node_events == (["Node n1 status is now: NodeNotReady"] if before == "True" else [])
    expected = TAINT_NOT_READY if after == "False" else TAINT_UNREACHABLE
    assert lifecycle_taints_of(node(api, "n1")) == [(expected, "NoExecute"), (expected, "NoSchedule")]
    pod_cached(lifecycle, "web", "False")
    lifecycle.reconcile("n1")
    assert len(events_about(api, "web", "NodeNotReady")) == len(marked_before) + 1, "once per transition"


def test_pod_put_on_a_not_ready_node_is_marked(api, lifecycle):
    """A pod bound to a node that is not Ready is queued by the pod handler and marked not ready."""
    add_node(api, "n1")
    add_node(api, "n2")
    cached_lease(lifecycle, "n2", renew(api, "n2", T0))
    beat(api, lifecycle, "n1", "False")
    lifecycle.reconcile("n1")
    lifecycle.queue.keys.clear()
    ready_pod(api, "late", "n1")
    ready_pod(api, "fine", "n2")
    wait_for(lambda: "default/late" in lifecycle.queue.keys, what="the pod queued")
    pod_cached(lifecycle, "late", "True")
    pod_cached(lifecycle, "fine", "True")
    assert "default/fine" not in lifecycle.queue.keys, "a pod on a Ready node is left alone"
    assert lifecycle.reconcile("default/late") is None
    assert (pod_ready(api, "late"), pod_ready(api, "fine")) == ("False", "True")
    assert [e["message"] for e in events_about(api, "late", "NodeNotReady")] == ["Node is not ready"]
    assert lifecycle.reconcile("default/gone") is None, "not found is success"


def test_late_status_post_during_partition_keeps_unreachable(api, lifecycle):
    """An agent's late Ready=False post, without a Lease renewal, is no heartbeat: Unknown is written
    back and the unreachable taint stays as it was (no not-ready taint, no second marking)."""
    add_node(api, "n1")
    add_node(api, "n2")
    cached_lease(lifecycle, "n1", renew(api, "n1", T0))
    cached_lease(lifecycle, "n2", renew(api, "n2", T0))
    ready_pod(api, "web", "n1")
    pod_cached(lifecycle, "web", "True")
    lifecycle.reconcile("n1")
    go_silent(api, lifecycle, "n1")
    tainted = node(api, "n1")["spec"]["taints"]
    assert lifecycle_taints_of(node(api, "n1")) == [(TAINT_UNREACHABLE, "NoExecute"), (TAINT_UNREACHABLE, "NoSchedule")]
    lifecycle.ctx.clock.advance(10)
    post_ready(api, "n1", "False", lifecycle.ctx.clock.value)  # the late post: a new lastHeartbeatTime, no Lease
    settle(lifecycle, "n1", lambda n: ready_of(n)["status"] == "False")
    assert lifecycle.reconcile("n1") is None
    after = node(api, "n1")
    assert ready_of(after)["status"] == "Unknown"
    assert after["spec"]["taints"] == tainted, "the taint key and its timeAdded are kept"
    assert len(events_about(api, "web", "NodeNotReady")) == 1


def test_unknown_carries_the_agents_cause(api, lifecycle):
    """The agent's kctl.io/unreachable-* annotations become the Unknown Ready condition's reason and
    message, and it follows a changed cause while the node stays Unknown."""
    add_node(api, "n1")
    add_node(api, "n2")
    cached_lease(lifecycle, "n1", renew(api, "n1", T0))
    cached_lease(lifecycle, "n2", renew(api, "n2", T0))

    def annotate(reason: str, message: str) -> None:
        obj = node(api, "n1")
        obj["metadata"].setdefault("annotations", {}).update({
            "kctl.io/unreachable-reason": reason, "kctl.io/unreachable-message": message})
        api.update(obj)
        settle(lifecycle, "n1",
               lambda n: (n["metadata"].get("annotations") or {}).get("kctl.io/unreachable-reason") == reason)

    annotate("ConnectionRefused", "node n1: host 10.0.0.1:22 refused the connection")
    go_silent(api, lifecycle, "n1")
    ready = ready_of(node(api, "n1"))
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "Unknown", "ConnectionRefused", "node n1: host 10.0.0.1:22 refused the connection")
    annotate("HostKeyChanged", "node n1: host key changed; run 'kctl node trust n1'")
    lifecycle.reconcile("n1")
    changed = ready_of(node(api, "n1"))
    assert (changed["reason"], changed["message"]) == ("HostKeyChanged",
                                                       "node n1: host key changed; run 'kctl node trust n1'")
    assert changed["lastTransitionTime"] == ready["lastTransitionTime"], "the same Unknown, a new cause"
