"""events.record_all: a controller pass's Events, the new ones created in one transaction."""

from __future__ import annotations

import logging

import pytest

from kctl.client import events
from kctl.machinery.errors import APIError

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


class CountingAPI:
    """The real API, with every write_all and create call noted."""

    def __init__(self, api) -> None:
        self._api = api
        self.write_alls: list[list[str]] = []
        self.creates = 0

    def __getattr__(self, name: str):
        return getattr(self._api, name)

    def write_all(self, ops, **kwargs):
        self.write_alls.append([op for op, _ in ops])
        return self._api.write_all(ops, **kwargs)

    def create(self, obj, **kwargs):
        self.creates += 1
        return self._api.create(obj, **kwargs)


def request(pod: dict, message: str, reason: str = "Created") -> events.EventRequest:
    return events.EventRequest(pod, "Normal", reason, message, "replicaset-controller")


def stored(api) -> list[dict]:
    return sorted(api.list(api.resource("events"), namespace="default")[0], key=lambda e: e["message"])


def test_new_events_in_one_write(api):
    """Five different Events are created by one write_all, none one at a time; each has count 1."""
    pod = api.create(POD)
    spy = CountingAPI(api)
    events.record_all(spy, [request(pod, f"pod {i}") for i in range(5)])
    assert spy.write_alls == [["create"] * 5] and spy.creates == 0
    assert [(e["message"], e["count"], e["involvedObject"]["uid"]) for e in stored(api)] == \
        [(f"pod {i}", 1, pod["metadata"]["uid"]) for i in range(5)]


@pytest.mark.parametrize("first, batch, counts", [
    ([], ["a", "a", "b"], {"a": 2, "b": 1}),
    (["a"], ["a", "b"], {"a": 2, "b": 1}),
    (["a"], ["a", "a"], {"a": 3}),
], ids=["repeat-in-batch", "seen-before-is-bumped", "seen-before-repeated"])
def test_repeats_count_as_one_event(api, first, batch, counts):
    """A repeated Event is stored once with its count, as one-at-a-time recording would leave it."""
    pod = api.create(POD)
    for message in first:
        events.record(api, pod, type="Normal", reason="Created", message=message, component="replicaset-controller")
    events.record_all(api, [request(pod, m) for m in batch])
    assert {e["message"]: e["count"] for e in stored(api)} == counts


def test_never_raises(api, caplog):
    """A failing API is logged, not raised: an Event is best effort."""
    pod = api.create(POD)

    class Broken(CountingAPI):
        def write_all(self, ops, **kwargs):
            raise APIError("store is busy")

    with caplog.at_level(logging.WARNING, logger="kctl.events"):
        events.record_all(Broken(api), [request(pod, "x"), request(pod, "y")])
    assert stored(api) == [] and "store is busy" in caplog.text
