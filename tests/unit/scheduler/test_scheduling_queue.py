"""The scheduling queue: priority order, back-off, moves on cluster events, timeouts, gates."""

from __future__ import annotations

import threading

import pytest
from scheduler_harness import FakeClock, pod

from kctl.scheduler.framework import ClusterEvent
from kctl.scheduler.nodeinfo import PodInfo
from kctl.scheduler.queue import QueueSettings, SchedulingQueue


def events_of(qpi, plugin: str) -> frozenset:
    """NodeResourcesFit waits for room; TaintToleration for taint changes (as the plugins register)."""
    return {"NodeResourcesFit": frozenset({ClusterEvent.NODE_ADD, ClusterEvent.ASSIGNED_POD_DELETE}),
            "TaintToleration": frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_TAINT_CHANGE})}[plugin]


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def queue(clock):
    q = SchedulingQueue(clock=clock, events_of=events_of)
    yield q
    q.close()


def pop_all(q: SchedulingQueue) -> list[str]:
    out = []
    while (qpi := q.pop(timeout=0)) is not None:
        out.append(qpi.pod_info.name)
    return out


def fail(q: SchedulingQueue, name: str, *, plugins: set[str], unschedulable: bool = True) -> str | None:
    """Pop `name` and report it unschedulable (rejected by `plugins`); where it went."""
    qpi = q.pop(timeout=0)
    assert qpi is not None and qpi.pod_info.name == name
    qpi.unschedulable_plugins = plugins
    return q.add_unschedulable_if_not_present(qpi, unschedulable=unschedulable)


@pytest.mark.parametrize("pods, expected", [
    ([("a", None), ("b", None), ("c", None)], ["a", "b", "c"]),
    ([("low", 0), ("high", 100), ("mid", 10)], ["high", "mid", "low"]),
    ([("a", 5), ("b", 7), ("c", 5), ("d", 7)], ["b", "d", "a", "c"]),
    ([("neg", -10), ("none", None)], ["none", "neg"]),
], ids=["fifo", "by-priority", "priority-then-time", "negative-priority"])
def test_active_order(queue, clock, pods, expected):
    """activeQ pops the highest spec.priority first, then the earliest queued."""
    for name, priority in pods:
        queue.add(PodInfo(pod(name, priority=priority)))
        clock.advance(0.001)
    assert pop_all(queue) == expected


@pytest.mark.parametrize("settings, attempts, expected", [
    (QueueSettings(), 1, 1.0),
    (QueueSettings(), 2, 2.0),
    (QueueSettings(), 3, 4.0),
    (QueueSettings(), 4, 8.0),
    (QueueSettings(), 5, 10.0),
    (QueueSettings(), 9, 10.0),
    (QueueSettings(initial_backoff=0.5, max_backoff=3), 3, 2.0),
    (QueueSettings(initial_backoff=0.5, max_backoff=3), 4, 3.0),
], ids=["1st", "2nd", "3rd", "4th", "capped", "long-capped", "custom", "custom-capped"])
def test_backoff_duration(clock, settings, attempts, expected):
    """Back-off is initial x 2^(attempts-1), at most the maximum (1 s doubling to 10 s by default)."""
    q = SchedulingQueue(settings=settings, clock=clock)
    q.add(PodInfo(pod("p")))
    qpi = q.pop(timeout=0)
    qpi.attempts = attempts
    assert q.backoff_duration(qpi) == expected


def test_error_backs_off_then_returns(queue, clock):
    """A pod that failed for another reason waits its back-off in backoffQ, then pops again."""
    queue.add(PodInfo(pod("p")))
    assert fail(queue, "p", plugins=set(), unschedulable=False) == "backoff"
    assert queue.pop(timeout=0) is None
    clock.advance(0.9)
    assert queue.pop(timeout=0) is None
    clock.advance(0.2)
    assert pop_all(queue) == ["p"]


def test_unschedulable_waits_for_an_event_it_cares_about(queue, clock):
    """An unschedulable pod is not retried by time; a relevant event moves it, an irrelevant one does not."""
    queue.add(PodInfo(pod("p")))
    assert fail(queue, "p", plugins={"NodeResourcesFit"}) == "unschedulable"
    clock.advance(30)
    assert queue.pop(timeout=0) is None
    assert queue.move_all_on_event(ClusterEvent.NODE_TAINT_CHANGE) == 0
    assert queue.where("default/p") == "unschedulable"
    assert queue.move_all_on_event(ClusterEvent.ASSIGNED_POD_DELETE) == 1
    assert pop_all(queue) == ["p"]


def test_event_during_backoff_moves_to_backoffq(queue, clock):
    """A pod moved by an event before its back-off ended waits the rest of it in backoffQ."""
    queue.add(PodInfo(pod("p")))
    fail(queue, "p", plugins={"TaintToleration"})
    clock.advance(0.5)
    queue.move_all_on_event(ClusterEvent.NODE_ADD)
    assert queue.where("default/p") == "backoff"
    clock.advance(0.6)
    assert pop_all(queue) == ["p"]


def test_event_while_in_flight_means_backoff_not_unschedulable(queue, clock):
    """A cluster event during the pod's attempt sends it to backoffQ: it is not parked waiting for one."""
    queue.add(PodInfo(pod("p")))
    qpi = queue.pop(timeout=0)
    queue.move_all_on_event(ClusterEvent.NODE_ADD)  # e.g. a node added while the pod was being tried
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert queue.add_unschedulable_if_not_present(qpi, unschedulable=True) == "backoff"


def test_unschedulable_timeout_retries(queue, clock):
    """A pod unschedulable for 5 minutes is retried without any event."""
    queue.add(PodInfo(pod("p")))
    fail(queue, "p", plugins={"NodeResourcesFit"})
    clock.advance(299)
    assert queue.pop(timeout=0) is None
    clock.advance(2)
    assert pop_all(queue) == ["p"]


@pytest.mark.parametrize("change, moved", [
    ({"status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}}, False),
    ({"metadata": {"resourceVersion": "99"}}, False),
    ({"metadata": {"labels": {"tier": "web"}}}, True),
    ({"spec": {"nodeSelector": {"disk": "ssd"}}}, True),
], ids=["status-only", "resource-version", "labels", "spec"])
def test_update_of_unschedulable_pod(queue, clock, change, moved):
    """An update retries an unschedulable pod only if it changed more than status and bookkeeping."""
    obj = pod("p")
    queue.add(PodInfo(obj))
    fail(queue, "p", plugins={"NodeResourcesFit"})
    clock.advance(20)
    new = {**obj, **{k: {**obj.get(k, {}), **v} for k, v in change.items()}}
    queue.update(PodInfo(new))
    assert queue.where("default/p") == ("active" if moved else "unschedulable")


def test_delete_removes_and_drops_in_flight(queue):
    """A deleted pod leaves the queue; one deleted while being tried is not put back."""
    queue.add(PodInfo(pod("a")))
    queue.add(PodInfo(pod("b")))
    queue.delete("default/a")
    qpi = queue.pop(timeout=0)
    assert qpi.pod_info.name == "b"
    queue.delete("default/b")
    assert queue.add_unschedulable_if_not_present(qpi, unschedulable=True) is None
    assert queue.lengths() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0, "in_flight": 0}


def test_update_while_in_flight_is_retried_with_new_spec(queue):
    """A pod changed during its attempt goes back with its new spec, at once."""
    queue.add(PodInfo(pod("p")))
    qpi = queue.pop(timeout=0)
    queue.update(PodInfo(pod("p", labels={"new": "yes"})))
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert queue.add_unschedulable_if_not_present(qpi, unschedulable=True) in ("active", "backoff")
    assert qpi.pod_info.labels == {"new": "yes"}


def test_scheduling_gates_hold_the_pod(queue):
    """A pod with schedulingGates is not handed out until an update removes them."""
    gated = pod("p", schedulingGates=[{"name": "example.com/wait"}])
    queue.add(PodInfo(gated))
    assert queue.pop(timeout=0) is None and queue.where("default/p") == "gated"
    queue.update(PodInfo(pod("p")))
    assert pop_all(queue) == ["p"]


def test_pop_sleeps_until_a_pod_arrives():
    """pop blocks on a condition (no polling loop needed by the caller) and wakes on add."""
    q = SchedulingQueue()
    got = []
    t = threading.Thread(target=lambda: got.append(q.pop(timeout=30)))
    t.start()
    q.add(PodInfo(pod("p")))
    t.join(30)
    assert got and got[0].pod_info.name == "p"
    q.close()


def test_close_wakes_pop():
    """Closing the queue makes a waiting pop return None."""
    q = SchedulingQueue()
    got = []
    t = threading.Thread(target=lambda: got.append(q.pop()))
    t.start()
    q.close()
    t.join(30)
    assert got == [None]
