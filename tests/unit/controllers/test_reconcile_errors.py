"""What follows a failed reconcile (kctl.controllers.base.handle_reconcile_error): temporary vs permanent."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from lifecycle_harness import wait_for
from toy_controller import ToyController, configmap

from kctl.client.errors import PermanentError, TemporaryError
from kctl.controllers.base import ControllerSettings, handle_reconcile_error
from kctl.controllers.manager import ControllerManager
from kctl.machinery.errors import Conflict, Forbidden, Invalid, NotFound

SETTINGS = ControllerSettings(permanent_error_retry_seconds=300.0)


class RecordingQueue:
    """Records what the error handling asks of the work queue."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def num_requeues(self, key: str) -> int:
        return 0

    def add_rate_limited(self, key: str) -> None:
        self.calls.append(("add_rate_limited", key))

    def add_after(self, key: str, delay: float) -> None:
        self.calls.append(("add_after", key, delay))

    def forget(self, key: str) -> None:
        self.calls.append(("forget", key))


class Owner:
    """A controller that can say which object a key names (or fails to)."""

    name = "toy"

    def __init__(self, obj: dict | None, *, lookup_fails: bool = False) -> None:
        self.obj, self.lookup_fails = obj, lookup_fails

    def register(self, ctx, queue) -> None: ...

    def reconcile(self, key: str) -> float | None: ...

    def object_for(self, key: str) -> dict | None:
        if self.lookup_fails:
            raise RuntimeError("cache gone")
        return self.obj


class Anonymous:
    """A controller without object_for."""

    name = "anon"

    def register(self, ctx, queue) -> None: ...

    def reconcile(self, key: str) -> float | None: ...


def warnings_about(api, name: str) -> list[dict]:
    events, _ = api.list(api.resource("events"), namespace="default")
    return [e for e in events if e.get("type") == "Warning" and e["involvedObject"]["name"] == name]


@pytest.mark.parametrize("exc, calls", [
    (Conflict("the object has been modified"), [("add_rate_limited", "default/cm")]),
    (RuntimeError("a bug"), [("add_rate_limited", "default/cm")]),
    (OSError("connection reset"), [("add_rate_limited", "default/cm")]),
    (TemporaryError("not yet", delay=7.0), [("add_after", "default/cm", 7.0)]),
], ids=["conflict", "unrecognised", "os-error", "temporary-with-delay"])
def test_temporary_error_requeues_rate_limited(api, exc, calls):
    """A temporary error re-queues the key after its back-off (or its own delay) and records no Event."""
    cm = api.create(configmap("cm"))
    queue = RecordingQueue()
    assert handle_reconcile_error(Owner(cm), queue, "default/cm", exc, api=api, settings=SETTINGS) is True
    assert queue.calls == calls
    assert warnings_about(api, "cm") == []


@pytest.mark.parametrize("exc, reason", [
    (Invalid('deployments.apps "cm"', "status.replicas: Invalid value"), "FailedSync"),
    (Forbidden("namespace default is terminating"), "FailedSync"),
    (NotFound("configmaps", "other", "default"), "FailedSync"),
    (PermanentError("selector matches nothing", reason="InvalidSelector"), "InvalidSelector"),
], ids=["invalid", "forbidden", "not-found", "permanent-error"])
def test_permanent_error_records_a_warning_and_waits_long(api, exc, reason):
    """A permanent error: a Warning Event on the object, back-off forgotten, next look only after the long wait."""
    cm = api.create(configmap("cm"))
    queue = RecordingQueue()
    assert handle_reconcile_error(Owner(cm), queue, "default/cm", exc, api=api, settings=SETTINGS) is False
    assert queue.calls == [("forget", "default/cm"), ("add_after", "default/cm", 300.0)]
    [event] = warnings_about(api, "cm")
    assert event["reason"] == reason and event["message"] == " ".join(str(exc).split())
    assert event["source"]["component"] == "toy-controller"


def test_permanent_error_names_its_own_object(api):
    """A PermanentError carrying an object gets the Event on that object, not the controller's."""
    cm, other = api.create(configmap("cm")), api.create(configmap("other"))
    exc = PermanentError("the other one is broken", obj=other)
    handle_reconcile_error(Owner(cm), RecordingQueue(), "default/cm", exc, api=api, settings=SETTINGS)
    assert warnings_about(api, "cm") == [] and len(warnings_about(api, "other")) == 1


@pytest.mark.parametrize("controller", [Anonymous(), Owner(None), Owner({"x": 1}, lookup_fails=True)],
                         ids=["no-object-for", "object-gone", "lookup-fails"])
def test_permanent_error_without_an_object_only_logs(api, controller, caplog):
    """With no object to record on, a permanent error is logged in one line and still not retried hot."""
    queue = RecordingQueue()
    with caplog.at_level(logging.WARNING, logger="kctl.controllers"):
        handle_reconcile_error(controller, queue, "default/cm", Invalid("x", "bad\nvalue"), api=api,
                               settings=SETTINGS)
    assert queue.calls == [("forget", "default/cm"), ("add_after", "default/cm", 300.0)]
    events, _ = api.list(api.resource("events"), namespace="default")
    assert events == []
    lines = [r.getMessage() for r in caplog.records if "default/cm" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0] and "not retried for 300 s" in lines[0]


class Refused(ToyController):
    """A toy controller whose reconcile of "broken" always fails with Invalid; it can name its objects."""

    def reconcile(self, key: str) -> float | None:
        if key.endswith("/broken"):
            with self._lock:
                self.calls.append(key)
            raise Invalid('configmaps "broken"', "data.want: must be a number")
        return super().reconcile(key)

    def object_for(self, key: str) -> dict | None:
        namespace, _, name = key.rpartition("/")
        return self.configmaps.get(namespace, name)


def test_manager_does_not_retry_a_permanent_error_hot(api):
    """Through the manager: a permanent failure is recorded as a Warning Event and waits; others go on."""
    toy = Refused(tag="m")
    stop = threading.Event()
    manager = ControllerManager(api, [toy], leader_election=False)
    manager.start(stop)
    try:
        api.create(configmap("broken"))
        wait_for(lambda: warnings_about(api, "broken"), what="the Warning Event on the ConfigMap")
        [event] = warnings_about(api, "broken")
        assert event["reason"] == "FailedSync" and "must be a number" in event["message"]
        queue = manager.queue("toy")
        wait_for(lambda: queue.delayed() == 1, what="the key waiting for its long retry")
        time.sleep(1.0)  # a hot retry (50 ms, 100 ms, ...) would have run several times by now
        assert toy.calls.count("default/broken") == 1 and queue.num_requeues("default/broken") == 0
    finally:
        stop.set()
        manager.stop()
