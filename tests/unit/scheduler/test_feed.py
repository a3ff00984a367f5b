"""The scheduler's own feed (kctl.scheduler.feed.StoreFeed) follows the API's watch, not the store.

What is verified: after its list, every Pod and Node change reaches the handlers in order
(add, update with the old object, delete), and a custom kind that is also called `Pod`
in another group does not.
"""

from __future__ import annotations

import threading
import time

import pytest

from kctl.apiserver.server import APIServer
from kctl.store.sqlite import Store
from kctl.scheduler.feed import Handlers, StoreFeed

WAIT = 30.0  # seconds the feed may take to deliver on a loaded machine

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "pods.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "pods", "singular": "pod", "kind": "Pod"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def _pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


class Recorder:
    """Handlers that note each call as (kind, what, name[, old resourceVersion])."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.lock = threading.Lock()

    def handlers(self, kind: str) -> Handlers:
        def note(*entry) -> None:
            with self.lock:
                self.calls.append(entry)

        return Handlers(on_add=lambda o: note(kind, "add", o["metadata"]["name"]),
                        on_update=lambda old, new: note(kind, "update", new["metadata"]["name"],
                                                        old["metadata"]["resourceVersion"]),
                        on_delete=lambda o: note(kind, "delete", o["metadata"]["name"]))

    def wait_for(self, entry: tuple) -> None:
        """Return once entry was noted; fail after WAIT seconds."""
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            with self.lock:
                if entry in self.calls:
                    return
            time.sleep(0.01)
        raise AssertionError(f"{entry} never arrived; calls: {self.calls}")


@pytest.fixture
def api(tmp_path):
    """An APIServer over a fresh store (closed afterwards)."""
    server = APIServer(Store(tmp_path / "kctl.db"), user="tester", audit_log=None)
    yield server
    server.close()


@pytest.fixture
def feed(api):
    """A StoreFeed for Nodes and Pods running on a thread (stopped afterwards) and its recorder."""
    recorder = Recorder()
    feed = StoreFeed(api, {"Node": recorder.handlers("Node"), "Pod": recorder.handlers("Pod")})
    stop = threading.Event()
    thread = threading.Thread(target=feed.run, args=(stop,), daemon=True)
    thread.start()
    assert feed.synced.wait(WAIT)
    yield feed, recorder
    stop.set()
    thread.join(WAIT)


def test_changes_reach_the_handlers_in_order(api, feed):
    """add, update (with the previous object) and delete of a Pod and a Node arrive as they happen."""
    _, recorder = feed
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    created = api.create(_pod("p"))
    api.update_status({**created, "status": {"phase": "Pending"}})
    api.delete(api.resource("pods"), "p", namespace="default", grace_period=0)
    recorder.wait_for(("Pod", "delete", "p"))
    assert [c for c in recorder.calls if c[0] == "Pod"] == [
        ("Pod", "add", "p"), ("Pod", "update", "p", created["metadata"]["resourceVersion"]), ("Pod", "delete", "p")]
    assert ("Node", "add", "n1") in recorder.calls


def test_a_custom_kind_named_pod_is_not_a_pod(api, feed):
    """Pod.example.com objects do not reach the Pod handlers (the kind is matched with its group)."""
    _, recorder = feed
    api.create(CRD)
    api.create({"apiVersion": "example.com/v1", "kind": "Pod",
                "metadata": {"name": "impostor", "namespace": "default"}})
    api.create(_pod("real"))
    recorder.wait_for(("Pod", "add", "real"))
    assert ("Pod", "add", "impostor") not in recorder.calls

