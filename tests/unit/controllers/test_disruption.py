"""The disruption controller (kctl.controllers.disruption) computes a PodDisruptionBudget's status as Kubernetes'
does: expected pods from the owners' scale, healthy pods, disruptedPods and their expiry, the condition, failSafe."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from lifecycle_harness import FakeClock, running, wait_for

from kctl.controllers.disruption import DisruptionController, SyncFailed
from kctl.machinery.times import format_time

NOW = dt.datetime(2026, 12, 4, 12, 0, 0, tzinfo=dt.timezone.utc)


class _Informer:
    """A cache of fixed objects: get by (namespace, name), list by namespace."""

    def __init__(self, objects: list[dict]) -> None:
        self.objects = objects

    def get(self, namespace: str | None, name: str) -> dict | None:
        return next((o for o in self.objects if o["metadata"]["name"] == name
                     and o["metadata"].get("namespace", "") == (namespace or "")), None)

    def list(self, namespace: str | None = None) -> list[dict]:
        return [o for o in self.objects if namespace is None or o["metadata"].get("namespace") == namespace]


class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: dict, type_: str, reason: str, message: str) -> None:
        self.events.append((obj["metadata"]["name"], type_, reason))


def _owner(kind: str, name: str, uid: str, api_version: str = "apps/v1") -> list[dict]:
    return [{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True}]


def _pod(name: str, *, ready: bool = True, owner: list[dict] | None = None, deleting: bool = False,
         labels: dict | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "default", "labels": labels or {"app": "web"}}
    if owner:
        meta["ownerReferences"] = owner
    if deleting:
        meta["deletionTimestamp"] = format_time(NOW)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def _workload(kind: str, name: str, uid: str, replicas: int, owner: list[dict] | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "default", "uid": uid}
    if owner:
        meta["ownerReferences"] = owner
    return {"kind": kind, "metadata": meta, "spec": {"replicas": replicas}}


DEPLOY = _workload("Deployment", "web", "d-uid", 4)
DEPLOY_RS = _workload("ReplicaSet", "web-1", "rs-uid", 4, _owner("Deployment", "web", "d-uid"))
LONE_RS = _workload("ReplicaSet", "lone", "lone-uid", 5)
STS = _workload("StatefulSet", "db", "s-uid", 3)
BY_DEPLOY = _owner("ReplicaSet", "web-1", "rs-uid")
BY_LONE_RS = _owner("ReplicaSet", "lone", "lone-uid")
BY_STS = _owner("StatefulSet", "db", "s-uid")


def _controller(api, pdb_spec: dict, pods: list[dict], *, status: dict | None = None):
    """A DisruptionController over fake caches holding the stored budget `web` and these pods."""
    pdb = api.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
                      "spec": {"selector": {"matchLabels": {"app": "web"}}, **pdb_spec}})
    if status is not None:
        pdb = api.update_status({**pdb, "status": status})
    c = DisruptionController()
    c.api, c.queue = api, None
    c.ctx = SimpleNamespace(recorder=_Recorder(), clock=FakeClock(NOW))
    c.budgets, c.pods = _Informer([pdb]), _Informer(pods)
    c.replicasets, c.deployments, c.statefulsets = _Informer([DEPLOY_RS, LONE_RS]), _Informer([DEPLOY]), \
        _Informer([STS])
    return c


def _status(api) -> dict:
    return api.get(api.resource("pdb"), "web", namespace="default")["status"]


@pytest.mark.parametrize("spec, pods, expected", [
    ({"minAvailable": 2}, [_pod("a"), _pod("b"), _pod("c")], (3, 2, 3, 1)),
    ({"minAvailable": 2}, [_pod("a"), _pod("b"), _pod("c", ready=False)], (2, 2, 3, 0)),
    ({"minAvailable": 2}, [_pod("a"), _pod("b"), _pod("c", deleting=True)], (2, 2, 3, 0)),
    ({"minAvailable": 2}, [_pod("a"), _pod("x", labels={"app": "other"})], (1, 2, 1, 0)),
    ({"minAvailable": "50%"}, [_pod(n, owner=BY_DEPLOY) for n in "abc"], (3, 2, 4, 1)),
    ({"maxUnavailable": 1}, [_pod(n, owner=BY_DEPLOY) for n in "abc"], (3, 3, 4, 0)),
    ({"maxUnavailable": "34%"}, [_pod(n, owner=BY_STS) for n in "abc"], (3, 1, 3, 2)),
    ({"maxUnavailable": 1}, [_pod("a", owner=BY_LONE_RS), _pod("b", owner=BY_STS)], (2, 7, 8, 0)),
    ({"minAvailable": 0}, [], (0, 0, 0, 0)),
])
def test_status_from_pods_and_owners_scale(api, spec, pods, expected):
    """currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed as Kubernetes computes them."""
    c = _controller(api, spec, pods)
    assert c.reconcile("default/web") is None
    status = _status(api)
    assert (status["currentHealthy"], status["desiredHealthy"], status["expectedPods"],
            status["disruptionsAllowed"]) == expected
    assert status["observedGeneration"] == 1
    cond = status["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == \
        (("DisruptionAllowed", "True", "SufficientPods") if expected[3] else
         ("DisruptionAllowed", "False", "InsufficientPods"))


def test_events_for_no_pods_and_unmanaged_pods(api):
    """No pods: Normal NoPods; a pod with no controller under a percentage: Warning UnmanagedPods (not counted)."""
    c = _controller(api, {"minAvailable": "50%"}, [_pod("a"), _pod("b", owner=BY_STS)])
    c.reconcile("default/web")
    assert ("web", "Warning", "UnmanagedPods") in c.ctx.recorder.events
    assert _status(api)["expectedPods"] == 3
    api.delete(api.resource("pdb"), "web", namespace="default")
    c = _controller(api, {"minAvailable": 1}, [])
    c.reconcile("default/web")
    assert c.ctx.recorder.events == [("web", "Normal", "NoPods")]


def test_disrupted_pods_hold_two_minutes_then_are_dropped(api):
    """A fresh disruptedPods entry is kept (the pod not healthy) and rechecked at expiry; a stale one is dropped."""
    fresh, stale = format_time(NOW - dt.timedelta(seconds=30)), format_time(NOW - dt.timedelta(seconds=121))
    status = {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 3,
              "observedGeneration": 1, "disruptedPods": {"a": fresh, "b": stale, "gone": fresh}}
    c = _controller(api, {"minAvailable": 1}, [_pod("a"), _pod("b"), _pod("c")], status=status)
    assert c.reconcile("default/web") == pytest.approx(90.0)
    got = _status(api)
    assert got["disruptedPods"] == {"a": fresh}
    assert (got["currentHealthy"], got["disruptionsAllowed"]) == (2, 1)
    assert c.ctx.recorder.events == [("b", "Warning", "NotDeleted")]


def test_unchanged_status_is_not_written(api):
    """A second pass over the same state writes nothing (no new revision)."""
    c = _controller(api, {"minAvailable": 1}, [_pod("a"), _pod("b")])
    c.reconcile("default/web")
    c.budgets = _Informer([api.get(api.resource("pdb"), "web", namespace="default")])
    rev = api.revision()
    c.reconcile("default/web")
    assert api.revision() == rev


def test_a_pod_whose_controller_is_unknown_fails_safe(api):
    """A pod owned by a controller that cannot be found: disruptionsAllowed 0, condition SyncFailed, error raised."""
    status = {"disruptionsAllowed": 3, "currentHealthy": 3, "desiredHealthy": 0, "expectedPods": 3,
              "observedGeneration": 1}
    c = _controller(api, {"maxUnavailable": 1}, [_pod("a", owner=_owner("ReplicaSet", "ghost", "g-uid"))],
                    status=status)
    with pytest.raises(SyncFailed, match='found no controllers for pod "a"'):
        c.reconcile("default/web")
    got = _status(api)
    assert got["disruptionsAllowed"] == 0
    assert [(x["status"], x["reason"], x["message"]) for x in got["conditions"]] == \
        [("False", "SyncFailed", 'found no controllers for pod "a"')]


def test_controller_and_eviction_together(api):
    """Run by the manager: the status appears, an eviction takes the disruption, the controller recounts."""
    api.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
    for name in "abc":
        pod = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        api.update_status({**pod, "status": {"phase": "Running",
                                             "conditions": [{"type": "Ready", "status": "True"}]}})
    with running(api, [DisruptionController()]):
        wait_for(lambda: (_status_or_none(api) or {}).get("disruptionsAllowed") == 1, what="1 disruption allowed")
        api.evict("default", "a")
        wait_for(lambda: (_status_or_none(api) or {}).get("currentHealthy") == 2
                 and _status_or_none(api).get("expectedPods") == 2, what="the controller recounted")
        assert _status(api)["disruptionsAllowed"] == 0 and not _status(api).get("disruptedPods")


def _status_or_none(api) -> dict | None:
    pdb = api.find(api.resource("pdb"), "web", namespace="default")
    return (pdb or {}).get("status")
