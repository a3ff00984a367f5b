"""The controller manager's re-queue back-off: client-go's DefaultControllerRateLimiter start (5 ms, doubling)."""

from __future__ import annotations

import threading

import pytest

from kctl.controllers.manager import CONTROLLER_BACKOFF, ControllerManager
from kctl.machinery.errors import Conflict


class ConflictOnce:
    """A controller whose first reconcile of each key meets a Conflict (another writer was first)."""

    name = "conflicting"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.retried = threading.Event()

    def register(self, ctx, queue) -> None:
        queue.add("default/web")

    def reconcile(self, key: str) -> float | None:
        self.calls.append(key)
        if len(self.calls) == 1:
            raise Conflict("the object has been modified")
        self.retried.set()
        return None


@pytest.mark.parametrize("failures, delay", [(0, 0.005), (1, 0.01), (3, 0.04), (20, 60.0)],
                         ids=["first", "second", "fourth", "capped"])
def test_backoff_is_client_go_default(failures, delay):
    """5 ms doubling per failure (client-go's ItemExponentialFailureRateLimiter), capped at 60 s."""
    assert CONTROLLER_BACKOFF.delay(failures) == pytest.approx(delay)


def test_conflict_is_retried_with_the_controller_backoff(api):
    """A reconcile that met a Conflict runs again, its queue using the controller back-off."""
    controller = ConflictOnce()
    stop = threading.Event()
    manager = ControllerManager(api, [controller], leader_election=False, workers=1)
    manager.start(stop)
    try:
        assert manager.wait_until_running(30)
        assert manager.queue("conflicting").backoff == CONTROLLER_BACKOFF
        assert controller.retried.wait(30), "the key was not retried"
        assert controller.calls == ["default/web", "default/web"]
    finally:
        stop.set()
        manager.stop()
