"""BindWorker.write_failure: the PodScheduled=False condition and FailedScheduling Event of an unschedulable pod.

The condition is a read-modify-write of the pod's status, retried on Conflict through
kctl.client.retry.retry_on_conflict (client-go's DefaultRetry attempts); a pod bound or
replaced meanwhile gets nothing, and a write that keeps conflicting is one warning, no
Event, no exception.
"""

from __future__ import annotations

import logging

import pytest
from scheduler_harness import node, pod

from kctl.client.retry import DEFAULT_ATTEMPTS
from kctl.machinery.errors import Conflict
from kctl.scheduler.binder import BindWorker, FailureJob

MESSAGE = "0/1 nodes are available: 1 Insufficient cpu."


@pytest.fixture
def worker(api):
    """A BindWorker over api whose thread is never started (write_failure is called directly)."""
    return BindWorker(api, on_done=lambda job, status: None)


def conflicting(api, monkeypatch, times: int) -> list[dict]:
    """Make the first `times` update_status calls on api raise Conflict; every call is recorded."""
    calls: list[dict] = []
    real = api.update_status

    def update_status(obj, *args, **kwargs):
        calls.append(obj)
        if len(calls) <= times:
            raise Conflict("the object has been modified; please apply your changes to the latest version")
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(api, "update_status", update_status)
    return calls


def scheduled_condition(api, name: str = "p") -> dict | None:
    got = api.get(api.resource("pods"), name, namespace="default")
    return next((c for c in (got.get("status") or {}).get("conditions") or () if c["type"] == "PodScheduled"), None)


def failed_events(api) -> list[dict]:
    items, _ = api.list(api.resource("events"), namespace="default")
    return [e for e in items if e.get("reason") == "FailedScheduling"]


@pytest.mark.parametrize("conflicts", [0, 1, DEFAULT_ATTEMPTS - 1], ids=["none", "one", "all-but-last"])
def test_failure_lands_after_conflicts(api, worker, monkeypatch, conflicts):
    """The condition is written on a fresh read after each Conflict, then one FailedScheduling Event."""
    created = api.create(pod("p", cpu="8"))
    calls = conflicting(api, monkeypatch, conflicts)
    worker.write_failure(FailureJob(created, "Unschedulable", MESSAGE))
    cond = scheduled_condition(api)
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", MESSAGE)
    assert len(calls) == conflicts + 1
    assert [e["message"] for e in failed_events(api)] == [MESSAGE]


def test_failure_that_keeps_conflicting_is_one_warning(api, worker, monkeypatch, caplog):
    """A condition write conflicting on every attempt gives up with a warning: no Event, nothing raised."""
    created = api.create(pod("p", cpu="8"))
    calls = conflicting(api, monkeypatch, DEFAULT_ATTEMPTS)
    with caplog.at_level(logging.WARNING, logger="kctl.scheduler.binder"):
        worker.write_failure(FailureJob(created, "Unschedulable", MESSAGE))
    assert len(calls) == DEFAULT_ATTEMPTS
    assert scheduled_condition(api) is None
    assert failed_events(api) == []
    assert [r.getMessage() for r in caplog.records] == [
        "cannot write the scheduling failure of default/p: it kept conflicting"]


@pytest.mark.parametrize("change", ["bound", "replaced", "deleted"])
def test_stale_failure_writes_nothing(api, worker, change):
    """A pod bound, replaced (another uid) or deleted since the scheduling loop saw it gets no condition or Event."""
    api.create(node("n1"))
    seen = api.create(pod("p", cpu="8"))
    if change == "bound":
        api.bind("default", "p", "n1")
    else:
        api.delete(api.resource("pods"), "p", namespace="default", grace_period=0)
        if change == "replaced":
            api.create(pod("p", cpu="8"))
    worker.write_failure(FailureJob(seen, "Unschedulable", MESSAGE))
    if change != "deleted":
        assert (scheduled_condition(api) or {}).get("status") != "False"  # binding sets True; a new pod none
    assert failed_events(api) == []


def test_same_failure_again_is_no_write_but_an_event(api, worker, monkeypatch):
    """The same reason and message again writes no status (the Event's count is bumped instead)."""
    created = api.create(pod("p", cpu="8"))
    worker.write_failure(FailureJob(created, "Unschedulable", MESSAGE))
    calls = conflicting(api, monkeypatch, 0)
    worker.write_failure(FailureJob(created, "Unschedulable", MESSAGE))
    assert calls == []
    assert [e.get("count") for e in failed_events(api)] == [2]
