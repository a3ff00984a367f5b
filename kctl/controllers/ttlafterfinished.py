"""The TTL-after-finished controller: deletes finished Jobs `spec.ttlSecondsAfterFinished` later.

Run by the controller manager in `kctl daemon` (wired in kctl/daemon/controlplane.py);
written after Kubernetes' pkg/controller/ttlafterfinished. A Job is queued when it is seen
finished (a Complete or Failed condition with status True) with ttlSecondsAfterFinished
set. Its reconcile works out when the Job expires: its finish time (status.completionTime,
else the finished condition's lastTransitionTime) plus the TTL. Before then it asks to be
called again when due (no polling). Once due it reads the Job afresh from the API (the
cache may be stale, the TTL may have changed) and, if it still expires, deletes it with
propagationPolicy Background and the resourceVersion it judged: the garbage collector
then removes its pods. A Job changed in between is a Conflict and is judged again.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

from kctl.machinery.errors import Conflict, NotFound
from kctl.machinery.times import parse_time
from kctl.controllers.base import clock_now, key_of, split_key

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.ttlafterfinished")


def finished_at(job: dict) -> dt.datetime | None:
    """When a Job finished: completionTime, else its Complete/Failed condition's transition; None if running."""
    status = job.get("status") or {}
    for cond in status.get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return parse_time(status.get("completionTime")) or parse_time(cond.get("lastTransitionTime"))
    return None


def needs_cleanup(job: dict) -> bool:
    """The Job has a TTL, has finished, and is not already being deleted."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    return (ttl is not None and not (job.get("metadata") or {}).get("deletionTimestamp")
            and finished_at(job) is not None)


def seconds_left(job: dict, now: dt.datetime) -> float | None:
    """Seconds until a finished Job with a TTL expires (0 when due); None when it never does."""
    if not needs_cleanup(job):
        return None
    expires = finished_at(job) + dt.timedelta(seconds=int(job["spec"]["ttlSecondsAfterFinished"]))
    return max(0.0, (expires - now).total_seconds())


class TTLAfterFinishedController:
    """Deletes finished Jobs once their ttlSecondsAfterFinished has passed."""

    name = "ttlafterfinished"

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.jobs = ctx.informers.informer("jobs")
        self.jobs.add_handler(self._enqueue, lambda old, new: self._enqueue(new), lambda obj: None)
        self._job_rt = self.api.resource("jobs")

    def object_for(self, key: str) -> dict | None:
        """The cached Job of a key (a permanent failure's Warning Event goes on it)."""
        return self.jobs.get(*split_key(key))

    def _enqueue(self, job: dict) -> None:
        if needs_cleanup(job):
            self.queue.add(key_of(job))

    def reconcile(self, key: str) -> float | None:
        namespace, name = split_key(key)
        job = self.jobs.get(namespace, name)
        if job is None:
            return None
        left = seconds_left(job, clock_now(self.ctx.clock))
        if left is None or left > 0:
            return left
        # due by the cache: check the Job as the API has it now before deleting
        try:
            fresh = self.api.get(self._job_rt, name, namespace=namespace)
        except NotFound:
            return None
        left = seconds_left(fresh, clock_now(self.ctx.clock))
        if left is None or left > 0:
            return left
        try:
            self.api.delete(self._job_rt, name, namespace=namespace, propagation="Background",
                            resource_version=fresh["metadata"].get("resourceVersion"))
        except NotFound:
            return None
        except Conflict:
            return 0.0  # changed meanwhile: judge the newer Job
        log.info("job %s expired %ss after finishing: deleted", key, fresh["spec"]["ttlSecondsAfterFinished"])
        return None


__all__ = ["TTLAfterFinishedController", "finished_at", "needs_cleanup", "seconds_left"]
