"""Deferred Events: recorded when the pass ends, or when the manager stops while the pass still runs."""

from __future__ import annotations

import threading

from lifecycle_harness import wait_for
from toy_controller import configmap

from kctl.controllers.base import DeferredEvents, key_of
from kctl.controllers.manager import ControllerManager


class SlowPass:
    """Defers an Event about each ConfigMap, then blocks until released (a pass that outlives a stop)."""

    name = "slowpass"

    def __init__(self) -> None:
        self.events = DeferredEvents()
        self.inside = threading.Event()
        self.release = threading.Event()

    def register(self, ctx, queue) -> None:
        self.events.recorder = ctx.recorder
        self.configmaps = ctx.informers.informer("configmaps")
        self.configmaps.add_handler(lambda o: queue.add(key_of(o)), None, None)

    def reconcile(self, key: str) -> None:
        cm = self.configmaps.get(*key.split("/"))
        with self.events.deferred():
            self.events.add(cm, "Normal", "Made", f"made {key}")
            self.inside.set()
            self.release.wait(30)
        return None


def made_events(api) -> list[dict]:
    return [e for e in api.list(api.resource("events"), namespace="default")[0] if e["reason"] == "Made"]


def test_deferred_events_recorded_when_the_pass_ends(api):
    """Within a pass Events wait; they are recorded once when it ends; outside one, at once."""
    events = DeferredEvents()
    recorded: list[str] = []
    events.recorder = type("R", (), {"event": lambda self, obj, t, r, m: recorded.append(m)})()
    with events.deferred():
        events.add({}, "Normal", "A", "first")
        assert recorded == []
    assert recorded == ["first"]
    events.add({}, "Normal", "B", "now")
    assert recorded == ["first", "now"]
    assert events.flush() == 0


def test_stop_records_events_of_a_pass_still_running(api):
    """A manager stopped while a pass is stuck records that pass's deferred Events (once)."""
    slow = SlowPass()
    stop = threading.Event()
    manager = ControllerManager(api, [slow], leader_election=False, join_seconds=0.5)
    manager.start(stop)
    try:
        api.create(configmap("a"))
        assert slow.inside.wait(30), "the pass started"
        assert made_events(api) == []
        stop.set()
        manager.stop()
        assert [e["message"] for e in made_events(api)] == ["made default/a"], "flushed by the stop"
    finally:
        slow.release.set()
        stop.set()
        manager.stop()
    wait_for(lambda: not slow.events._running, what="the pass ended")
    assert len(made_events(api)) == 1 and made_events(api)[0].get("count", 1) == 1, "not recorded twice"
