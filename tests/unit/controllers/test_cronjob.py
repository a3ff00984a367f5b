"""Tests of the CronJob controller: its pure decisions, then simulations on a real store.

The simulations run the real ControllerManager on a fake clock that only the test moves;
after moving it the test puts the CronJob's key on the queue itself (standing in for the
requeue-after the controller returned). Jobs are finished by writing their status; no
kubelet or Job controller runs. Waits have a time limit only to turn a hang into a failure.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import threading
import time

import pytest

from kctl.controllers import cronjob as cc

UTC = dt.timezone.utc


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).astimezone(UTC)


@pytest.mark.parametrize("schedule,after,zone,want", [
    ("*/5 * * * *", "2024-01-01T12:03:00+00:00", None, "2024-01-01T12:05:00+00:00"),
    ("*/5 * * * *", "2024-01-01T12:05:00+00:00", None, "2024-01-01T12:10:00+00:00"),
    ("@hourly", "2024-01-01T12:00:01+00:00", None, "2024-01-01T13:00:00+00:00"),
    ("@daily", "2024-01-01T12:00:00+00:00", None, "2024-01-02T00:00:00+00:00"),
    ("0 9 * * 1", "2024-01-01T09:00:00+00:00", None, "2024-01-08T09:00:00+00:00"),
    ("0 9 * * *", "2024-01-01T12:00:00+00:00", "Europe/Berlin", "2024-01-02T08:00:00+00:00"),
    ("0 9 * * *", "2024-07-01T12:00:00+00:00", "Europe/Berlin", "2024-07-02T07:00:00+00:00"),
    ("30 1 * * *", "2024-01-01T12:00:00+00:00", "America/New_York", "2024-01-02T06:30:00+00:00"),
], ids=["every-5-min", "strictly-after", "hourly", "daily", "weekly-monday", "berlin-winter", "berlin-summer",
        "new-york"])
def test_next_schedule_time(schedule, after, zone, want):
    """The next time is strictly after `after`, read in spec.timeZone (DST included)."""
    assert cc.next_schedule_time(schedule, at(after), time_zone=zone) == at(want)


@pytest.mark.parametrize("schedule,zone", [("* * * *", None), ("61 * * * *", None), ("* * * * * *", None),
                                           ("@every 1h", None), ("", None), ("* * * * *", "Mars/Olympus")],
                         ids=["four-fields", "bad-minute", "seconds-field", "every", "empty", "unknown-zone"])
def test_invalid_schedules_are_refused(schedule, zone):
    """Only 5 fields or a descriptor in a known zone are accepted."""
    with pytest.raises(cc.InvalidSchedule):
        cc.next_schedule_time(schedule, at("2024-01-01T12:00:00+00:00"), time_zone=zone)


@pytest.mark.parametrize("schedule,earliest,now,zone,want,count", [
    ("*/5 * * * *", "12:00:00", "12:04:59", None, None, 0),
    ("*/5 * * * *", "12:00:00", "12:05:00", None, "12:05:00", 1),
    ("*/5 * * * *", "12:00:00", "12:17:00", None, "12:15:00", 3),
    ("*/5 * * * *", "11:58:00", "12:00:30", None, "12:00:00", 1),
    ("* * * * *", "10:00:00", "12:00:00", None, "12:00:00", cc.MAX_MISSED + 1),
    ("0 13 * * *", "11:00:00", "12:30:00", "Europe/Berlin", "12:00:00", 1),
], ids=["not-yet", "exactly-due", "three-missed-latest-wins", "since-creation", "too-many-capped", "time-zone"])
def test_most_recent_missed(schedule, earliest, now, zone, want, count):
    """Only the latest due time in (earliest, now] is returned, with the number missed (capped past 100)."""
    day = "2024-01-01T"
    got = cc.most_recent_missed(schedule, at(day + earliest + "+00:00"), at(day + now + "+00:00"), time_zone=zone)
    assert got == cc.Missed(at(day + want + "+00:00") if want else None, count)


@pytest.mark.parametrize("age,deadline,late", [(30, None, False), (30, 60, False), (60, 60, False), (61, 60, True),
                                               (3600, 10, True)],
                         ids=["no-deadline", "within", "at-deadline", "past", "long-past"])
def test_too_late(age, deadline, late):
    """A missed time older than startingDeadlineSeconds is skipped."""
    now = at("2024-01-01T12:00:00+00:00")
    assert cc.too_late(now - dt.timedelta(seconds=age), now, deadline) is late


def test_job_from_template():
    """The Job is named <cronjob>-<minutes>, carries the template's labels/annotations and a controller owner."""
    cj = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick", "namespace": "ns", "uid": "u"},
          "spec": {"jobTemplate": {"metadata": {"labels": {"app": "t"}, "annotations": {"a": "b"}},
                                   "spec": {"backoffLimit": 2}}}}
    scheduled = at("2024-01-01T12:05:00+00:00")
    job = cc.job_from_template(cj, scheduled)
    assert job["metadata"]["name"] == f"tick-{int(scheduled.timestamp()) // 60}" == "tick-28401845"
    assert job["metadata"]["labels"] == {"app": "t"} and job["metadata"]["annotations"]["a"] == "b"
    assert job["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "tick",
                                                   "uid": "u", "controller": True, "blockOwnerDeletion": True}]
    assert job["spec"] == {"backoffLimit": 2}


def finished(name: str, type_: str, minute: int) -> dict:
    scheduled = f"2024-01-01T12:{minute:02d}:00+00:00"
    return {"metadata": {"name": name, "annotations": {cc.SCHEDULED_ANNOTATION: scheduled}},
            "status": {"conditions": [{"type": type_, "status": "True"}]}}


def test_jobs_to_prune():
    """The oldest finished Jobs beyond each limit go; running ones never do."""
    jobs = [finished(f"ok{m}", "Complete", m) for m in (5, 1, 3, 4)] + \
           [finished(f"bad{m}", "Failed", m) for m in (2, 6)] + [{"metadata": {"name": "running"}, "status": {}}]
    doomed = cc.jobs_to_prune(jobs, successful_limit=2, failed_limit=1)
    assert [j["metadata"]["name"] for j in doomed] == ["ok1", "ok3", "bad2"]
    assert cc.jobs_to_prune(jobs, successful_limit=0, failed_limit=0)[-1]["metadata"]["name"] == "bad6"


# -- simulations: the manager, a real store, a fake clock --------------------------------------

class FakeClock:
    """A clock only the test moves."""

    def __init__(self, start: float) -> None:
        self.now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


def hour_after_now() -> float:
    """A whole hour after the real clock: the API stamps creationTimestamp with real time, before it."""
    return math.ceil((time.time() + 120) / 3600) * 3600


@contextlib.contextmanager
def cron_cluster(api, clock: FakeClock):
    from kctl.controllers.manager import ControllerManager

    stop = threading.Event()
    manager = ControllerManager(api, [cc.CronJobController()], leader_election=False, clock=clock)
    manager.start(stop)
    try:
        assert manager.wait_until_running(10)
        yield manager
    finally:
        stop.set()
        manager.stop()


def cronjob(name: str = "tick", schedule: str = "*/10 * * * *", **spec: object) -> dict:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedule": schedule, **spec,
                     "jobTemplate": {"metadata": {"labels": {"app": name}, "annotations": {"team": "x"}},
                                     "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                                         {"name": "c", "image": "busybox"}]}}}}}}


class Sim:
    """Moves the clock one schedule period at a time and looks at the result."""

    def __init__(self, api, manager, clock: FakeClock, name: str = "tick") -> None:
        self.api, self.manager, self.clock, self.name = api, manager, clock, name
        self.rt = api.resource("jobs")

    def tick(self, seconds: float = 600) -> None:
        self.clock.advance(seconds)
        self.poke()

    def poke(self) -> None:
        self.manager.queue("cronjob").add(f"default/{self.name}")

    def jobs(self) -> list[str]:
        items, _ = self.api.list(self.rt, namespace="default")
        return sorted(j["metadata"]["name"] for j in items if not j["metadata"].get("deletionTimestamp"))

    def job_for(self, minutes_after_start: int) -> str:
        return f"{self.name}-{(int(self.start) // 60) + minutes_after_start}"

    start: float = 0.0

    def finish(self, name: str, type_: str = "Complete") -> None:
        job = self.api.get(self.rt, name, namespace="default")
        stamp = dt.datetime.fromtimestamp(self.clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        job["status"] = {"conditions": [{"type": type_, "status": "True", "lastTransitionTime": stamp}],
                         **({"completionTime": stamp} if type_ == "Complete" else {})}
        self.api.update_status(job)

    def cronjob(self) -> dict:
        return self.api.get(self.api.resource("cronjobs"), self.name, namespace="default")

    def wait_jobs(self, want: list[str], what: str) -> None:
        from rollout_harness import wait_for

        wait_for(lambda: self.jobs() == sorted(want), what=f"{what}: jobs {sorted(want)} (have {self.jobs()})")

    def wait_status(self, pred, what: str) -> dict:
        from rollout_harness import wait_for

        return wait_for(lambda: pred(self.cronjob().get("status") or {}) and self.cronjob()["status"], what=what)

    def reasons(self) -> list[str]:
        return [e.get("reason") for e in self.api.list(self.api.resource("events"), namespace="default")[0]]


def settle() -> None:
    """Give the controller time to (wrongly) act before asserting that nothing happened."""
    time.sleep(0.3)


@contextlib.contextmanager
def simulation(api, **spec):
    clock = FakeClock(hour_after_now())
    with cron_cluster(api, clock) as manager:
        sim = Sim(api, manager, clock)
        sim.start = clock()
        api.create(cronjob(**spec))
        yield sim


def test_allow_creates_one_job_per_schedule(api):
    """Allow: each schedule time starts its own Job, named by minute, labelled and owned; status follows."""
    with simulation(api, concurrencyPolicy="Allow") as sim:
        sim.wait_jobs([sim.job_for(0)], "the first tick")
        sim.tick()
        sim.wait_jobs([sim.job_for(0), sim.job_for(10)], "the second tick")
        sim.tick(5 * 60)  # between schedules: nothing new
        settle()
        sim.poke()
        settle()
        assert sim.jobs() == [sim.job_for(0), sim.job_for(10)]
        sim.tick(5 * 60)
        sim.wait_jobs([sim.job_for(0), sim.job_for(10), sim.job_for(20)], "the third tick")
        status = sim.wait_status(lambda s: len(s.get("active") or ()) == 3, "three active")
        assert status["lastScheduleTime"] == dt.datetime.fromtimestamp(sim.start + 1200, UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        job = sim.api.get(sim.rt, sim.job_for(20), namespace="default")
        assert job["metadata"]["labels"] == {"app": "tick"} and job["metadata"]["annotations"]["team"] == "x"
        ref = job["metadata"]["ownerReferences"][0]
        assert ref["kind"] == "CronJob" and ref["name"] == "tick" and ref["controller"] is True
        sim.finish(sim.job_for(0))
        status = sim.wait_status(lambda s: len(s.get("active") or ()) == 2 and s.get("lastSuccessfulTime"),
                                 "the finished job leaves status.active")
        assert {r["name"] for r in status["active"]} == {sim.job_for(10), sim.job_for(20)}
        from rollout_harness import wait_for  # events are recorded after the status write: wait for them

        wait_for(lambda: {"SuccessfulCreate", "SawCompletedJob"} <= set(sim.reasons()),
                 what="the events SuccessfulCreate and SawCompletedJob")


def test_forbid_skips_while_a_job_is_active(api):
    """Forbid: no new Job while one runs; once it finished, the next schedule time starts one."""
    with simulation(api, concurrencyPolicy="Forbid", startingDeadlineSeconds=60) as sim:
        sim.wait_jobs([sim.job_for(0)], "the first tick")
        sim.tick()
        from rollout_harness import wait_for

        wait_for(lambda: "JobAlreadyActive" in sim.reasons(), what="the JobAlreadyActive event")
        assert sim.jobs() == [sim.job_for(0)]
        sim.clock.advance(120)  # the :10 run is now older than startingDeadlineSeconds
        sim.finish(sim.job_for(0))
        sim.wait_status(lambda s: not s.get("active"), "no active job")
        wait_for(lambda: "MissSchedule" in sim.reasons(), what="the MissSchedule event")
        assert sim.jobs() == [sim.job_for(0)]
        sim.tick(480)
        sim.wait_jobs([sim.job_for(0), sim.job_for(20)], "the :20 tick starts a job")


def test_replace_deletes_the_active_job(api):
    """Replace: the running Job is deleted and the new one started."""
    with simulation(api, concurrencyPolicy="Replace") as sim:
        sim.wait_jobs([sim.job_for(0)], "the first tick")
        sim.tick()
        sim.wait_jobs([sim.job_for(10)], "the second tick replaces the first")
        sim.tick()
        sim.wait_jobs([sim.job_for(20)], "the third tick replaces the second")
        status = sim.wait_status(lambda s: [r["name"] for r in s.get("active") or ()] == [sim.job_for(20)],
                                 "only the newest is active")
        assert status["active"][0]["kind"] == "Job"
        assert "SuccessfulDelete" in sim.reasons()


def test_history_limits_prune_finished_jobs(api):
    """Only the newest 2 successful and 1 failed finished Jobs are kept."""
    outcomes = ["Complete", "Failed", "Complete", "Failed", "Complete"]
    with simulation(api, successfulJobsHistoryLimit=2, failedJobsHistoryLimit=1) as sim:
        kept: dict[str, str] = {}
        for i, type_ in enumerate(outcomes):
            if i:
                sim.tick()
            name = sim.job_for(10 * i)
            sim.wait_jobs([*kept, name], f"tick {i}")
            sim.finish(name, type_)
            kept[name] = type_
            sim.wait_status(lambda s: not s.get("active"), f"job {i} finished")
            sim.poke()
            kept = {n: t for t in ("Complete", "Failed")
                    for n in [n for n, t2 in kept.items() if t2 == t][-(2 if t == "Complete" else 1):]}
            sim.wait_jobs(list(kept), f"pruned after tick {i}")
        assert sorted(kept) == sorted([sim.job_for(20), sim.job_for(30), sim.job_for(40)])
        assert "SuccessfulDelete" in sim.reasons()


def test_suspend_starts_nothing(api):
    """A suspended CronJob starts no Job however many schedule times pass."""
    with simulation(api, suspend=True) as sim:
        sim.poke()
        sim.tick()
        sim.tick()
        settle()
        assert sim.jobs() == []
