"""Events live for a bounded time: the event TTL controller with a fake clock."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from lifecycle_harness import FakeClock, Queue, exists, running, wait_for

from kctl.client import events
from kctl.client.informer import InformerFactory
from kctl.controllers.base import ControllerContext, Recorder
from kctl.controllers.eventttl import EventTTLController, EventTTLSettings, last_seen

T0 = dt.datetime(2030, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


def stamp(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("event, expected", [
    ({"lastTimestamp": "2030-01-01T12:00:00Z", "firstTimestamp": "2030-01-01T11:00:00Z"}, T0),
    ({"firstTimestamp": "2030-01-01T12:00:00Z"}, T0),
    ({"eventTime": "2030-01-01T12:00:00.000000Z"}, T0),
    ({"series": {"lastObservedTime": "2030-01-01T12:00:00Z"}, "eventTime": "2029-01-01T00:00:00Z"}, T0),
    ({"metadata": {"creationTimestamp": "2030-01-01T12:00:00Z"}}, T0),
    ({}, None),
], ids=["last-timestamp", "first-timestamp", "event-time", "series", "creation", "none"])
def test_last_seen(event, expected):
    """An Event's last sighting is read as kubectl's LAST SEEN reads it."""
    assert last_seen(event) == expected



def make_event(api, name: str, *, first: dt.datetime, last: dt.datetime, count: int = 1) -> dict:
    return api.create({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
                       "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default", "uid": "u1"},
                       "reason": "Started", "message": name, "type": "Normal", "source": {"component": "test"},
                       "firstTimestamp": stamp(first), "lastTimestamp": stamp(last), "count": count})


@pytest.fixture
def ttl_controller(api):
    """An EventTTLController (TTL 1 h) over synced informers, with a fake clock at T0."""
    stop = threading.Event()
    clock = FakeClock(T0)
    informers = InformerFactory(api)
    ctx = ControllerContext(api=api, informers=informers, recorder=Recorder(api, component="test"), clock=clock)
    controller = EventTTLController(settings=EventTTLSettings(ttl_seconds=3600))
    controller.register(ctx, Queue())
    controller.events.start(stop)
    wait_for(controller.events.has_synced, what="events informer synced")
    yield controller
    stop.set()



def test_events_expire_after_ttl(api, ttl_controller):
    """An Event last seen more than the TTL ago is deleted; a fresher one waits for its turn."""
    make_event(api, "old.1", first=T0 - dt.timedelta(hours=3), last=T0 - dt.timedelta(hours=2))
    make_event(api, "fresh.1", first=T0 - dt.timedelta(minutes=10), last=T0 - dt.timedelta(minutes=10))
    make_event(api, "bumped.1", first=T0 - dt.timedelta(hours=5), last=T0 - dt.timedelta(minutes=1), count=7)
    wait_for(lambda: ttl_controller.events.get("default", "bumped.1"), what="events cached")
    assert ttl_controller.reconcile("default/old.1") is None
    assert not exists(api, "events", "old.1")
    wait_left = ttl_controller.reconcile("default/fresh.1")
    assert wait_left == pytest.approx(50 * 60)
    assert ttl_controller.reconcile("default/bumped.1") == pytest.approx(59 * 60)
    assert exists(api, "events", "fresh.1") and exists(api, "events", "bumped.1")
    ttl_controller.ctx.clock.advance(wait_left)
    assert ttl_controller.reconcile("default/fresh.1") is None
    assert not exists(api, "events", "fresh.1")
    assert exists(api, "events", "bumped.1"), "a recently repeated Event lives on"
    assert ttl_controller.reconcile("default/gone.1") is None, "not found is success"


def test_every_event_is_queued(api, ttl_controller):
    """Events present at start-up and recorded later are all queued for judgement."""
    make_event(api, "late.1", first=T0, last=T0)
    wait_for(lambda: "default/late.1" in ttl_controller.queue.keys, what="new event queued")


def test_running_manager_removes_expired_events(api):
    """With the manager running, an Event older than the TTL disappears and a recorded one stays."""
    now = dt.datetime.now(dt.timezone.utc)
    make_event(api, "ancient.1", first=now - dt.timedelta(hours=3), last=now - dt.timedelta(hours=2))
    pod = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                      "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    events.record(api, pod, type="Normal", reason="Scheduled", message="assigned", component="test")
    with running(api, [EventTTLController()]):
        wait_for(lambda: not exists(api, "events", "ancient.1"), what="expired event removed")
    kept, _ = api.list(api.resource("events"), namespace="default")
    assert [e["reason"] for e in kept] == ["Scheduled"]
