"""The controller manager: register, sync, workers reconcile keys, retries with back-off, stop."""

from __future__ import annotations

import logging
import threading

from lifecycle_harness import wait_for
from toy_controller import ToyController, configmap, seen

from kctl.controllers.manager import ControllerManager


def test_runs_toy_controller(api):
    """Objects that exist before start and those created later are reconciled."""
    api.create(configmap("before", "a"))
    toy = ToyController(tag="m")
    stop = threading.Event()
    manager = ControllerManager(api, [toy])
    manager.start(stop)
    try:
        assert manager.wait_until_running(30)
        wait_for(lambda: seen(api, "before") == "m:a", what="the existing ConfigMap reconciled")
        api.create(configmap("after", "b"))
        wait_for(lambda: seen(api, "after") == "m:b", what="the new ConfigMap reconciled")
        assert manager.is_leader and toy.registered == 1
        assert manager.queue("toy") is not None and manager.informers is not None
    finally:
        stop.set()
        manager.stop()
    assert not manager.is_leader


def test_failed_reconcile_is_retried_and_logged(api, caplog):
    """An exception re-queues the key rate-limited, logged in one line naming it; success forgets."""
    toy = ToyController(tag="m", failures=3)
    stop = threading.Event()
    manager = ControllerManager(api, [toy], leader_election=False)
    with caplog.at_level(logging.WARNING, logger="kctl.controllers.manager"):
        manager.start(stop)
        try:
            api.create(configmap("flaky", "x"))
            wait_for(lambda: seen(api, "flaky") == "m:x", what="reconciled after the failures")
            assert toy.calls.count("default/flaky") >= 4
            assert manager.queue("toy").num_requeues("default/flaky") == 0
        finally:
            stop.set()
            manager.stop()
    lines = [r.getMessage() for r in caplog.records if "default/flaky" in r.getMessage()]
    assert len(lines) == 3 and all("\n" not in line and "flaky failure" in line for line in lines)


def test_requeue_after_returned_delay(api):
    """A returned number of seconds runs the key again after that delay."""

    class Again(ToyController):
        def reconcile(self, key: str) -> float | None:
            super().reconcile(key)
            return 0.01 if len(self.calls) < 3 else None

    toy = Again()
    stop = threading.Event()
    manager = ControllerManager(api, [toy], leader_election=False)
    manager.start(stop)
    try:
        api.create(configmap("again"))
        wait_for(lambda: len(toy.calls) >= 3, what="three reconciles of one key")
    finally:
        stop.set()
        manager.stop()


def test_stop_event_stops_workers(api):
    """Setting the stop event alone ends the term (queues shut down) and releases the lease."""
    stop = threading.Event()
    manager = ControllerManager(api, [ToyController()])
    manager.start(stop)
    assert manager.wait_until_running(30)
    queue = manager.queue("toy")
    stop.set()
    wait_for(lambda: not manager.is_leader, what="the term ends")
    assert queue.shutting_down
    manager.stop()
    lease = api.get(api.resource("leases"), "kctl-controller-manager", namespace="kube-system")
    assert lease["spec"]["holderIdentity"] == ""


def test_duplicate_controller_names_rejected(api):
    """Two controllers with one name would share a queue: refused."""
    try:
        ControllerManager(api, [ToyController(), ToyController()])
    except ValueError as exc:
        assert "unique" in str(exc)
    else:
        raise AssertionError("duplicate names accepted")
