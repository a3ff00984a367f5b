"""Pod status helpers (kctl.client.pods) read readiness and availability as Kubernetes' podutils do."""

from __future__ import annotations

import datetime as dt

import pytest

from kctl.client.pods import pod_active, pod_available, pod_ready, pod_ready_since, pod_terminating, ready_condition

NOW = dt.datetime(2026, 12, 4, 12, 0, 0, tzinfo=dt.timezone.utc)


def _pod(ready: str | None = None, since: str = "2026-12-04T11:59:50Z", phase: str = "Running",
         deleting: bool = False) -> dict:
    conditions = [{"type": "PodScheduled", "status": "True"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready, "lastTransitionTime": since})
    meta: dict = {"name": "p"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-04T11:59:59Z"
    return {"metadata": meta, "status": {"phase": phase, "conditions": conditions}}


@pytest.mark.parametrize("pod, ready, has_condition", [
    (_pod("True"), True, True), (_pod("False"), False, True), (_pod(None), False, False),
    ({"metadata": {}}, False, False),
])
def test_ready(pod: dict, ready: bool, has_condition: bool) -> None:
    """Ready means a Ready condition with status True."""
    assert pod_ready(pod) is ready
    assert (ready_condition(pod) is not None) is has_condition


@pytest.mark.parametrize("min_ready, available", [(0, True), (5, True), (10, False), (30, False)])
def test_available_after_min_ready_seconds(min_ready: int, available: bool) -> None:
    """Available needs Ready for strictly more than minReadySeconds (10 s ready here)."""
    assert pod_available(_pod("True"), min_ready, NOW) is available


def test_not_ready_is_never_available() -> None:
    """A pod that is not Ready is not available, whatever minReadySeconds."""
    assert pod_available(_pod("False"), 0, NOW) is False
    assert pod_ready_since(_pod("False")) is None
    assert pod_ready_since(_pod("True")) == dt.datetime(2026, 12, 4, 11, 59, 50, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("pod, active, terminating", [
    (_pod("True"), True, False), (_pod(phase="Succeeded"), False, False), (_pod(phase="Failed"), False, False),
    (_pod("True", deleting=True), False, True),
])
def test_active_and_terminating(pod: dict, active: bool, terminating: bool) -> None:
    """Finished or deleted pods are not active; a deletionTimestamp means terminating."""
    assert pod_active(pod) is active
    assert pod_terminating(pod) is terminating
