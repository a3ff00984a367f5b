"""The binding cycle, off the scheduling loop: one worker thread that writes to the API.

The scheduler (kctl.scheduler.scheduler) hands each assumed pod here and goes on with
the next pod at once, as kube-scheduler runs each binding cycle in its own goroutine.
The worker drains everything that is ready and, for each batch:

- waits on Permit for held pods (in a thread of their own, so others are not held up),
  runs PreBind, then Bind for the whole batch: DefaultBinder writes every binding in
  one store transaction (APIServer.bind_all), which is what makes hundreds of pods per
  second possible on SQLite;
- on success, tells the cache the binding finished and writes the "Scheduled" Events
  (one more transaction for the batch);
- on failure, calls back the scheduler (unreserve, forget, re-queue).

It also writes what the scheduling loop decided about pods that fit nowhere (the
PodScheduled=False condition, a read-modify-write retried on Conflict by
kctl.client.retry.retry_on_conflict, and the FailedScheduling Event), so the loop never
waits for the store.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from kctl.client import events
from kctl.client.retry import retry_on_conflict
from kctl.machinery.errors import APIError, Conflict, NotFound
from kctl.scheduler.framework import CycleState, Framework, Status
from kctl.scheduler.queue import QueuedPodInfo

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.scheduler.binder")

#: at most this many bindings in one transaction
DEFAULT_BATCH = 500


@dataclass
class BindJob:
    """An assumed pod waiting for its binding cycle."""

    framework: Framework
    state: CycleState
    qpi: QueuedPodInfo
    node_name: str
    waiting: bool = False  # Permit said Wait


@dataclass
class FailureJob:
    """What to write about a pod that could not be scheduled."""

    pod: dict
    reason: str  # the PodScheduled condition's reason: Unschedulable | SchedulerError
    message: str


BindDone = Callable[[BindJob, Status | None], None]


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class BindWorker:
    """A thread that runs binding cycles in batches and writes scheduling failures."""

    def __init__(self, api: API | None, *, on_done: BindDone, component: str = "default-scheduler",
                 batch: int = DEFAULT_BATCH, record_events: bool = True) -> None:
        self.api = api
        self.on_done = on_done
        self.component = component
        self.batch = batch
        self.record_events = record_events
        self._jobs: deque[BindJob | FailureJob] = deque()
        self._cond = threading.Condition()
        self._busy = False
        self._closed = False
        self._names = itertools.count()
        self.bound = 0
        self.batches = 0

    def submit(self, job: BindJob | FailureJob) -> None:
        with self._cond:
            self._jobs.append(job)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def idle(self) -> bool:
        with self._cond:
            return not self._jobs and not self._busy

    def wait_idle(self, timeout: float) -> bool:
        """Block until no job is queued or running (tests and benchmarks)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._jobs or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
            return True

    def run(self) -> None:
        """Work until closed (finishing what was submitted first)."""
        while True:
            with self._cond:
                while not self._jobs and not self._closed:
                    self._cond.wait()
                if not self._jobs and self._closed:
                    return
                jobs = [self._jobs.popleft() for _ in range(min(len(self._jobs), self.batch))]
                self._busy = True
            try:
                self.process(jobs)
            except Exception:
                log.exception("bind worker: a batch failed")
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def drain(self) -> None:
        """Process everything queued now, in this thread (tests without the worker thread)."""
        while True:
            with self._cond:
                if not self._jobs:
                    return
                jobs = [self._jobs.popleft() for _ in range(min(len(self._jobs), self.batch))]
            self.process(jobs)

    # -- one batch ----------------------------------------------------------------------

    def process(self, jobs: list[BindJob | FailureJob]) -> None:
        ready: list[BindJob] = []
        for job in jobs:
            if isinstance(job, FailureJob):
                self.write_failure(job)
            elif job.waiting:
                threading.Thread(target=self._wait_permit, args=(job,), name="kctl-permit", daemon=True).start()
            else:
                status = job.framework.run_pre_bind(job.state, job.qpi.pod_info, job.node_name)
                if status is not None:
                    self.on_done(job, status)
                else:
                    ready.append(job)
        by_framework: dict[int, list[BindJob]] = {}
        for job in ready:
            by_framework.setdefault(id(job.framework), []).append(job)
        bound: list[BindJob] = []
        for group in by_framework.values():
            fwk = group[0].framework
            results = fwk.run_bind_all([(j.state, j.qpi.pod_info, j.node_name) for j in group])
            self.batches += 1
            for job, status in zip(group, results):
                if status is None:
                    bound.append(job)
                    fwk.run_post_bind(job.state, job.qpi.pod_info, job.node_name)
                self.on_done(job, status)
        self.bound += len(bound)
        if bound and self.record_events:
            self._scheduled_events(bound)

    def _wait_permit(self, job: BindJob) -> None:
        status = job.framework.wait_on_permit(job.qpi.pod_info)
        if status is not None:
            self.on_done(job, status)
            return
        job.waiting = False
        self.submit(job)

    # -- API writes ---------------------------------------------------------------------

    def _scheduled_events(self, jobs: list[BindJob]) -> None:
        """One "Scheduled" Event per bound pod, all in one transaction (best effort)."""
        if self.api is None:
            return
        now = _now()
        ops = []
        for job in jobs:
            pi = job.qpi.pod_info
            message = f"Successfully assigned {pi.namespace}/{pi.name} to {job.node_name}"
            ops.append(("create", {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"namespace": pi.namespace, "name": f"{pi.name}.{time.time_ns():x}{next(self._names):x}"},
                "involvedObject": events.involved_reference(pi.pod),
                "reason": "Scheduled", "message": message, "type": "Normal",
                "source": {"component": self.component}, "reportingComponent": self.component,
                "reportingInstance": "", "firstTimestamp": now, "lastTimestamp": now, "count": 1}))
        try:
            for result in self.api.write_all(ops):
                if result.error is not None:
                    log.debug("Scheduled event not written: %s", result.error)
        except APIError as exc:
            log.warning("cannot write Scheduled events: %s", exc)

    def write_failure(self, job: FailureJob) -> None:
        """PodScheduled=False with the reason and message (if changed), and a FailedScheduling Event."""
        if self.api is None:
            return
        meta = job.pod.get("metadata") or {}
        rt = self.api.resource("pods")

        def attempt() -> dict | None:
            """Read the pod, write the condition if it changed; None when the failure is stale."""
            try:
                pod = self.api.get(rt, meta.get("name", ""), namespace=meta.get("namespace"))
            except NotFound:
                return None
            if (pod.get("spec") or {}).get("nodeName") or pod["metadata"].get("uid") != meta.get("uid"):
                return None  # bound or replaced meanwhile: the failure is stale
            status = pod.setdefault("status", {})
            conditions = status.get("conditions") or []
            current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
            if current and current.get("status") == "False" and current.get("reason") == job.reason \
                    and current.get("message") == job.message:
                return pod
            condition = {"type": "PodScheduled", "status": "False", "reason": job.reason, "message": job.message,
                         "lastTransitionTime": current.get("lastTransitionTime")
                         if current and current.get("status") == "False" else _now()}
            status["conditions"] = [c for c in conditions if c.get("type") != "PodScheduled"] + [condition]
            status.setdefault("phase", "Pending")
            try:
                return self.api.update_status(pod)
            except Conflict:
                raise
            except APIError as exc:
                log.warning("cannot write the scheduling failure of %s/%s: %s", meta.get("namespace"),
                            meta.get("name"), exc)
                return pod

        try:
            pod = retry_on_conflict(attempt)
        except Conflict:
            log.warning("cannot write the scheduling failure of %s/%s: it kept conflicting", meta.get("namespace"),
                        meta.get("name"))
            return
        if pod is not None:
            events.record(self.api, pod, type="Warning", reason="FailedScheduling", message=job.message,
                          component=self.component)


__all__ = ["BindJob", "BindWorker", "FailureJob"]
