"""Finished Jobs are deleted ttlSecondsAfterFinished later: the TTL-after-finished controller on a fake clock."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from lifecycle_harness import FakeClock, Queue, exists, owner_ref, running, wait_for

from kctl.client.informer import InformerFactory
from kctl.controllers.base import ControllerContext, Recorder
from kctl.controllers.garbagecollector import GarbageCollector
from kctl.controllers.ttlafterfinished import TTLAfterFinishedController, finished_at, seconds_left

T0 = dt.datetime(2030, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


def stamp(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def finished_status(kind: str, when: dt.datetime) -> dict:
    """A Job status finished by `kind` (Complete or Failed) at `when`, as the Job controller writes it."""
    status = {"conditions": [{"type": kind, "status": "True", "lastProbeTime": stamp(when),
                              "lastTransitionTime": stamp(when)}]}
    if kind == "Complete":
        status["completionTime"] = stamp(when)
    return status


@pytest.mark.parametrize("status, expected", [
    (finished_status("Complete", T0), T0),
    (finished_status("Failed", T0), T0),
    ({"completionTime": stamp(T0 - dt.timedelta(hours=1)),
      "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": stamp(T0)}]},
     T0 - dt.timedelta(hours=1)),
    ({"conditions": [{"type": "Failed", "status": "False", "lastTransitionTime": stamp(T0)}]}, None),
    ({"startTime": stamp(T0)}, None),
], ids=["complete", "failed", "completion-time-first", "condition-false", "running"])
def test_finished_at(status, expected):
    """A Job's finish time is completionTime, else its True Complete/Failed condition's transition."""
    assert finished_at({"status": status}) == expected


def test_seconds_left():
    """A finished Job with a TTL expires TTL seconds after finishing; without one it never does."""
    job = {"metadata": {}, "spec": {"ttlSecondsAfterFinished": 100}, "status": finished_status("Complete", T0)}
    assert seconds_left(job, T0 + dt.timedelta(seconds=40)) == 60
    assert seconds_left(job, T0 + dt.timedelta(seconds=500)) == 0
    assert seconds_left({**job, "spec": {}}, T0) is None
    assert seconds_left({**job, "status": {}}, T0) is None
    assert seconds_left({**job, "metadata": {"deletionTimestamp": stamp(T0)}}, T0) is None




def make_job(api, name: str, *, ttl: int | None, status: dict | None = None) -> dict:
    spec = {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    job = api.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
                      "spec": spec})
    if status is not None:
        job["status"] = status
        job = api.update_status(job)
    return job


def job_pod(api, job: dict, name: str) -> dict:
    return api.create({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "default", "ownerReferences": [owner_ref(job)]},
                       "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}})


@pytest.fixture
def ttl_controller(api):
    """A TTLAfterFinishedController over a synced jobs informer, with a fake clock at T0."""
    stop = threading.Event()
    informers = InformerFactory(api)
    ctx = ControllerContext(api=api, informers=informers, recorder=Recorder(api, component="test"),
                            clock=FakeClock(T0))
    controller = TTLAfterFinishedController()
    controller.register(ctx, Queue())
    controller.jobs.start(stop)
    wait_for(controller.jobs.has_synced, what="jobs informer synced")
    yield controller
    stop.set()


def cached(controller, name: str, predicate=lambda job: True):
    return wait_for(lambda: (lambda job: job is not None and predicate(job))(controller.jobs.get("default", name)),
                    what=f"job {name} cached")


def test_finished_job_deleted_when_ttl_passes(api, ttl_controller):
    """A Job finished 30 s ago with a 100 s TTL waits 70 s, then is deleted; running or TTL-less Jobs stay."""
    make_job(api, "done", ttl=100, status=finished_status("Complete", T0 - dt.timedelta(seconds=30)))
    make_job(api, "failed", ttl=0, status=finished_status("Failed", T0 - dt.timedelta(seconds=5)))
    make_job(api, "running", ttl=10, status={"startTime": stamp(T0 - dt.timedelta(hours=1))})
    make_job(api, "keep", ttl=None, status=finished_status("Complete", T0 - dt.timedelta(days=1)))
    for name in ("done", "failed", "running", "keep"):
        cached(ttl_controller, name, lambda job: job.get("status"))
    wait_left = ttl_controller.reconcile("default/done")
    assert wait_left == pytest.approx(70)
    assert exists(api, "jobs", "done")
    assert ttl_controller.reconcile("default/failed") is None
    assert not exists(api, "jobs", "failed"), "a TTL of 0 deletes the Job as soon as it finished"
    assert ttl_controller.reconcile("default/running") is None and exists(api, "jobs", "running")
    assert ttl_controller.reconcile("default/keep") is None and exists(api, "jobs", "keep")
    ttl_controller.ctx.clock.advance(69)
    assert ttl_controller.reconcile("default/done") == pytest.approx(1)
    assert exists(api, "jobs", "done")
    ttl_controller.ctx.clock.advance(1)
    assert ttl_controller.reconcile("default/done") is None
    assert not exists(api, "jobs", "done")
    assert ttl_controller.reconcile("default/gone") is None, "not found is success"


def test_only_finished_jobs_with_ttl_are_queued(api, ttl_controller):
    """Queued: a Job once it finishes with a TTL; not a running one, nor a finished one without TTL."""
    job = make_job(api, "later", ttl=60)
    make_job(api, "no-ttl", ttl=None, status=finished_status("Complete", T0))
    cached(ttl_controller, "no-ttl", lambda j: j.get("status"))
    assert ttl_controller.queue.keys == []
    job["status"] = finished_status("Failed", T0)
    api.update_status(job)
    wait_for(lambda: "default/later" in ttl_controller.queue.keys, what="finished job queued")
    assert "default/no-ttl" not in ttl_controller.queue.keys


def test_stale_cache_is_checked_against_the_api(api, ttl_controller, monkeypatch):
    """Due by the cache but the TTL was raised meanwhile: the fresh Job is judged and not deleted."""
    job = make_job(api, "raised", ttl=10, status=finished_status("Complete", T0 - dt.timedelta(seconds=60)))
    cached(ttl_controller, "raised", lambda j: j.get("status"))
    fresh = api.get(api.resource("jobs"), "raised", namespace="default")
    fresh["spec"]["ttlSecondsAfterFinished"] = 3600
    api.update(fresh)
    stale = dict(job, spec={**job["spec"], "ttlSecondsAfterFinished": 10})
    monkeypatch.setattr(ttl_controller.jobs, "get", lambda namespace, name: stale)  # cache missed the raise
    assert ttl_controller.reconcile("default/raised") == pytest.approx(3600 - 60)
    assert exists(api, "jobs", "raised")


def test_running_manager_deletes_job_and_gc_removes_pods(api):
    """With the manager (TTL controller + GC), an expired Job goes with Background propagation: its pods too."""
    now = dt.datetime.now(dt.timezone.utc)
    expired = make_job(api, "expired", ttl=1, status=finished_status("Complete", now - dt.timedelta(minutes=5)))
    job_pod(api, expired, "expired-abc")
    fresh = make_job(api, "fresh", ttl=3600, status=finished_status("Complete", now))
    job_pod(api, fresh, "fresh-abc")
    with running(api, [TTLAfterFinishedController(), GarbageCollector()]):
        wait_for(lambda: not exists(api, "jobs", "expired"), what="expired job deleted")
        wait_for(lambda: not exists(api, "pods", "expired-abc"), what="its pod collected")
    assert exists(api, "jobs", "fresh") and exists(api, "pods", "fresh-abc")
