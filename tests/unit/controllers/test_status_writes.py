"""The controllers' status writes and read-modify-writes survive a stale cache (a Conflict re-reads, then writes).

Each controller is registered on a real API over a fresh store (its informers are not
started: the tests hand it objects themselves), then asked to write from a copy that
someone else's write has made stale.
"""

from __future__ import annotations

import copy
import datetime as dt
import threading

import pytest

from kctl.client.informer import InformerFactory
from kctl.controllers.base import ControllerContext, Recorder
from kctl.controllers.cronjob import CronJobController
from kctl.controllers.daemonset import DaemonSetController
from kctl.controllers.job import JobController
from kctl.controllers.namespace import FINALIZER, NamespaceController
from kctl.controllers.nodelifecycle import TAINT_UNREACHABLE, NodeLifecycleController
from kctl.controllers.ttlafterfinished import TTLAfterFinishedController
from kctl.machinery.errors import Conflict
from kctl.testing.waiting import wait_for

NOW = dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.timezone.utc)
POD_SPEC = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}


def registered(api, controller):
    """The controller registered on api, with a queue that is never run."""
    from kctl.client.workqueue import WorkQueue

    ctx = ControllerContext(api=api, informers=InformerFactory(api),
                            recorder=Recorder(api, component=f"{controller.name}-controller"))
    controller.register(ctx, WorkQueue(name="test"))
    return controller


def written_by_someone_else(api, obj: dict, **status: object) -> dict:
    live = api.get(api.resource_for(obj), obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
    live["status"] = {**(live.get("status") or {}), **status}
    return api.update_status(live)


def job(name: str = "pi") -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"template": {"metadata": {"labels": {"app": name}}, "spec": POD_SPEC}}}


def cronjob(name: str = "tick") -> dict:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedule": "*/10 * * * *", "jobTemplate": {"spec": {"template": {"spec": POD_SPEC}}}}}


def daemonset(name: str = "agent") -> dict:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def test_job_status_write_from_a_stale_job_lands(api):
    """The Job controller writes its status onto the Job read again, instead of failing the pass."""
    stale = api.create(job())
    written_by_someone_else(api, stale, active=1)
    controller = registered(api, JobController())
    controller._write_status(stale, {"active": 0, "succeeded": 1})
    assert api.get(api.resource("jobs"), "pi", namespace="default")["status"] == {"active": 0, "succeeded": 1}


def test_cronjob_status_write_from_a_stale_cronjob_lands(api):
    """The CronJob controller writes lastScheduleTime onto the CronJob read again, instead of raising Conflict."""
    stale = api.create(cronjob())
    written_by_someone_else(api, stale, lastSuccessfulTime="2024-01-01T11:00:00Z")
    controller = registered(api, CronJobController())
    controller._write_status(stale, {"lastScheduleTime": "2024-01-01T12:00:00Z"})
    status = api.get(api.resource("cronjobs"), "tick", namespace="default")["status"]
    assert status == {"lastScheduleTime": "2024-01-01T12:00:00Z"}


def test_daemonset_status_keeps_what_others_wrote(api):
    """The DaemonSet's counts go onto the DaemonSet read again; a field written meanwhile stays."""
    stale = api.create(daemonset())
    written_by_someone_else(api, stale, collisionCount=2, currentNumberScheduled=5, desiredNumberScheduled=5,
                            numberMisscheduled=0, numberReady=5)
    controller = registered(api, DaemonSetController())
    controller._update_status(stale, [], [], "h", NOW)
    status = api.get(api.resource("daemonsets"), "agent", namespace="default")["status"]
    assert status["collisionCount"] == 2 and status["desiredNumberScheduled"] == 0
    assert status["observedGeneration"] == 1


def test_namespace_finalize_retries_a_conflict(api):
    """Dropping the `kubernetes` finalizer is read again and retried when a write got there first."""
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gone"},
                "spec": {"finalizers": [FINALIZER]}})

    class ConflictOnce:
        """The API, whose first update raises Conflict (someone wrote the Namespace in between)."""

        def __init__(self, api) -> None:
            self.api, self.conflicts = api, 1

        def __getattr__(self, name: str):
            return getattr(self.api, name)

        def update(self, obj: dict, **kwargs) -> dict:
            if self.conflicts:
                self.conflicts -= 1
                raise Conflict("the object has been modified")
            return self.api.update(obj, **kwargs)

    controller = registered(api, NamespaceController())
    controller.api = ConflictOnce(api)
    assert controller._finalize("gone") is None
    ns = api.find(api.resource("namespaces"), "gone")
    assert ns is None or FINALIZER not in ((ns.get("spec") or {}).get("finalizers") or ())


def node(name: str = "n1", *, ready: str = "Unknown") -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": ready, "lastHeartbeatTime": "2024-01-01T11:00:00Z",
                                       "lastTransitionTime": "2024-01-01T11:00:00Z"}]}}


def test_node_taint_from_a_stale_node_lands(api):
    """The lifecycle controller taints a node read again after a Conflict, keeping a taint added meanwhile."""
    created = api.create(node())
    stale = api.update_status({**created, "status": node()["status"]})
    live = copy.deepcopy(stale)
    live["spec"] = {"taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}]}
    api.update(live)
    controller = registered(api, NodeLifecycleController())
    controller._taint(stale, NOW)
    taints = api.get(api.resource("nodes"), "n1")["spec"]["taints"]
    assert {t["key"] for t in taints} == {"team", TAINT_UNREACHABLE}


def test_pod_marked_not_ready_from_a_stale_pod(api):
    """A pod whose status changed meanwhile is read again and still marked Ready=False, with its Event."""
    pod = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                      "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}})
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    stale = api.update_status({**pod, "status": ready})
    written_by_someone_else(api, stale, podIP="10.0.0.5")
    controller = registered(api, NodeLifecycleController())
    assert controller._mark_pod_not_ready(stale, "n1", NOW) is True
    status = api.get(api.resource("pods"), "p", namespace="default")["status"]
    assert status["podIP"] == "10.0.0.5" and status["conditions"][0]["status"] == "False"
    events, _ = api.list(api.resource("events"), namespace="default")
    assert [e["reason"] for e in events] == ["NodeNotReady"]


@pytest.mark.parametrize("controller, obj, key", [
    (JobController(), job(), "default/pi"),
    (CronJobController(), cronjob(), "default/tick"),
    (DaemonSetController(), daemonset(), "default/agent"),
    (TTLAfterFinishedController(), job(), "default/pi"),
    (NamespaceController(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}, "team"),
], ids=["job", "cronjob", "daemonset", "ttlafterfinished", "namespace"])
def test_object_for_names_the_keys_object(api, controller, obj, key):
    """object_for(key) is the cached object a permanent failure's Warning Event goes on (None when unknown)."""
    controller = registered(api, controller)
    stop = threading.Event()
    controller.ctx.informers.start(stop)
    try:
        created = api.create(obj)
        wait_for(lambda: controller.object_for(key) is not None, what="the informer has the object")
        assert controller.object_for(key)["metadata"]["uid"] == created["metadata"]["uid"]
        assert controller.object_for(key + "-unknown") is None
    finally:
        stop.set()
