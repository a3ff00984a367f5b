"""Bumping a repeated Event while others write it: a Conflict re-reads and bumps again (retry_on_conflict).

events.record bumps the count of the Event this process recorded before; the bump is a
read-modify-write retried on Conflict up to events.UPDATE_ATTEMPTS times, then given up
with one warning (never raised). An Event deleted meanwhile is recorded anew.
"""

from __future__ import annotations

import logging

import pytest

from kctl.client import events
from kctl.machinery.errors import Conflict

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
def pod(api):
    return api.create(POD)


def record(api, pod) -> None:
    events.record(api, pod, type="Warning", reason="BackOff", message="restarting", component="kubelet", host="n1")


def stored_events(api) -> list[dict]:
    return api.list(api.resource("events"), namespace="default")[0]


def before_each_update(api, monkeypatch, action) -> list[dict]:
    """Run action(obj) before every api.update (then the real update); the updated objects are returned."""
    calls: list[dict] = []
    real = api.update

    def update(obj, *args, **kwargs):
        calls.append(obj)
        action(obj)
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(api, "update", update)
    return calls


def test_conflicting_bump_is_read_again(api, pod, monkeypatch):
    """Someone else bumps the Event between our read and write: ours lands on top of theirs."""
    record(api, pod)
    [event] = stored_events(api)

    def someone_else_bumps(obj: dict) -> None:
        if len(calls) == 1:
            theirs = api.get(api.resource("events"), obj["metadata"]["name"], namespace="default")
            theirs["count"] = 5
            real_update(theirs)

    real_update = api.update
    calls = before_each_update(api, monkeypatch, someone_else_bumps)
    record(api, pod)
    monkeypatch.undo()
    assert [e["count"] for e in stored_events(api)] == [6]
    assert len(calls) == 2


def test_bump_that_keeps_conflicting_gives_up_with_a_warning(api, pod, monkeypatch, caplog):
    """A bump conflicting on every attempt gives up after UPDATE_ATTEMPTS with one warning; nothing raised."""
    record(api, pod)

    def conflict(obj: dict) -> None:
        raise Conflict("the object has been modified")

    calls = before_each_update(api, monkeypatch, conflict)
    with caplog.at_level(logging.WARNING, logger="kctl.events"):
        record(api, pod)
    assert len(calls) == events.UPDATE_ATTEMPTS
    assert [e["count"] for e in stored_events(api)] == [1]
    assert [r.getMessage() for r in caplog.records] == [
        f"event BackOff for default/web: gave up after {events.UPDATE_ATTEMPTS} conflicting updates"]


def test_event_deleted_before_the_bump_is_recorded_anew(api, pod, monkeypatch):
    """The Event deleted (its TTL passed) between our read and our bump: a new Event with count 1."""
    record(api, pod)

    def delete(obj: dict) -> None:
        api.delete(api.resource("events"), obj["metadata"]["name"], namespace="default")

    calls = before_each_update(api, monkeypatch, delete)
    record(api, pod)
    monkeypatch.undo()
    assert [e["count"] for e in stored_events(api)] == [1]
    assert len(calls) == 1
    record(api, pod)  # and the new one is the one bumped next
    assert [e["count"] for e in stored_events(api)] == [2]
