"""Tests of the Job controller: its pure decisions, then simulations on a real store.

The simulations run the real ControllerManager, FakeKubelet (pods end by the
fake.kctl.io/exit-code label) and a binder, all on one fake clock that only the test
moves; waits have a time limit only to turn a hang into a failure.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import threading

import pytest

from kctl.controllers import job as jc

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
T0 = NOW.timestamp()


def counts(active: int = 0, succeeded: int = 0, failed: int = 0) -> jc.JobCounts:
    return jc.JobCounts(active=active, succeeded=succeeded, failed=failed, ready=0)


def failed_pod(finished_ago: float) -> dict:
    when = (NOW - dt.timedelta(seconds=finished_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"name": "p", "uid": "p"},
            "status": {"phase": "Failed",
                       "containerStatuses": [{"name": "c", "state": {"terminated": {"finishedAt": when}}}]}}


@pytest.mark.parametrize("spec,succeeded,want", [
    ({}, 0, 1), ({"parallelism": 3}, 0, 3), ({"parallelism": 3, "completions": 5}, 4, 1),
    ({"parallelism": 2, "completions": 5}, 0, 2), ({"completions": 2}, 2, 0), ({"parallelism": 0}, 0, 0),
    ({"parallelism": 3}, 1, 0),
], ids=["defaults", "work-queue", "remaining-caps", "parallelism-caps", "done", "paused", "work-queue-succeeded"])
def test_wanted_active(spec, succeeded, want):
    """Active pods wanted are min(parallelism, completions - succeeded); a work queue stops after a success."""
    assert jc.wanted_active(spec, succeeded) == want


@pytest.mark.parametrize("spec,c,complete", [
    ({"completions": 3}, counts(succeeded=3), True), ({"completions": 3}, counts(active=1, succeeded=2), False),
    ({}, counts(succeeded=1), True), ({}, counts(active=1, succeeded=1), False), ({}, counts(), False),
], ids=["completions-reached", "completions-short", "queue-drained", "queue-still-running", "nothing-yet"])
def test_is_complete(spec, c, complete):
    """A Job completes on `completions` successes, or as a work queue when one succeeded and none runs."""
    assert jc.is_complete(spec, c) is complete


@pytest.mark.parametrize("spec,c,started_ago,reason", [
    ({}, counts(failed=6), 0, None), ({}, counts(failed=7), 0, "BackoffLimitExceeded"),
    ({"backoffLimit": 0}, counts(failed=1), 0, "BackoffLimitExceeded"),
    ({"activeDeadlineSeconds": 30}, counts(), 29, None),
    ({"activeDeadlineSeconds": 30}, counts(), 30, "DeadlineExceeded"),
    ({"activeDeadlineSeconds": 30, "backoffLimit": 0}, counts(failed=1), 40, "BackoffLimitExceeded"),
], ids=["default-limit-not-reached", "default-limit-passed", "zero-limit", "before-deadline", "at-deadline",
        "backoff-checked-first"])
def test_failure_reason(spec, c, started_ago, reason):
    """Failures past backoffLimit, or activeDeadlineSeconds elapsed, fail the Job with Kubernetes' reason."""
    got = jc.failure_reason(spec, c, NOW - dt.timedelta(seconds=started_ago), NOW)
    assert (got[0] if got else None) == reason


@pytest.mark.parametrize("failures,delay", [(0, 0.0), (1, 10.0), (2, 20.0), (4, 80.0), (6, 320.0), (7, 360.0),
                                            (100, 360.0)],
                         ids=["none", "first", "second", "fourth", "sixth", "capped", "many"])
def test_backoff_delay(failures, delay):
    """Back-off is 10 s doubling per failure, capped at 6 minutes."""
    assert jc.backoff_delay(failures, base=10.0, cap=360.0) == delay


@pytest.mark.parametrize("finished_ago,failures,left", [(0, 1, 10.0), (4, 1, 6.0), (10, 1, 0.0), (5, 2, 15.0)],
                         ids=["just-failed", "partway", "elapsed", "second-failure"])
def test_backoff_remaining(finished_ago, failures, left):
    """The back-off counts from the newest failed pod's finish time."""
    assert jc.backoff_remaining([failed_pod(finished_ago)], failures, NOW, base=10.0, cap=360.0) == left


def test_job_counts_and_pod_template():
    """Counts split pods by phase (never below the old status); new pods carry the Job's labels and owner."""
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "pi", "namespace": "ns", "uid": "u1"}, "status": {"failed": 5},
           "spec": {"template": {"metadata": {"labels": {"app": "pi"}},
                                 "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    ready = {"type": "Ready", "status": "True"}
    pods = [{"metadata": {}, "status": {"phase": "Running", "conditions": [ready]}},
            {"metadata": {}, "status": {"phase": "Pending"}},
            {"metadata": {"deletionTimestamp": "x"}, "status": {"phase": "Running"}},
            {"metadata": {}, "status": {"phase": "Succeeded"}}, {"metadata": {}, "status": {"phase": "Failed"}}]
    assert jc.job_counts(job, pods) == jc.JobCounts(active=2, succeeded=1, failed=5, ready=1)
    pod = jc.job_pod(job)
    assert pod["metadata"]["generateName"] == "pi-"
    assert pod["metadata"]["labels"] == {"app": "pi", "controller-uid": "u1", "job-name": "pi",
                                         "batch.kubernetes.io/controller-uid": "u1",
                                         "batch.kubernetes.io/job-name": "pi"}
    assert pod["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "pi",
                                                   "uid": "u1", "controller": True, "blockOwnerDeletion": True}]
    assert pod["spec"]["restartPolicy"] == "Never"


# -- simulations: the manager, a real store, fake nodes, a fake clock -------------------------

class FakeClock:
    """A clock only the test moves."""

    def __init__(self, start: float = T0) -> None:
        self.now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


@contextlib.contextmanager
def job_cluster(api, clock: FakeClock, *, settings: jc.JobSettings = jc.JobSettings(backoff_base_seconds=0.0)):
    """The Job controller, a fake kubelet with two nodes and a binder, on the fake clock."""
    from kctl.controllers.manager import ControllerManager
    from kctl.testing.fake_kubelet import FakeKubelet
    from rollout_harness import Binder

    stop = threading.Event()
    nodes = ["node-0", "node-1"]
    kubelet = FakeKubelet(api, nodes=nodes, clock=clock)
    kubelet.start(stop)
    Binder(api, nodes).start(stop)
    manager = ControllerManager(api, [jc.JobController(settings=settings)], leader_election=False, clock=clock)
    manager.start(stop)
    try:
        yield manager
    finally:
        stop.set()
        manager.stop()
        stopper = getattr(kubelet, "stop", None)
        if callable(stopper):
            stopper()


def job(*, name: str = "pi", exit_code: int | None = 0, **spec: object) -> dict:
    labels = {"app": name}
    if exit_code is not None:
        labels["fake.kctl.io/exit-code"] = str(exit_code)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {**spec, "template": {"metadata": {"labels": labels},
                                          "spec": {"restartPolicy": "Never",
                                                   "containers": [{"name": "c", "image": "busybox"}]}}}}


def get_job(api, name: str = "pi") -> dict:
    return api.get(api.resource("jobs"), name, namespace="default")


def job_pods(api, created: dict) -> list[dict]:
    pods, _ = api.list(api.resource("pods"), namespace="default")
    return [p for p in pods if (jc.controller_ref(p) or {}).get("uid") == created["metadata"]["uid"]]


def condition(api, type_: str, name: str = "pi") -> dict | None:
    return next((c for c in (get_job(api, name).get("status") or {}).get("conditions") or ()
                 if c.get("type") == type_ and c.get("status") == "True"), None)


def reasons(api) -> set[str]:
    return {e.get("reason") for e in api.list(api.resource("events"), namespace="default")[0]}


def touch(api, name: str = "pi") -> None:
    """Change the Job's annotations so the controller looks again (after the test moved the clock)."""
    current = get_job(api, name)
    annotations = current["metadata"].setdefault("annotations", {})
    annotations["test/touch"] = str(int(annotations.get("test/touch", "0")) + 1)
    api.update(current)


def test_completions_with_parallelism(api):
    """5 completions, 2 at a time: exactly 5 labelled, owned pods are created and succeed, then Complete."""
    from rollout_harness import wait_for

    clock = FakeClock()
    with job_cluster(api, clock):
        created = api.create(job(completions=5, parallelism=2))
        wait_for(lambda: condition(api, "Complete"), what="the Job completes")
        wait_for(lambda: "Completed" in reasons(api), what="the Completed event")
    status = get_job(api)["status"]
    assert {k: status[k] for k in ("active", "succeeded", "failed", "ready")} == \
        {"active": 0, "succeeded": 5, "failed": 0, "ready": 0}
    assert status["startTime"] and status["completionTime"]
    pods = job_pods(api, created)
    assert len(pods) == 5 and all(p["status"]["phase"] == "Succeeded" for p in pods)
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert labels["job-name"] == "pi" and labels["batch.kubernetes.io/controller-uid"] == created["metadata"]["uid"]
        ref = pod["metadata"]["ownerReferences"][0]
        assert ref["kind"] == "Job" and ref["controller"] and ref["blockOwnerDeletion"]
    assert "SuccessfulCreate" in reasons(api)


def test_at_most_parallelism_pods_active(api):
    """Pods that never end: exactly `parallelism` of them exist, and status counts them active and ready."""
    from rollout_harness import wait_for

    clock = FakeClock()
    with job_cluster(api, clock):
        created = api.create(job(completions=10, parallelism=3, exit_code=None))
        wait_for(lambda: (get_job(api).get("status") or {}).get("ready") == 3, what="3 ready pods")
        assert len(job_pods(api, created)) == 3
        assert get_job(api)["status"]["active"] == 3 and not condition(api, "Complete")


def test_backoff_limit_reached_with_backoff_between_pods(api):
    """Failing pods are re-created only after the back-off; the failure past backoffLimit fails the Job."""
    from rollout_harness import wait_for

    clock = FakeClock()
    settings = jc.JobSettings(backoff_base_seconds=10.0, backoff_max_seconds=360.0)
    with job_cluster(api, clock, settings=settings):
        created = api.create(job(exit_code=1, backoffLimit=2))
        wait_for(lambda: (get_job(api).get("status") or {}).get("failed") == 1, what="the first failure")
        # the clock has not moved: the back-off (10 s) keeps the replacement back
        assert len(job_pods(api, created)) == 1
        clock.advance(10)
        touch(api)
        wait_for(lambda: (get_job(api).get("status") or {}).get("failed") == 2, what="the second failure")
        assert len(job_pods(api, created)) == 2  # now 20 s of back-off
        clock.advance(20)
        touch(api)
        failed = wait_for(lambda: condition(api, "Failed"), what="the Job fails")
        wait_for(lambda: "BackoffLimitExceeded" in reasons(api), what="the BackoffLimitExceeded event")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert get_job(api)["status"]["failed"] == 3 and len(job_pods(api, created)) == 3
    assert not condition(api, "Complete")


def test_active_deadline_exceeded_kills_active_pods(api):
    """Past activeDeadlineSeconds the Job fails with DeadlineExceeded and its running pods are deleted."""
    from rollout_harness import wait_for

    clock = FakeClock()
    with job_cluster(api, clock):
        created = api.create(job(parallelism=2, exit_code=None, activeDeadlineSeconds=30))
        wait_for(lambda: (get_job(api).get("status") or {}).get("ready") == 2, what="2 running pods")
        assert not condition(api, "Failed")
        clock.advance(30)
        touch(api)
        failed = wait_for(lambda: condition(api, "Failed"), what="the Job fails")
        assert failed["reason"] == "DeadlineExceeded"
        wait_for(lambda: not job_pods(api, created), what="the active pods are deleted")
        wait_for(lambda: "DeadlineExceeded" in reasons(api), what="the DeadlineExceeded event")
    status = get_job(api)["status"]
    assert status["active"] == 0 and status["failed"] == 2


def test_indexed_completion_mode_is_refused(api):
    """completionMode Indexed is not supported: no pods, a Warning event says so."""
    from rollout_harness import wait_for

    clock = FakeClock()
    with job_cluster(api, clock):
        created = api.create(job(completions=2, completionMode="Indexed"))
        wait_for(lambda: "UnsupportedCompletionMode" in reasons(api), what="the refusal event")
        assert job_pods(api, created) == []


# -- suspend ----------------------------------------------------------------------------------

def test_suspended_condition_helpers():
    """Suspended=True is recognised; resuming turns it False, and does nothing when there is none."""
    suspended = jc.with_condition([], "Suspended", "JobSuspended", "Job suspended", NOW)
    assert jc.is_suspended(suspended) and not jc.is_suspended([])
    resumed = jc.with_condition_false(suspended, "Suspended", "JobResumed", "Job resumed", NOW)
    assert resumed == [{"type": "Suspended", "status": "False", "lastProbeTime": "2024-01-01T12:00:00Z",
                        "lastTransitionTime": "2024-01-01T12:00:00Z", "reason": "JobResumed",
                        "message": "Job resumed"}]
    assert not jc.is_suspended(resumed)
    assert jc.with_condition_false([], "Suspended", "JobResumed", "Job resumed", NOW) == []


def set_suspend(api, value: bool, name: str = "pi") -> None:
    """Flip spec.suspend, retrying when the controller's status write got there first."""
    from kctl.machinery.errors import Conflict

    for _ in range(20):
        current = get_job(api, name)
        current["spec"]["suspend"] = value
        try:
            api.update(current)
            return
        except Conflict:
            continue
    raise AssertionError("could not update the Job's suspend")


def suspended_condition(api, name: str = "pi") -> dict | None:
    return next((c for c in (get_job(api, name).get("status") or {}).get("conditions") or ()
                 if c.get("type") == "Suspended"), None)


def test_created_suspended_then_resumed(api):
    """A Job created suspended makes no pods and has no startTime; resumed, it starts with startTime = now."""
    from rollout_harness import wait_for

    clock = FakeClock()
    with job_cluster(api, clock):
        created = api.create(job(completions=2, parallelism=2, exit_code=None, suspend=True))
        wait_for(lambda: (suspended_condition(api) or {}).get("status") == "True", what="Suspended=True")
        wait_for(lambda: "Suspended" in reasons(api), what="the Suspended event")
        assert suspended_condition(api)["reason"] == "JobSuspended"
        assert job_pods(api, created) == []
        assert "startTime" not in get_job(api)["status"]
        clock.advance(100)
        set_suspend(api, False)
        wait_for(lambda: (get_job(api).get("status") or {}).get("ready") == 2, what="2 running pods")
        wait_for(lambda: "Resumed" in reasons(api), what="the Resumed event")
        status = get_job(api)["status"]
        assert suspended_condition(api)["status"] == "False" and suspended_condition(api)["reason"] == "JobResumed"
        assert status["startTime"] == jc.format_time(NOW + dt.timedelta(seconds=100))


def test_suspend_deletes_active_pods_and_stops_the_deadline(api):
    """Suspending deletes the running pods and makes none; the deadline counts only from the resume."""
    from rollout_harness import wait_for

    clock = FakeClock()
    with job_cluster(api, clock):
        created = api.create(job(parallelism=2, exit_code=None, activeDeadlineSeconds=30))
        wait_for(lambda: (get_job(api).get("status") or {}).get("ready") == 2, what="2 running pods")
        set_suspend(api, True)
        wait_for(lambda: (suspended_condition(api) or {}).get("status") == "True", what="Suspended=True")
        wait_for(lambda: not job_pods(api, created), what="the active pods are deleted")
        wait_for(lambda: (get_job(api).get("status") or {}).get("active") == 0, what="status active 0")
        clock.advance(100)  # far past the deadline, but suspended
        touch(api)
        wait_for(lambda: "SuccessfulDelete" in reasons(api), what="the deletions recorded")
        assert not condition(api, "Failed") and job_pods(api, created) == []
        set_suspend(api, False)
        wait_for(lambda: (get_job(api).get("status") or {}).get("ready") == 2, what="2 pods running again")
        assert get_job(api)["status"]["startTime"] == jc.format_time(NOW + dt.timedelta(seconds=100))
        assert not condition(api, "Failed"), "the deadline counts from the resume"
        clock.advance(30)
        touch(api)
        failed = wait_for(lambda: condition(api, "Failed"), what="the Job fails at the deadline after resume")
        assert failed["reason"] == "DeadlineExceeded"
    assert get_job(api)["status"]["failed"] == 2, "pods deleted by the suspension are not failures"


def test_a_pass_on_a_stale_job_never_lowers_the_terminal_counts(api):
    """A pass that read the Job before the last status write (its cache behind, the pods it counted since
    deleted) writes onto the Job read again without lowering succeeded/failed (the count a deadline made)."""
    from kctl.client.statuswriter import StatusWriter

    stale = api.create(job(exit_code=None, activeDeadlineSeconds=30))
    fresh = copy.deepcopy(stale)
    fresh["status"] = {"active": 0, "failed": 2, "succeeded": 1}
    api.update_status(fresh)
    controller = jc.JobController()
    controller.status_writer = StatusWriter(api)
    controller._write_status(stale, {"active": 0, "failed": 0, "succeeded": 0, "ready": 0})
    status = get_job(api)["status"]
    assert (status["failed"], status["succeeded"], status["active"]) == (2, 1, 0)
