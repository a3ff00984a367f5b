"""The scheduler end to end over a real store: binding many pods, failures users can read,
retries on cluster events, profiles, and the running loop with its own informers."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from scheduler_harness import FakeClock, node, pod

from kctl.machinery.errors import Conflict
from kctl.output.describe import describe
from kctl.scheduler.config import Profile, SchedulerConfig
from kctl.scheduler.scheduler import Scheduler, SchedulerSettings, node_update_events

WAIT = 60.0


def wait_for(predicate, *, timeout: float = WAIT) -> bool:
    """Poll until predicate() holds (the scheduler works in threads); False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def pods_of(api) -> list[dict]:
    return api.list(api.resource("pods"))[0]


def scheduled_condition(p: dict) -> dict | None:
    return next((c for c in (p.get("status") or {}).get("conditions") or () if c["type"] == "PodScheduled"), None)


def sync(api, sched: Scheduler) -> None:
    """Feed the scheduler what the store holds, as an informer's first list would."""
    for n in api.list(api.resource("nodes"))[0]:
        sched.on_node_add(n)
    for p in pods_of(api):
        sched.on_pod_add(p)


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def sched(api, clock):
    """A scheduler on a fake clock (back-offs pass when the test says), driven synchronously."""
    return Scheduler(api, clock=clock)


def test_run_binds_500_pods_on_50_nodes(api):
    """The running scheduler (own informers, bind worker) binds 500 pods over 50 Nodes, evenly."""
    api.write_all([("create", node(f"n{i:02d}")) for i in range(50)])
    api.write_all([("create", pod(f"p{i:03d}", cpu="100m", memory="128Mi")) for i in range(500)])
    sched = Scheduler(api)
    stop = threading.Event()
    runner = threading.Thread(target=sched.run, args=(stop,))
    runner.start()
    try:
        assert wait_for(lambda: all(p["spec"].get("nodeName") for p in pods_of(api)))
    finally:
        stop.set()
        runner.join(30)
    assert not runner.is_alive()
    placed = Counter(p["spec"]["nodeName"] for p in pods_of(api))
    assert len(placed) == 50 and set(placed.values()) == {10}
    assert all(scheduled_condition(p)["status"] == "True" for p in pods_of(api))
    assert sched.binder.batches < 500  # bindings went in batches, not one transaction each
    events = [e for e in api.list(api.resource("events"))[0] if e["reason"] == "Scheduled"]
    assert len(events) == 500
    assert any(e["message"] == "Successfully assigned default/p000 to " + placed_node(api, "p000") for e in events)


def placed_node(api, name: str) -> str:
    return api.get(api.resource("pods"), name, namespace="default")["spec"].get("nodeName")


def test_pods_created_while_running_are_scheduled(api):
    """Pods created after the scheduler started arrive through its watch and are bound."""
    api.create(node("n1"))
    sched = Scheduler(api)
    stop = threading.Event()
    runner = threading.Thread(target=sched.run, args=(stop,))
    runner.start()
    try:
        api.create(pod("late", cpu="100m"))
        assert wait_for(lambda: placed_node(api, "late") == "n1")
    finally:
        stop.set()
        runner.join(30)


def test_unschedulable_pod_gets_condition_event_and_describe(api, sched):
    """A pod that fits nowhere: PodScheduled=False with kube's message, a FailedScheduling Event,
    and `kctl describe pod` shows the reason."""
    api.create(node("small-1", memory="1Gi"))
    api.create(node("small-2", memory="1Gi"))
    api.create(node("tainted", memory="64Gi", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]))
    api.create(pod("big", memory="4Gi"))
    sync(api, sched)
    sched.schedule_pending()
    obj = api.get(api.resource("pods"), "big", namespace="default")
    condition = scheduled_condition(obj)
    expected = ("0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 Insufficient memory. "
                "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
                "2 No preemption victims found for incoming pod.")
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Unschedulable", expected)
    events = [e for e in api.list(api.resource("events"))[0] if e["involvedObject"]["name"] == "big"]
    assert [(e["type"], e["reason"], e["message"]) for e in events] == [("Warning", "FailedScheduling", expected)]
    text = describe(obj, api.resource("pods"), events)
    assert text.split("Message:")[1].splitlines()[0].strip() == expected
    assert "FailedScheduling" in text


def test_message_without_preemption(api):
    """With DefaultPreemption disabled, the message is exactly kube-scheduler's Filter summary."""
    from kctl.scheduler.config import PluginSet

    config = SchedulerConfig((Profile(plugins={"postFilter": PluginSet(disabled=("*",))}),))
    sched = Scheduler(api, config=config)
    api.create(node("a", memory="1Gi"))
    api.create(node("b", memory="1Gi"))
    api.create(node("c", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]))
    api.create(pod("big", memory="2Gi"))
    sync(api, sched)
    sched.schedule_pending()
    condition = scheduled_condition(api.get(api.resource("pods"), "big", namespace="default"))
    assert condition["message"] == "0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, " \
                                   "2 Insufficient memory."


def test_failure_is_written_once_and_event_counted(api, sched, clock):
    """Trying an unschedulable pod again does not rewrite an unchanged condition; the Event's count grows."""
    api.create(node("n", cpu="1"))
    api.create(pod("p", cpu="2"))
    sync(api, sched)
    sched.schedule_pending()
    first = api.get(api.resource("pods"), "p", namespace="default")
    sched.queue.move_all_on_event(next(iter(sched.profiles["default-scheduler"].events_of("NodeResourcesFit"))))
    clock.advance(60)  # its back-off over
    sched.schedule_pending()
    again = api.get(api.resource("pods"), "p", namespace="default")
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    events = [e for e in api.list(api.resource("events"))[0] if e["reason"] == "FailedScheduling"]
    assert len(events) == 1 and events[0]["count"] == 2


def test_node_added_retries_waiting_pod(api, sched, clock):
    """An unschedulable pod waits without retries, and is bound once a node that fits is added."""
    api.create(node("small", cpu="1"))
    api.create(pod("p", cpu="2"))
    sync(api, sched)
    sched.schedule_pending()
    assert sched.queue.where("default/p") == "unschedulable"
    assert sched.schedule_pending() == 0  # nothing to try: no polling
    sched.on_node_add(api.create(node("big", cpu="8")))
    clock.advance(60)  # its 1 s back-off over
    sched.schedule_pending()
    assert placed_node(api, "p") == "big"


def test_deleted_pod_frees_room(api, sched, clock):
    """Deleting a bound pod (AssignedPodDelete) retries the pods that did not fit for lack of room."""
    api.create(node("n", cpu="1"))
    api.create(pod("first", cpu="800m"))
    sync(api, sched)
    sched.schedule_pending()
    api.create(pod("second", cpu="800m"))
    sched.on_pod_add(api.get(api.resource("pods"), "second", namespace="default"))
    sched.schedule_pending()
    assert sched.queue.where("default/second") == "unschedulable"
    bound = api.get(api.resource("pods"), "first", namespace="default")
    sched.on_pod_delete(bound)
    clock.advance(60)
    sched.schedule_pending()
    assert placed_node(api, "second") == "n"


def test_priority_gets_the_last_slot(api, sched):
    """With room for one pod, the higher-priority pod is scheduled first and gets it."""
    api.create(node("n", cpu="1"))
    for cls, value in (("low", 1), ("high", 1000)):  # the Priority admission plugin resolves classes
        api.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": cls},
                    "value": value})
    api.create(pod("low", cpu="1", priorityClassName="low"))
    api.create(pod("high", cpu="1", priorityClassName="high"))
    sync(api, sched)
    sched.schedule_pending()
    assert placed_node(api, "high") == "n"
    assert not api.get(api.resource("pods"), "low", namespace="default")["spec"].get("nodeName")


@pytest.mark.parametrize("scheduler_name, scheduled", [
    (None, True), ("default-scheduler", True), ("someone-else", False),
], ids=["default", "named-default", "other-scheduler"])
def test_only_pods_of_its_profiles(api, sched, scheduler_name, scheduled):
    """Pods naming a schedulerName no profile has are left alone."""
    api.create(node("n"))
    api.create(pod("p", scheduler_name=scheduler_name))
    sync(api, sched)
    sched.schedule_pending()
    obj = api.get(api.resource("pods"), "p", namespace="default")
    assert bool(obj["spec"].get("nodeName")) is scheduled
    if not scheduled:
        assert scheduled_condition(obj) is None


def test_second_profile_by_scheduler_name(api):
    """A profile with another schedulerName schedules the pods that name it, with its own plugins."""
    from kctl.scheduler.config import PluginSet

    packer = Profile("packer", plugin_config={"NodeResourcesFit": {"scoringStrategy": {"type": "MostAllocated"}}},
                     plugins={"score": PluginSet(disabled=("NodeResourcesBalancedAllocation",))})
    sched = Scheduler(api, config=SchedulerConfig((Profile(), packer)))
    api.create(node("a", cpu="4"))
    api.create(node("b", cpu="4"))
    api.create(pod("seed", cpu="2", node_name="b"))
    for i in range(3):
        api.create(pod(f"p{i}", cpu="500m", scheduler_name="packer"))
    sync(api, sched)
    sched.schedule_pending()
    assert {placed_node(api, f"p{i}") for i in range(3)} == {"b"}  # packed onto the fuller node


def test_binding_conflict_is_forgotten_and_dropped(api, sched):
    """If someone binds the pod first, the scheduler's binding fails, the assumption is undone."""
    api.create(node("n1"))
    api.create(node("n2"))
    api.create(pod("p", cpu="1"))
    sync(api, sched)
    qpi = sched.queue.pop(timeout=0)
    sched.schedule_one(qpi)  # assumed; the binding is queued
    assert sched.cache.is_assumed("default/p")
    api.bind("default", "p", "n1")  # someone else binds it meanwhile
    sched.binder.drain()
    assert not sched.cache.has_pod("default/p")
    assert sched.queue.where("default/p") is None
    with pytest.raises(Conflict):
        api.bind("default", "p", "n2")


def test_node_update_events():
    """A heartbeat is no cluster event; allocatable, labels, taints and cordoning are."""
    base = node("n")
    heartbeat = {**base, "status": {**base["status"], "conditions": []}}
    assert node_update_events(base, heartbeat) == []
    assert [e.value for e in node_update_events(base, node("n", cpu="8"))] == ["NodeAllocatableChange"]
    assert [e.value for e in node_update_events(base, node("n", labels={"a": "b"}))] == ["NodeLabelChange"]
    assert [e.value for e in node_update_events(base, node("n", unschedulable=True))] == ["NodeTaintChange"]


def test_settings_can_turn_off_scheduled_events(api):
    """record_events=False binds without writing Scheduled events (FailedScheduling still is)."""
    sched = Scheduler(api, settings=SchedulerSettings(record_events=False))
    api.create(node("n"))
    api.create(pod("p"))
    sync(api, sched)
    sched.schedule_pending()
    assert placed_node(api, "p") == "n"
    assert api.list(api.resource("events"))[0] == []


def test_run_with_shared_informers(api):
    """Given an InformerFactory, the scheduler uses its shared nodes/pods informers, not a factory of its own."""
    from kctl.client.informer import InformerFactory

    api.create(node("n1"))
    api.create(pod("early", cpu="100m"))
    informers = InformerFactory(api)
    sched = Scheduler(api, informers=informers)
    stop = threading.Event()
    informers.start(stop)
    runner = threading.Thread(target=sched.run, args=(stop,))
    runner.start()
    try:
        api.create(pod("late", cpu="100m"))
        assert wait_for(lambda: placed_node(api, "early") == "n1" and placed_node(api, "late") == "n1")
        assert sched.informers is informers and not sched.owns_informers
        assert sorted(i.rt.plural for i in informers.informers()) == [
            "nodes", "persistentvolumeclaims", "persistentvolumes", "pods", "storageclasses"]
    finally:
        stop.set()
        runner.join(30)


def test_run_without_informers_starts_and_stops_its_own(api):
    """Without shared informers the scheduler makes its own nodes/pods informers (kctl.client.informer),
    starts them in run() and they end with it."""
    api.create(node("n1"))
    api.create(pod("early", cpu="100m"))
    sched = Scheduler(api)
    assert sched.owns_informers
    own = sched.informers.informers()
    assert sorted(i.rt.plural for i in own) == [
        "nodes", "persistentvolumeclaims", "persistentvolumes", "pods", "storageclasses"]
    assert not any(i.running for i in own)
    stop = threading.Event()
    runner = threading.Thread(target=sched.run, args=(stop,))
    runner.start()
    try:
        api.create(pod("late", cpu="100m"))
        assert wait_for(lambda: placed_node(api, "early") == "n1" and placed_node(api, "late") == "n1")
        assert all(i.running for i in own)
    finally:
        stop.set()
        runner.join(30)
    assert not runner.is_alive()
    assert wait_for(lambda: not any(i.running for i in own))


@pytest.mark.parametrize("full_every", [2, 3, 7, 1000], ids=["half-full", "third-full", "few-full", "none-full"])
def test_batched_filtering_looks_at_the_same_nodes(api, clock, monkeypatch, full_every):
    """Filtering in chunks (filter_nodes) finds the same feasible nodes, and stops at the same
    place, as trying nodes one by one until enough are found."""
    from kctl.scheduler.framework import CycleState, Diagnosis
    from kctl.scheduler.nodeinfo import PodInfo

    def found(batched: bool):
        sched = Scheduler(None, clock=clock)
        for i in range(300):
            sched.on_node_add(node(f"n{i:03d}", cpu="1"))
            if i % full_every == 0:
                sched.on_pod_add(pod(f"full{i}", cpu="1", node_name=f"n{i:03d}"))
        sched.cache.update_snapshot(sched.snapshot)
        fwk = sched.profiles["default-scheduler"]
        if not batched:
            monkeypatch.setattr(fwk, "batch_filters", lambda state: None)
        state, diagnosis = CycleState(), Diagnosis()
        pi = PodInfo(pod("p", cpu="500m"))
        fwk.run_pre_filter(state, pi, sched.snapshot)
        sched._next_start = 17
        nodes = sched._find_feasible(fwk, state, pi, sched.snapshot.node_info_list, diagnosis)
        return [n.name for n in nodes], sorted(diagnosis.node_to_status), sched._next_start

    batched, one_by_one = found(True), found(False)
    assert batched == one_by_one
    assert len(batched[0]) == 144  # 300 nodes: 48% looked for


def test_preemption_end_to_end(api, sched, clock):
    """A high-priority pod that fits nowhere evicts a lower-priority one, is nominated, and is
    bound once the victim is gone (the victim's deletion moves it back to activeQ)."""
    api.create(node("n", cpu="1"))
    for cls, value in (("low", 1), ("high", 1000)):  # the Priority admission plugin resolves classes
        api.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": cls},
                    "value": value})
    api.create(pod("low", cpu="1", priorityClassName="low", node_name="n"))
    api.create(pod("high", cpu="1", priorityClassName="high"))
    sync(api, sched)
    sched.schedule_pending()
    rt = api.resource("pods")
    victim = api.get(rt, "low", namespace="default")
    assert victim["metadata"].get("deletionTimestamp")  # evicted (its node agent finishes the job)
    assert api.get(rt, "high", namespace="default")["status"].get("nominatedNodeName") == "n"
    assert sched.queue.where("default/high") == "unschedulable"
    api.delete(rt, "low", namespace="default", grace_period=0)  # what the node agent does
    sched.on_pod_delete(victim)
    clock.advance(60)
    sched.schedule_pending()
    assert placed_node(api, "high") == "n"


def test_plugins_see_the_cycle_snapshot(api, sched):
    """Every profile's plugins read the scheduler's own snapshot (ImageLocality: the node that
    has the pod's image wins over an identical empty one)."""
    assert all(fwk.handle.snapshot is sched.snapshot for fwk in sched.profiles.values())
    with_image = node("with-image")
    with_image["status"]["images"] = [{"names": ["docker.io/library/busybox:latest", "busybox:latest"],
                                       "sizeBytes": 500 * 1024 * 1024}]
    api.create(node("without"))
    api.create(with_image)
    api.create(pod("p"))
    sync(api, sched)
    sched.schedule_pending()
    assert placed_node(api, "p") == "with-image"
