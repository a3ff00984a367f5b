"""The Deployment controller's status write (_Sync.write_status) goes through the client's StatusWriter.

A pass works on a private copy of the Deployment; its status write must land on the
Deployment read again after a Conflict (however many, within the shared attempts), write
nothing when the status is what the API already has, and stop the pass (RetryLater) when
the Deployment was deleted or replaced meanwhile.
"""

from __future__ import annotations

import copy

import pytest

from kctl.client.informer import InformerFactory
from kctl.client.retry import DEFAULT_ATTEMPTS
from kctl.client.workqueue import WorkQueue
from kctl.controllers.base import ControllerContext, Recorder
from kctl.controllers.deployment import DeploymentController, RetryLater, _Sync
from kctl.machinery.errors import Conflict


def deployment() -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "img:1"}]}}}}


@pytest.fixture
def controller(api):
    """A DeploymentController registered on api (informers not started, queue never run)."""
    c = DeploymentController()
    c.register(ControllerContext(api=api, informers=InformerFactory(api),
                                 recorder=Recorder(api, component="deployment-controller")), WorkQueue(name="test"))
    return c


def live(api) -> dict:
    return api.get(api.resource("deployments"), "web", namespace="default")


def count_status_writes(api, monkeypatch, *, conflicts: int = 0) -> list[dict]:
    """Record every update_status call on api; the first `conflicts` raise Conflict instead of writing."""
    calls: list[dict] = []
    real = api.update_status

    def update_status(obj, *args, **kwargs):
        calls.append(obj)
        if len(calls) <= conflicts:
            raise Conflict("the object has been modified; please apply your changes to the latest version")
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(api, "update_status", update_status)
    return calls


@pytest.mark.parametrize("conflicts", [0, 1, 2, DEFAULT_ATTEMPTS - 1], ids=["none", "one", "two", "all-but-last"])
def test_status_lands_after_conflicts(api, controller, monkeypatch, conflicts):
    """A status write that conflicts (fewer times than the shared attempts) lands on the Deployment read again."""
    stale = api.create(deployment())
    api.patch(api.resource("deployments"), "web", {"metadata": {"labels": {"touched": "yes"}}},
              patch_type="merge", namespace="default")  # someone else's write: `stale` is behind
    calls = count_status_writes(api, monkeypatch, conflicts=conflicts)
    sync = _Sync(controller, copy.deepcopy(stale))
    sync.d["status"] = {"observedGeneration": 1, "replicas": 0}
    sync.write_status()
    assert live(api)["status"] == {"observedGeneration": 1, "replicas": 0}
    assert len(calls) == max(conflicts, 1) + 1  # the stale copy's write conflicts (for real if not made to)
    assert sync.d["metadata"]["labels"] == {"touched": "yes"}  # the pass goes on with the object as stored
    assert sync.d["metadata"]["resourceVersion"] == live(api)["metadata"]["resourceVersion"]


def test_conflicts_on_every_attempt_raise_conflict(api, controller, monkeypatch):
    """A status write that conflicts on every attempt raises Conflict (a temporary error the queue retries)."""
    created = api.create(deployment())
    calls = count_status_writes(api, monkeypatch, conflicts=DEFAULT_ATTEMPTS)
    sync = _Sync(controller, copy.deepcopy(created))
    sync.d["status"] = {"observedGeneration": 1}
    with pytest.raises(Conflict):
        sync.write_status()
    assert len(calls) == DEFAULT_ATTEMPTS


def test_unchanged_status_is_not_written(api, controller, monkeypatch):
    """A status equal to the one the API has is no write (Kubernetes compares before UpdateStatus too)."""
    created = api.create(deployment())
    created["status"] = {"observedGeneration": 1, "replicas": 0}
    created = api.update_status(created)
    calls = count_status_writes(api, monkeypatch)
    sync = _Sync(controller, copy.deepcopy(created))
    sync.d["status"] = {"observedGeneration": 1, "replicas": 0}
    sync.write_status()
    assert calls == []
    sync.d["status"]["replicas"] = 1
    sync.write_status()
    assert len(calls) == 1
    assert live(api)["status"]["replicas"] == 1


@pytest.mark.parametrize("recreate", [False, True], ids=["deleted", "replaced"])
def test_deployment_gone_meanwhile_is_retry_later(api, controller, recreate):
    """A Deployment deleted (or deleted and created anew) since the pass read it stops the pass: RetryLater."""
    stale = api.create(deployment())
    api.delete(api.resource("deployments"), "web", namespace="default")
    if recreate:
        api.create(deployment())
    sync = _Sync(controller, copy.deepcopy(stale))
    sync.d["status"] = {"observedGeneration": 1}
    with pytest.raises(RetryLater, match="deleted or replaced"):
        sync.write_status()
    if recreate:
        assert (live(api).get("status") or {}).get("observedGeneration") is None
