"""The scheduling queue: activeQ, backoffQ and the unschedulable pods (kube's PriorityQueue).

The scheduler (kctl.scheduler.scheduler) adds every unassigned pod it is responsible
for and pops one at a time. The rules are kube-scheduler's:

- **activeQ** is ordered by priority (spec.priority, highest first), then by the time
  the pod was queued (PrioritySort). The Priority admission plugin
  (kctl.admission.plugins.priority) has written spec.priority from the pod's
  priorityClassName (or the global default class) when the pod was created; 0 when unset.
- A pod that failed goes to the **unschedulable pods** (it fits nowhere) or, when it
  failed for another reason, or when a cluster event arrived while it was being
  scheduled, to **backoffQ**, which holds it for 1 s, doubling per attempt up to 10 s.
- A **cluster event** (kctl.scheduler.framework.ClusterEvent: a node added, updated or
  freed, a pod deleted) moves the unschedulable pods that a plugin interested in that
  event rejected back to activeQ (or backoffQ while their back-off lasts). A pod left
  unschedulable for 5 minutes is retried anyway.
- Pods with spec.schedulingGates wait, untried, until an update removes the gates.

Nothing polls: `pop` sleeps on a condition until a pod is added or moved, or until the
next back-off expiry or unschedulable timeout is due.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from dataclasses import dataclass
from typing import Callable

from kctl.scheduler.framework import ClusterEvent
from kctl.scheduler.nodeinfo import PodInfo, PodKey


@dataclass(frozen=True)
class QueueSettings:
    """Back-off and retry times, in seconds (kube's podInitialBackoffSeconds ...)."""

    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    #: a pod unschedulable this long is tried again without any event
    unschedulable_timeout: float = 300.0


class QueuedPodInfo:
    """A pod in the queue and its scheduling history (kube's QueuedPodInfo)."""

    __slots__ = ("pod_info", "timestamp", "initial_attempt_timestamp", "attempts", "unschedulable_plugins",
                 "events", "cycle")

    def __init__(self, pod_info: PodInfo, now: float) -> None:
        self.pod_info = pod_info
        self.timestamp = now
        self.initial_attempt_timestamp: float | None = None
        self.attempts = 0
        self.unschedulable_plugins: set[str] = set()
        #: the events that may make it schedulable (None: any)
        self.events: frozenset[ClusterEvent] | None = None
        self.cycle = 0

    @property
    def key(self) -> PodKey:
        return self.pod_info.key

    def __repr__(self) -> str:
        return f"QueuedPodInfo({self.key}, attempts={self.attempts})"


def pod_changed(old: PodInfo, new: PodInfo) -> bool:
    """Whether an update may change where the pod fits: anything but status and bookkeeping."""
    a, b = old.pod, new.pod
    if a.get("spec") != b.get("spec"):
        return True
    ma, mb = a.get("metadata") or {}, b.get("metadata") or {}
    return ma.get("labels") != mb.get("labels") or ma.get("annotations") != mb.get("annotations")


def is_gated(pi: PodInfo) -> bool:
    return bool((pi.pod.get("spec") or {}).get("schedulingGates"))


EventsOf = Callable[[QueuedPodInfo, str], frozenset[ClusterEvent]]


class SchedulingQueue:
    """activeQ + backoffQ + unschedulable pods, safe to use from several threads."""

    def __init__(self, *, settings: QueueSettings | None = None, clock: Callable[[], float] = time.monotonic,
                 events_of: EventsOf | None = None) -> None:
        self.settings = settings or QueueSettings()
        self._clock = clock
        self._events_of = events_of
        self._cond = threading.Condition()
        self._seq = itertools.count()
        # heaps of (sort key..., seq, key); an entry is live while its seq is the pod's seq
        self._active_heap: list[tuple[int, float, int, PodKey]] = []
        self._active: dict[PodKey, tuple[int, QueuedPodInfo]] = {}
        self._backoff_heap: list[tuple[float, int, PodKey]] = []
        self._backoff: dict[PodKey, tuple[int, QueuedPodInfo]] = {}
        self._unschedulable: dict[PodKey, QueuedPodInfo] = {}
        self._timeout_heap: list[tuple[float, int, PodKey]] = []
        self._unsched_seq: dict[PodKey, int] = {}
        self._gated: dict[PodKey, QueuedPodInfo] = {}
        # popped and not yet back: key -> latest PodInfo (None: deleted meanwhile)
        self._in_flight: dict[PodKey, PodInfo | None] = {}
        self._scheduling_cycle = 0
        self._move_request_cycle = -1
        self._closed = False

    # -- lengths, for tests and metrics ---------------------------------------------------

    def lengths(self) -> dict[str, int]:
        with self._cond:
            return {"active": len(self._active), "backoff": len(self._backoff),
                    "unschedulable": len(self._unschedulable), "gated": len(self._gated),
                    "in_flight": len(self._in_flight)}

    def where(self, key: str) -> str | None:
        """Which part of the queue holds a pod ("active", "backoff", "unschedulable", "gated", "in_flight")."""
        with self._cond:
            for name, part in (("active", self._active), ("backoff", self._backoff),
                               ("unschedulable", self._unschedulable), ("gated", self._gated),
                               ("in_flight", self._in_flight)):
                if key in part:
                    return name
            return None

    @property
    def scheduling_cycle(self) -> int:
        return self._scheduling_cycle

    # -- back-off ----------------------------------------------------------------------

    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        """initial x 2^(attempts-1), at most max (kube's calculateBackoffDuration)."""
        s = self.settings
        duration = s.initial_backoff
        for _ in range(1, qpi.attempts):
            duration *= 2
            if duration > s.max_backoff:
                return s.max_backoff
        return min(duration, s.max_backoff)

    def _backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        return qpi.timestamp + self.backoff_duration(qpi)

    def _backing_off(self, qpi: QueuedPodInfo, now: float) -> bool:
        return qpi.attempts > 0 and self._backoff_expiry(qpi) > now

    # -- putting pods in (caller holds the lock) -----------------------------------------

    def _push_active(self, qpi: QueuedPodInfo) -> None:
        seq = next(self._seq)
        self._active[qpi.key] = (seq, qpi)
        heapq.heappush(self._active_heap, (-qpi.pod_info.priority, qpi.timestamp, seq, qpi.key))
        self._cond.notify_all()

    def _push_backoff(self, qpi: QueuedPodInfo) -> None:
        seq = next(self._seq)
        self._backoff[qpi.key] = (seq, qpi)
        heapq.heappush(self._backoff_heap, (self._backoff_expiry(qpi), seq, qpi.key))
        self._cond.notify_all()

    def _push_unschedulable(self, qpi: QueuedPodInfo) -> None:
        seq = next(self._seq)
        self._unschedulable[qpi.key] = qpi
        self._unsched_seq[qpi.key] = seq
        heapq.heappush(self._timeout_heap, (qpi.timestamp + self.settings.unschedulable_timeout, seq, qpi.key))
        self._cond.notify_all()

    def _remove(self, key: PodKey) -> QueuedPodInfo | None:
        """Take a pod out of whichever part holds it (heap entries go stale)."""
        entry = self._active.pop(key, None) or self._backoff.pop(key, None)
        if entry is not None:
            return entry[1]
        qpi = self._unschedulable.pop(key, None)
        if qpi is not None:
            self._unsched_seq.pop(key, None)
            return qpi
        return self._gated.pop(key, None)

    def _requeue(self, qpi: QueuedPodInfo, now: float) -> str:
        if self._backing_off(qpi, now):
            self._push_backoff(qpi)
            return "backoff"
        self._push_active(qpi)
        return "active"

    # -- informer-side calls --------------------------------------------------------------

    def add(self, pi: PodInfo) -> None:
        """A new unassigned pod (or one seen again after a re-list): to activeQ."""
        with self._cond:
            if self._closed:
                return
            if pi.key in self._in_flight:
                self._in_flight[pi.key] = pi
                return
            old = self._remove(pi.key)
            qpi = old or QueuedPodInfo(pi, self._clock())
            qpi.pod_info = pi
            if is_gated(pi):
                self._gated[pi.key] = qpi
                return
            if old is not None and old.attempts:
                self._requeue(qpi, self._clock())
            else:
                self._push_active(qpi)

    def update(self, pi: PodInfo) -> None:
        """An unassigned pod changed: a real change (not status) retries it at once."""
        with self._cond:
            if self._closed:
                return
            key = pi.key
            if key in self._in_flight:
                self._in_flight[key] = pi
                return
            now = self._clock()
            if key in self._gated:
                qpi = self._gated.pop(key)
                qpi.pod_info = pi
                if is_gated(pi):
                    self._gated[key] = qpi
                else:
                    qpi.timestamp = now
                    self._push_active(qpi)
                return
            if key in self._active or key in self._backoff:
                push = self._push_active if key in self._active else self._push_backoff
                qpi = self._remove(key)
                qpi.pod_info = pi
                push(qpi)
                return
            qpi = self._unschedulable.get(key)
            if qpi is not None:
                changed = pod_changed(qpi.pod_info, pi)
                qpi.pod_info = pi
                if changed:
                    self._remove(key)
                    self._requeue(qpi, now)
                return
        self.add(pi)

    def delete(self, key: str) -> None:
        with self._cond:
            self._remove(PodKey(key))
            if key in self._in_flight:
                self._in_flight[PodKey(key)] = None

    # -- the scheduling loop's calls ------------------------------------------------------

    def pop(self, *, stop: threading.Event | None = None, timeout: float | None = None) -> QueuedPodInfo | None:
        """The highest-priority pod of activeQ; waits for one (None on stop, close or timeout)."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                if self._closed or (stop is not None and stop.is_set()):
                    return None
                now = self._clock()
                self._flush(now)
                while self._active_heap:
                    _, _, seq, key = heapq.heappop(self._active_heap)
                    entry = self._active.get(key)
                    if entry is None or entry[0] != seq:
                        continue
                    del self._active[key]
                    qpi = entry[1]
                    qpi.attempts += 1
                    if qpi.initial_attempt_timestamp is None:
                        qpi.initial_attempt_timestamp = now
                    self._scheduling_cycle += 1
                    qpi.cycle = self._scheduling_cycle
                    self._in_flight[key] = qpi.pod_info
                    return qpi
                wake = self._next_due()
                if deadline is not None:
                    if now >= deadline:
                        return None
                    wake = deadline if wake is None else min(wake, deadline)
                # A stop event cannot notify this condition: look at it at least every 0.5 s.
                wait = 0.5 if wake is None else max(0.0, min(wake - now, 0.5))
                self._cond.wait(wait)

    def _next_due(self) -> float | None:
        times = []
        if self._backoff_heap:
            times.append(self._backoff_heap[0][0])
        if self._timeout_heap:
            times.append(self._timeout_heap[0][0])
        return min(times) if times else None

    def _flush(self, now: float) -> None:
        """Back-offs that ended -> activeQ; pods unschedulable too long -> retried."""
        heap = self._backoff_heap
        while heap and heap[0][0] <= now:
            _, seq, key = heapq.heappop(heap)
            entry = self._backoff.get(key)
            if entry is None or entry[0] != seq:
                continue
            del self._backoff[key]
            self._push_active(entry[1])
        heap = self._timeout_heap
        while heap and heap[0][0] <= now:
            _, seq, key = heapq.heappop(heap)
            if self._unsched_seq.get(key) != seq:
                continue
            qpi = self._remove(key)
            if qpi is not None:
                self._requeue(qpi, now)

    def done(self, key: str) -> None:
        """The pod's attempt ended with it bound (or given up): it is no longer in flight."""
        with self._cond:
            self._in_flight.pop(PodKey(key), None)

    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo, *, unschedulable: bool) -> str | None:
        """Put back a pod whose attempt failed; returns where it went (None: dropped).

        An unschedulable pod waits for a cluster event, unless one arrived during its
        attempt (then it backs off); any other failure backs off. A pod deleted or bound
        meanwhile is dropped; one updated meanwhile is retried with its new spec.
        """
        with self._cond:
            key = qpi.key
            if key in self._in_flight:
                latest = self._in_flight.pop(key)
                if latest is None:
                    return None
                changed = pod_changed(qpi.pod_info, latest)
                qpi.pod_info = latest
            else:
                changed = False
            if self._closed or key in self._active or key in self._backoff or key in self._unschedulable:
                return None
            now = self._clock()
            qpi.timestamp = now
            if is_gated(qpi.pod_info):
                self._gated[key] = qpi
                return "gated"
            if changed:
                return self._requeue(qpi, now)
            if unschedulable and self._move_request_cycle < qpi.cycle:
                qpi.events = self._events_for(qpi)
                self._push_unschedulable(qpi)
                return "unschedulable"
            self._push_backoff(qpi)
            return "backoff"

    def _events_for(self, qpi: QueuedPodInfo) -> frozenset[ClusterEvent] | None:
        if not qpi.unschedulable_plugins or self._events_of is None:
            return None
        events: set[ClusterEvent] = {ClusterEvent.UNSCHEDULABLE_TIMEOUT, ClusterEvent.FORCE_ACTIVATE}
        for plugin in qpi.unschedulable_plugins:
            events |= self._events_of(qpi, plugin)
        return frozenset(events)

    def move_all_on_event(self, event: ClusterEvent) -> int:
        """A cluster event: unschedulable pods it may help go back to be tried; returns how many."""
        with self._cond:
            self._move_request_cycle = self._scheduling_cycle
            if not self._unschedulable:
                return 0
            now = self._clock()
            moved = [qpi for qpi in self._unschedulable.values() if qpi.events is None or event in qpi.events]
            for qpi in moved:
                self._remove(qpi.key)
                self._requeue(qpi, now)
            return len(moved)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


__all__ = ["QueueSettings", "QueuedPodInfo", "SchedulingQueue", "is_gated", "pod_changed"]
