"""The CronJob controller: creates a batch/v1 Job for each time a CronJob's schedule comes due.

Run by the controller manager (kctl/controllers/manager.py; `controllers()` at the bottom is
what the daemon wires in); written after Kubernetes' pkg/controller/cronjob
(cronjob_controllerv2.go, utils.go). For each CronJob key it:

- re-reads the CronJob from the informer cache (not found is success) and lists the Jobs it
  controls (ownerReference with controller: true and its uid);
- recomputes status.active from the unfinished Jobs (SawCompletedJob when one it listed
  finished) and status.lastSuccessfulTime from the Complete ones;
- deletes the oldest finished Jobs beyond successfulJobsHistoryLimit (default 3) and
  failedJobsHistoryLimit (default 1) (SuccessfulDelete);
- unless suspended, finds the most recent schedule time missed since lastScheduleTime (or
  creation): only that one is run, as Kubernetes; one older than startingDeadlineSeconds
  is skipped (MissSchedule), and more than 100 missed times earn a TooManyMissedTimes
  warning;
- applies concurrencyPolicy: Allow starts the Job, Forbid does not while one is active
  (JobAlreadyActive; the time stays missed, so it still starts when the active Job ends
  within the deadline, as Kubernetes), Replace deletes the active Jobs first;
- creates the Job `<cronjob>-<scheduled unix time in minutes>` from spec.jobTemplate (its
  labels and annotations, a controller ownerReference) and records SuccessfulCreate; the
  name is deterministic, so a stale cache can never start one time twice;
- writes status and returns the seconds until the next schedule time (no polling).

Schedules are croniter's: 5 fields or @yearly/@annually/@monthly/@weekly/@daily/@midnight/
@hourly, in spec.timeZone (zoneinfo; UTC when unset). Not done: "@every <duration>" and
the CRON_TZ= prefix (both refused as an invalid schedule). On a DST spring-forward day a
time that does not exist runs at the first minute after the gap (croniter), where
Kubernetes' robfig/cron skips it. The pure parts (`parse_schedule`, `next_schedule_time`,
`most_recent_missed`, `too_late`, `job_name`, `job_from_template`, `jobs_to_prune`) are
module functions the tests use alone.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kctl.machinery.errors import AlreadyExists, NotFound
from kctl.client.statuswriter import StatusWriter
from kctl.controllers.base import DeferredEvents, controller_ref, key_of, owner_key
from kctl.controllers.job import finished_condition
from kctl.controllers.replicaset import format_time, parse_time, to_datetime

if TYPE_CHECKING:
    from croniter import croniter

    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.cronjob")

DEFAULT_SUCCESSFUL_HISTORY = 3
DEFAULT_FAILED_HISTORY = 1
#: more missed times than this earn a TooManyMissedTimes warning (Kubernetes' 100)
MAX_MISSED = 100
#: the annotation Kubernetes puts on a Job with the time it was scheduled for
SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
_DESCRIPTORS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
#: added to the requeue delay so the next pass lands after, not just before, the schedule time
_REQUEUE_SLACK = 0.1


class InvalidSchedule(ValueError):
    """A schedule or time zone the controller cannot use."""


@dataclass(frozen=True)
class Missed:
    """The most recent schedule time that has come due and not run, and how many did."""

    time: dt.datetime | None
    count: int


# -- pure decisions ---------------------------------------------------------------------------

def zone_of(name: str | None) -> dt.tzinfo:
    """spec.timeZone as a tzinfo (UTC when unset); InvalidSchedule when unknown."""
    if not name:
        return dt.timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidSchedule(f"unknown time zone {name!r}") from exc


def parse_schedule(schedule: str) -> str:
    """The schedule, checked: 5 cron fields or a descriptor such as @hourly; InvalidSchedule otherwise."""
    from croniter import croniter

    text = " ".join(str(schedule or "").split())
    if text.lower() in _DESCRIPTORS:
        return text.lower()
    if len(text.split(" ")) != 5 or not croniter.is_valid(text):
        raise InvalidSchedule(f"invalid schedule {schedule!r}: want 5 cron fields or @hourly, @daily, ...")
    return text


def _iter(schedule: str, start: dt.datetime, zone: dt.tzinfo) -> "croniter":
    from croniter import croniter

    return croniter(parse_schedule(schedule), start.astimezone(zone))


def next_schedule_time(schedule: str, after: dt.datetime, *, time_zone: str | None = None) -> dt.datetime:
    """The first schedule time strictly after `after` (aware, in the schedule's zone)."""
    return _iter(schedule, after, zone_of(time_zone)).get_next(dt.datetime)


def most_recent_missed(schedule: str, earliest: dt.datetime, now: dt.datetime, *,
                       time_zone: str | None = None) -> Missed:
    """The latest schedule time in (earliest, now] and how many there are (counted up to MAX_MISSED + 1)."""
    zone = zone_of(time_zone)
    latest = _iter(schedule, now + dt.timedelta(microseconds=1), zone).get_prev(dt.datetime)
    if latest <= earliest or latest > now:
        return Missed(None, 0)
    it, count = _iter(schedule, earliest, zone), 0
    while count <= MAX_MISSED and it.get_next(dt.datetime) <= latest:
        count += 1
    return Missed(latest, max(count, 1))


def too_late(scheduled: dt.datetime, now: dt.datetime, starting_deadline: int | None) -> bool:
    """A missed time older than startingDeadlineSeconds must not start any more."""
    return starting_deadline is not None and scheduled + dt.timedelta(seconds=int(starting_deadline)) < now


def job_name(cronjob: str, scheduled: dt.datetime) -> str:
    """Kubernetes' Job name: `<cronjob>-<scheduled unix time in minutes>`."""
    return f"{cronjob}-{int(scheduled.timestamp()) // 60}"


def job_from_template(cj: dict, scheduled: dt.datetime) -> dict:
    """The Job for one schedule time: jobTemplate's spec, labels and annotations, a controller owner."""
    template = copy.deepcopy((cj.get("spec") or {}).get("jobTemplate") or {})
    tmeta = template.get("metadata") or {}
    meta = cj["metadata"]
    annotations = dict(tmeta.get("annotations") or {})
    annotations[SCHEDULED_ANNOTATION] = scheduled.isoformat()
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job_name(meta["name"], scheduled), "namespace": meta.get("namespace") or "default",
                         "labels": dict(tmeta.get("labels") or {}), "annotations": annotations,
                         "ownerReferences": [{"apiVersion": cj.get("apiVersion") or "batch/v1", "kind": "CronJob",
                                              "name": meta["name"], "uid": meta["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": template.get("spec") or {}}


def _job_time(job: dict) -> dt.datetime:
    meta = job.get("metadata") or {}
    for text in ((meta.get("annotations") or {}).get(SCHEDULED_ANNOTATION),
                 (job.get("status") or {}).get("startTime"), meta.get("creationTimestamp")):
        when = parse_time(text)
        if when is not None:
            return when
    return dt.datetime.min.replace(tzinfo=dt.timezone.utc)


def jobs_to_prune(jobs: Sequence[dict], *, successful_limit: int, failed_limit: int) -> list[dict]:
    """The oldest finished Jobs beyond the history limits (unfinished ones are never pruned)."""
    doomed: list[dict] = []
    for type_, limit in (("Complete", successful_limit), ("Failed", failed_limit)):
        done = sorted((j for j in jobs if (finished_condition(j) or {}).get("type") == type_),
                      key=lambda j: (_job_time(j), j["metadata"]["name"]))
        doomed += done[:max(0, len(done) - max(0, limit))]
    return doomed


def job_ref(job: dict) -> dict:
    """status.active's ObjectReference to a Job."""
    meta = job["metadata"]
    return {"apiVersion": job.get("apiVersion") or "batch/v1", "kind": "Job", "namespace": meta.get("namespace"),
            "name": meta["name"], "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}


def last_successful(jobs: Sequence[dict], old: str | None) -> str | None:
    """The newest completionTime of the Complete Jobs (never earlier than the old status)."""
    times = [t for t in [parse_time(old)] if t is not None]
    for job in jobs:
        cond = finished_condition(job)
        if cond is not None and cond.get("type") == "Complete":
            when = parse_time((job.get("status") or {}).get("completionTime")) or parse_time(
                cond.get("lastTransitionTime"))
            if when is not None:
                times.append(when)
    return format_time(max(times)) if times else None


# -- the controller ---------------------------------------------------------------------------

class CronJobController:
    """Starts Jobs for batch/v1 CronJobs on their schedules (see module doc)."""

    name = "cronjob"

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.clock: Callable[[], float] = ctx.clock
        self.cronjobs = ctx.informers.informer("cronjobs")
        self.jobs = ctx.informers.informer("jobs")
        self.cronjobs.add_handler(self._enqueue, lambda old, new: self._enqueue(new), self._enqueue)
        self.jobs.add_handler(self._on_job, lambda old, new: self._on_job(new), self._on_job)
        self._job_rt = self.api.resource("jobs")
        self._events = DeferredEvents()
        self._events.recorder = ctx.recorder
        self.status_writer = StatusWriter(self.api)

    def object_for(self, key: str) -> dict | None:
        """The cached CronJob of a key (a permanent failure's Warning Event goes on it)."""
        namespace, _, name = key.rpartition("/")
        return self.cronjobs.get(namespace, name)

    def _enqueue(self, cj: dict) -> None:
        self.queue.add(key_of(cj))

    def _on_job(self, job: dict) -> None:
        key = owner_key(job, "CronJob")
        if key is not None:
            self.queue.add(key)

    # -- reconcile ----------------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        """syncCronJob; Events are recorded after the status write."""
        with self._events.deferred():
            return self._sync(key)

    def _event(self, cj: dict, type_: str, reason: str, message: str) -> None:
        self._events.add(cj, type_, reason, message)

    def _sync(self, key: str) -> float | None:
        namespace, _, name = key.rpartition("/")
        cj = self.cronjobs.get(namespace, name)
        if cj is None or cj["metadata"].get("deletionTimestamp"):
            return None
        spec, old = cj.get("spec") or {}, cj.get("status") or {}
        uid = cj["metadata"]["uid"]
        now = to_datetime(self.clock())
        jobs = [j for j in self.jobs.by_index("owner", uid) if (controller_ref(j) or {}).get("uid") == uid]

        was_active = {ref.get("uid") for ref in old.get("active") or () if isinstance(ref, dict)}
        for job in jobs:
            cond = finished_condition(job)
            if cond is not None and job["metadata"].get("uid") in was_active:
                self._event(cj, "Normal", "SawCompletedJob",
                            f"Saw completed job: {job['metadata']['name']}, status: {cond['type']}")
        status: dict = {k: v for k, v in old.items() if k in ("lastScheduleTime",)}
        success = last_successful(jobs, old.get("lastSuccessfulTime"))
        if success:
            status["lastSuccessfulTime"] = success

        gone = self._prune(cj, spec, jobs)
        active = [j for j in jobs if finished_condition(j) is None and j["metadata"]["uid"] not in gone]

        requeue, created = self._schedule(cj, spec, old, active, now)
        if created is not None:
            job, scheduled = created
            if finished_condition(job) is None and all(j["metadata"]["uid"] != job["metadata"]["uid"] for j in active):
                active.append(job)
            status["lastScheduleTime"] = format_time(scheduled)
        status["active"] = [job_ref(j) for j in sorted(active, key=lambda j: j["metadata"]["name"])]
        if not status["active"]:
            del status["active"]
        self._write_status(cj, status)
        return requeue

    def _prune(self, cj: dict, spec: dict, jobs: Sequence[dict]) -> set[str]:
        """Delete finished Jobs beyond the history limits; the uids deleted."""
        ok = spec.get("successfulJobsHistoryLimit")
        bad = spec.get("failedJobsHistoryLimit")
        doomed = jobs_to_prune(jobs, successful_limit=DEFAULT_SUCCESSFUL_HISTORY if ok is None else int(ok),
                               failed_limit=DEFAULT_FAILED_HISTORY if bad is None else int(bad))
        return {j["metadata"]["uid"] for j in doomed if self._delete_job(cj, j)}

    def _delete_job(self, cj: dict, job: dict) -> bool:
        if job["metadata"].get("deletionTimestamp"):
            return True
        try:
            self.api.delete(self._job_rt, job["metadata"]["name"], namespace=job["metadata"].get("namespace"),
                            propagation="Background")
        except NotFound:
            return True
        self._event(cj, "Normal", "SuccessfulDelete", f"Deleted job {job['metadata']['name']}")
        return True

    def _schedule(self, cj: dict, spec: dict, old: dict, active: list[dict],
                  now: dt.datetime) -> tuple[float | None, tuple[dict, dt.datetime] | None]:
        """Start the due Job if policy allows: (seconds to the next schedule time, (job, time) created)."""
        try:
            zone_name = spec.get("timeZone")
            nxt = next_schedule_time(spec.get("schedule") or "", now, time_zone=zone_name)
        except InvalidSchedule as exc:
            self._event(cj, "Warning", "UnparseableSchedule" if "schedule" in str(exc) else "UnknownTimeZone",
                        str(exc))
            return None, None
        requeue = max(0.0, (nxt - now).total_seconds()) + _REQUEUE_SLACK
        if spec.get("suspend"):
            return requeue, None
        earliest = parse_time(old.get("lastScheduleTime")) or parse_time(cj["metadata"].get("creationTimestamp")) \
            or now
        missed = most_recent_missed(spec["schedule"], earliest, now, time_zone=zone_name)
        if missed.time is None:
            return requeue, None
        if missed.count > MAX_MISSED:
            self._event(cj, "Warning", "TooManyMissedTimes",
                        f"too many missed start times (> {MAX_MISSED}); set or decrease .spec.startingDeadlineSeconds"
                        " or check clock skew")
        scheduled = missed.time
        if too_late(scheduled, now, spec.get("startingDeadlineSeconds")):
            self._event(cj, "Warning", "MissSchedule",
                        f"Missed scheduled time to start a job: {format_time(scheduled)}")
            return requeue, None
        name = job_name(cj["metadata"]["name"], scheduled)
        if any(j["metadata"]["name"] == name for j in active):
            return requeue, None
        policy = spec.get("concurrencyPolicy") or "Allow"
        if policy == "Forbid" and active:
            self._event(cj, "Normal", "JobAlreadyActive",
                        "Not starting job because prior execution is running and concurrency policy is Forbid")
            return requeue, None
        if policy == "Replace":
            for job in list(active):
                self._delete_job(cj, job)
                active.remove(job)
        try:
            job = self.api.create(job_from_template(cj, scheduled))
        except AlreadyExists:
            existing = self.api.get(self._job_rt, name, namespace=cj["metadata"].get("namespace"))
            if (controller_ref(existing) or {}).get("uid") != cj["metadata"]["uid"]:
                self._event(cj, "Warning", "FailedCreate", f"job {name} exists and is not owned by this CronJob")
                return requeue, None
            return requeue, (existing, scheduled)  # an earlier pass created it; a stale cache missed it
        self._event(cj, "Normal", "SuccessfulCreate", f"Created job {name}")
        return requeue, (job, scheduled)

    def _write_status(self, cj: dict, status: dict) -> None:
        """Write status when it changed (on a Conflict onto the CronJob read again)."""
        self.status_writer.write(cj, status)


__all__ = ["CronJobController", "DEFAULT_FAILED_HISTORY", "DEFAULT_SUCCESSFUL_HISTORY", "InvalidSchedule",
           "MAX_MISSED", "Missed", "job_from_template", "job_name", "jobs_to_prune",
           "last_successful", "most_recent_missed", "next_schedule_time", "parse_schedule", "too_late", "zone_of"]
