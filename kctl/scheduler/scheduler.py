"""The scheduler: watch pods and nodes, pick a node for each unassigned pod, bind it.

Run by `kctl daemon` as `Scheduler(api, ...).run(stop_event)`. As kube-scheduler's
schedule_one.go, for each pod popped from the queue (kctl.scheduler.queue):

1. refresh the snapshot of the cache (kctl.scheduler.cache; only changed nodes copied);
2. PreFilter, then Filter nodes in turn (starting where the previous pod stopped) until
   enough feasible nodes are found: kube-scheduler's adaptive percentageOfNodesToScore
   (all nodes below 100; else 50% - nodes/125, at least 5%, at least 100 nodes);
3. none fits: PostFilter (preemption), then the pod waits in the queue for a cluster
   event, with PodScheduled=False ("0/3 nodes are available: ...") and a
   FailedScheduling Event written by the bind worker;
4. PreScore and Score the feasible nodes, pick the best (ties at random);
5. assume the pod on that node in the cache, Reserve, Permit, and hand it to the bind
   worker (kctl.scheduler.binder), which binds in batches; a failed binding is
   unreserved, forgotten and re-queued with back-off.

Pods whose spec.schedulerName names none of the configured profiles are left alone.
The scheduler is fed by the `nodes` and `pods` informers of kctl.client.informer (and the
PVC, PV and StorageClass ones the volume plugins read, whose changes are cluster events): those of
the InformerFactory it is given (`informers=`, the daemon's, shared with the controllers),
or else of a factory of its own, which `run` starts and stops.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from kctl.scheduler.binder import DEFAULT_BATCH, BindJob, BindWorker, FailureJob
from kctl.scheduler.cache import DEFAULT_ASSUMED_TTL, SchedulerCache, is_terminal
from kctl.scheduler.config import SchedulerConfig, build_framework
from kctl.scheduler.framework import (ClusterEvent, Code, CycleState, Diagnosis, FitError, Framework, Handle,
                                      Status, WAIT)
from kctl.scheduler.nodeinfo import USAGE_GROUPS, NodeInfo, PodInfo, Snapshot, pod_key
from kctl.scheduler.queue import QueuedPodInfo, SchedulingQueue

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.client.informer import InformerFactory

log = logging.getLogger("kctl.scheduler")

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODES = "no nodes available to schedule pods"
#: the storage informers the volume plugins read, and the cluster events of their adds/updates
STORAGE_EVENTS = (("persistentvolumeclaims", ClusterEvent.PVC_ADD, ClusterEvent.PVC_UPDATE),
                  ("persistentvolumes", ClusterEvent.PV_ADD, ClusterEvent.PV_UPDATE),
                  ("storageclasses", ClusterEvent.STORAGE_CLASS_ADD, ClusterEvent.STORAGE_CLASS_UPDATE))


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """How many feasible nodes to look for before scoring (kube's numFeasibleNodesToFind)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if not percentage:
        percentage = 50 - num_all_nodes // 125
        if percentage < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            percentage = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    if percentage >= 100:
        return num_all_nodes
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def node_update_events(old: dict, new: dict) -> list[ClusterEvent]:
    """The cluster events a Node update stands for (none for a heartbeat)."""
    o_meta, n_meta = old.get("metadata") or {}, new.get("metadata") or {}
    o_spec, n_spec = old.get("spec") or {}, new.get("spec") or {}
    o_status, n_status = old.get("status") or {}, new.get("status") or {}
    events = []
    if (o_status.get("allocatable") or o_status.get("capacity")) != (n_status.get("allocatable")
                                                                      or n_status.get("capacity")):
        events.append(ClusterEvent.NODE_ALLOCATABLE_CHANGE)
    if o_meta.get("labels") != n_meta.get("labels"):
        events.append(ClusterEvent.NODE_LABEL_CHANGE)
    if o_spec.get("taints") != n_spec.get("taints") or bool(o_spec.get("unschedulable")) != bool(
            n_spec.get("unschedulable")):
        events.append(ClusterEvent.NODE_TAINT_CHANGE)

    def conditions(status: dict) -> list[tuple]:
        return sorted((c.get("type"), c.get("status")) for c in status.get("conditions") or ())

    if conditions(o_status) != conditions(n_status):
        events.append(ClusterEvent.NODE_CONDITION_CHANGE)
    return events


def preemption_message(num_all_nodes: int, diagnosis: Diagnosis, status: Status) -> str:
    """What PostFilter adds when preemption found nothing, in kube-scheduler's words.

    "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No
    preemption victims found for incoming pod" (nodes rejected as unresolvable cannot be
    helped by evicting anything).
    """
    reason = status.message().rstrip(".")
    if not reason.startswith("No preemption victims"):
        return f"preemption: {reason}"
    hopeless = sum(1 for s in diagnosis.node_to_status.values() if s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    others = len(diagnosis.node_to_status) - hopeless
    parts = []
    if hopeless:
        parts.append(f"{hopeless} Preemption is not helpful for scheduling")
    if others:
        parts.append(f"{others} {reason}")
    return f"preemption: 0/{num_all_nodes} nodes are available: {', '.join(sorted(parts))}"


@dataclass(frozen=True)
class SchedulerSettings:
    """How the scheduler runs (the config file says what it decides)."""

    component: str = "default-scheduler"
    bind_batch: int = DEFAULT_BATCH
    assumed_ttl: float = DEFAULT_ASSUMED_TTL
    #: how often assumed pods whose binding was never seen are looked for
    cleanup_interval: float = 1.0
    record_events: bool = True
    #: seconds to wait for the informers' first list before scheduling
    sync_timeout: float = 60.0


class Scheduler:
    """kube-scheduler for kctl: queue + cache + one Framework per profile + bind worker."""

    def __init__(self, api: API | None, *, config: SchedulerConfig | None = None,
                 settings: SchedulerSettings | None = None, informers: InformerFactory | None = None,
                 registry: dict | None = None, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None) -> None:
        self.api = api
        self.config = config or SchedulerConfig()
        self.settings = settings or SchedulerSettings()
        self.clock = clock
        self.rng = rng or random.Random()
        self.snapshot = Snapshot()
        self.cache = SchedulerCache(assumed_ttl=self.settings.assumed_ttl, clock=clock)
        #: True when the informers are the scheduler's own (started by run), not shared ones
        self.owns_informers = informers is None and api is not None
        if self.owns_informers:
            from kctl.client.informer import InformerFactory

            informers = InformerFactory(api)
        self.informers: InformerFactory | None = informers
        self.profiles: dict[str, Framework] = {}
        for profile in self.config.profiles:
            handle = Handle(api=api, snapshot=self.snapshot, clock=clock, informers=informers)
            self.profiles[profile.scheduler_name] = build_framework(
                profile, handle=handle, registry=registry,
                percentage_of_nodes_to_score=self.config.percentage_of_nodes_to_score)
        self.queue = SchedulingQueue(settings=self.config.queue, clock=clock, events_of=self._events_of)
        self.binder = BindWorker(api, on_done=self._binding_done, component=self.settings.component,
                                 batch=self.settings.bind_batch, record_events=self.settings.record_events)
        self._next_start = 0
        self._lock = threading.Lock()
        self.scheduled = 0
        self.failed = 0
        if informers is not None:
            self._register(informers)

    # -- feeding ------------------------------------------------------------------------

    def _register(self, informers: InformerFactory) -> None:
        informers.informer("nodes").add_handler(self.on_node_add, self.on_node_update, self.on_node_delete)
        informers.informer("pods").add_handler(self.on_pod_add, self.on_pod_update, self.on_pod_delete)
        for resource, added, updated in STORAGE_EVENTS:
            informers.informer(resource).add_handler(
                lambda _obj, e=added: self.queue.move_all_on_event(e),
                lambda old, new, e=updated: self._on_storage_update(old, new, e), None)

    def _on_storage_update(self, old: dict, new: dict, event: ClusterEvent) -> None:
        """A PVC, PV or StorageClass changed (not only its resourceVersion): volume plugins may now say yes."""
        if old.get("spec") != new.get("spec") or old.get("status") != new.get("status") or (
                (old.get("metadata") or {}).get("annotations") != (new.get("metadata") or {}).get("annotations")):
            self.queue.move_all_on_event(event)

    def responsible_for(self, pod: dict) -> bool:
        return ((pod.get("spec") or {}).get("schedulerName") or "default-scheduler") in self.profiles

    def on_node_add(self, node: dict) -> None:
        self.cache.add_node(node)
        self.queue.move_all_on_event(ClusterEvent.NODE_ADD)

    def on_node_update(self, old: dict, new: dict) -> None:
        self.cache.update_node(new)
        for event in node_update_events(old, new):
            self.queue.move_all_on_event(event)

    def on_node_delete(self, node: dict) -> None:
        self.cache.remove_node(node)
        self.queue.move_all_on_event(ClusterEvent.NODE_DELETE)

    def on_pod_add(self, pod: dict) -> None:
        if (pod.get("spec") or {}).get("nodeName"):
            self.cache.add_pod(pod)
            if not is_terminal(pod):
                self.queue.move_all_on_event(ClusterEvent.ASSIGNED_POD_ADD)
        elif self.responsible_for(pod) and not is_terminal(pod) and not (pod.get("metadata") or {}).get(
                "deletionTimestamp"):
            self.queue.add(PodInfo(pod))

    def on_pod_update(self, old: dict, new: dict) -> None:
        if (new.get("spec") or {}).get("nodeName"):
            was_assigned = bool((old.get("spec") or {}).get("nodeName"))
            if not was_assigned:
                self.queue.delete(pod_key(new))  # bound (by us or anyone): no longer to schedule
            self.cache.update_pod(new)
            if is_terminal(new) and not is_terminal(old):
                self.queue.move_all_on_event(ClusterEvent.ASSIGNED_POD_DELETE)
            elif not was_assigned:
                self.queue.move_all_on_event(ClusterEvent.ASSIGNED_POD_ADD)
            elif (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
                self.queue.move_all_on_event(ClusterEvent.ASSIGNED_POD_UPDATE)
            return
        if not self.responsible_for(new) or is_terminal(new) or (new.get("metadata") or {}).get("deletionTimestamp"):
            self.queue.delete(pod_key(new))
            return
        self.queue.update(PodInfo(new))

    def on_pod_delete(self, pod: dict) -> None:
        if (pod.get("spec") or {}).get("nodeName"):
            self.cache.remove_pod(pod)
            self.queue.move_all_on_event(ClusterEvent.ASSIGNED_POD_DELETE)
        else:
            self.queue.delete(pod_key(pod))

    def _events_of(self, qpi: QueuedPodInfo, plugin: str) -> frozenset[ClusterEvent]:
        fwk = self.profiles.get(qpi.pod_info.scheduler_name)
        return fwk.events_of(plugin) if fwk is not None else frozenset(ClusterEvent)

    # -- running ------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Schedule until `stop` is set: its own informers (if not shared), the bind worker, the loop."""
        threads = [threading.Thread(target=self.binder.run, name="kctl-scheduler-bind", daemon=True),
                   threading.Thread(target=self._cleanup, args=(stop,), name="kctl-scheduler-cache", daemon=True),
                   threading.Thread(target=self._closer, args=(stop,), name="kctl-scheduler-stop", daemon=True)]
        for t in threads:
            t.start()
        if self.owns_informers and self.informers is not None:
            self.informers.start(stop)
            threads.extend(i.start(stop) for i in self.informers.informers())  # started: their threads
        if not self._wait_synced(stop):
            log.warning("scheduler: informers not synced after %.0fs; scheduling anyway",
                        self.settings.sync_timeout)
        log.info("scheduler started (profiles: %s)", ", ".join(self.profiles))
        try:
            while not stop.is_set():
                qpi = self.queue.pop(stop=stop)
                if qpi is None:
                    continue
                self.schedule_one(qpi)
        finally:
            self.queue.close()
            self.binder.close()
            for t in threads:
                t.join(timeout=5)
            log.info("scheduler stopped")

    def _wait_synced(self, stop: threading.Event) -> bool:
        if self.informers is None:
            return True
        deadline = time.monotonic() + self.settings.sync_timeout
        informers = [self.informers.informer(r) for r in ("nodes", "pods", *(e[0] for e in STORAGE_EVENTS))]
        while not stop.is_set() and time.monotonic() < deadline:
            if all(i.has_synced() for i in informers):
                return True
            stop.wait(0.05)
        return False

    def _closer(self, stop: threading.Event) -> None:
        stop.wait()
        self.queue.close()

    def _cleanup(self, stop: threading.Event) -> None:
        while not stop.wait(self.settings.cleanup_interval):
            for key in self.cache.cleanup_expired():
                self.queue.move_all_on_event(ClusterEvent.ASSIGNED_POD_DELETE)
                log.info("assumed pod %s expired", key)

    def schedule_pending(self, *, limit: int | None = None) -> int:
        """Schedule every pod in activeQ now, in this thread, then bind them (tests); how many tried."""
        n = 0
        while limit is None or n < limit:
            qpi = self.queue.pop(timeout=0)
            if qpi is None:
                break
            self.schedule_one(qpi)
            n += 1
        self.binder.drain()
        return n

    # -- one pod ------------------------------------------------------------------------

    def schedule_one(self, qpi: QueuedPodInfo) -> None:
        """One scheduling cycle; the binding cycle goes to the bind worker."""
        pi = qpi.pod_info
        fwk = self.profiles.get(pi.scheduler_name)
        if fwk is None or pi.terminating or self.cache.has_pod(pi.key):
            self.queue.done(pi.key)  # not ours, being deleted, or already assumed/bound
            return
        self.cache.update_snapshot(self.snapshot)
        state = CycleState()
        try:
            node_name = self.schedule_pod(fwk, state, pi)
        except FitError as fit:
            self._unschedulable(fwk, state, qpi, fit)
            return
        except _SchedulingError as exc:
            self._fail(qpi, exc.status.message(), reason="SchedulerError", unschedulable=False)
            return
        state.delete(USAGE_GROUPS)  # the filtered nodes' grouping: not for the binding cycle to hold on to
        self.cache.assume_pod(pi, node_name)
        status = fwk.run_reserve(state, pi, node_name)
        if status is None:
            status = fwk.run_permit(state, pi, node_name)
        if status is not None and status.code is not Code.WAIT:
            fwk.run_unreserve(state, pi, node_name)
            self.cache.forget_pod(pi.key)
            qpi.unschedulable_plugins = {status.plugin} if status.plugin else set()
            self._fail(qpi, status.message(), reason="Unschedulable" if status.is_rejected else "SchedulerError",
                       unschedulable=status.is_rejected)
            return
        self.binder.submit(BindJob(fwk, state, qpi, node_name, waiting=status is WAIT or (
            status is not None and status.code is Code.WAIT)))

    def schedule_pod(self, fwk: Framework, state: CycleState, pi: PodInfo) -> str:
        """The node for the pod; FitError when none fits, _SchedulingError on a plugin error."""
        snapshot = self.snapshot
        num_all = len(snapshot)
        if num_all == 0:
            raise FitError(pi, 0, Diagnosis(pre_filter_msg=NO_NODES))
        diagnosis = Diagnosis()
        result, status = fwk.run_pre_filter(state, pi, snapshot)
        if status is not None:
            if status.code is Code.ERROR:
                raise _SchedulingError(status)
            diagnosis.pre_filter_msg = status.message()
            diagnosis.unschedulable_plugins.add(status.plugin)
            raise FitError(pi, num_all, diagnosis)
        nodes = snapshot.node_info_list
        if result is not None and result.node_names is not None:
            nodes = [n for n in nodes if n.name in result.node_names]
            left_out = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                              (f"node(s) didn't satisfy plugin(s) [{', '.join(result.plugins)}]",))
            for n in snapshot.node_info_list:
                if n.name not in result.node_names:
                    diagnosis.node_to_status[n.name] = left_out
            diagnosis.unschedulable_plugins.update(result.plugins)
        feasible = self._find_feasible(fwk, state, pi, nodes, diagnosis)
        if not feasible:
            raise FitError(pi, num_all, diagnosis)
        if len(feasible) == 1:
            return feasible[0].name
        status = fwk.run_pre_score(state, pi, feasible)
        if status is not None:
            raise _SchedulingError(status)
        totals, status = fwk.run_score(state, pi, feasible)
        if status is not None:
            raise _SchedulingError(status)
        return self._select_host(feasible, totals)

    def _find_feasible(self, fwk: Framework, state: CycleState, pi: PodInfo, nodes: list[NodeInfo],
                       diagnosis: Diagnosis) -> list[NodeInfo]:
        n = len(nodes)
        if n == 0:
            return []
        want = num_feasible_nodes_to_find(fwk.percentage_of_nodes_to_score, n)
        start = self._next_start % n
        filters = fwk.active_filters(state)
        if not filters:
            self._next_start = (start + want) % n
            return _window(nodes, start, want)
        feasible: list[NodeInfo] = []
        statuses = diagnosis.node_to_status
        processed = 0
        batches = fwk.batch_filters(state)
        try:
            if batches:
                # Chunks of exactly as many nodes as are still wanted: the same nodes are
                # looked at as one by one (it stops where the sequential search would).
                # Each chunk is sliced from the node list where the search stands (no copy
                # of the whole list per pod).
                while processed < n and len(feasible) < want:
                    candidates = _window(nodes, (start + processed) % n,
                                         min(want - len(feasible), n - processed))
                    processed += len(candidates)
                    for name, batch in batches:
                        results = batch(state, pi, candidates)
                        if not any(results):
                            continue  # every node passed (a success is None)
                        passed = []
                        for node, status in zip(candidates, results):
                            if status is None or not status.code:
                                passed.append(node)
                                continue
                            if status.code is Code.ERROR:
                                raise _SchedulingError(status.with_plugin(name))
                            statuses[node.name] = status
                            diagnosis.unschedulable_plugins.add(name)
                        candidates = passed
                    if feasible:
                        feasible.extend(candidates)
                    else:
                        feasible = candidates  # the same list: the Score plugins reuse its grouping by Usage
            elif len(filters) == 1:
                order = nodes[start:] + nodes[:start] if start else nodes
                name, f = filters[0]
                for node in order:
                    processed += 1
                    status = f(state, pi, node)
                    if status is None or not status.code:
                        feasible.append(node)
                        if len(feasible) >= want:
                            break
                    else:
                        if status.code is Code.ERROR:
                            raise _SchedulingError(status.with_plugin(name))
                        statuses[node.name] = status
                        diagnosis.unschedulable_plugins.add(name)
            else:
                order = nodes[start:] + nodes[:start] if start else nodes
                for node in order:
                    processed += 1
                    for name, f in filters:
                        status = f(state, pi, node)
                        if status is not None and status.code:
                            if status.code is Code.ERROR:
                                raise _SchedulingError(status.with_plugin(name))
                            statuses[node.name] = status
                            diagnosis.unschedulable_plugins.add(name)
                            break
                    else:
                        feasible.append(node)
                        if len(feasible) >= want:
                            break
        except _SchedulingError:
            raise
        except Exception as exc:
            log.exception("a Filter plugin failed")
            raise _SchedulingError(Status(Code.ERROR, (f"running Filter plugins: {exc}",))) from None
        self._next_start = (start + processed) % n
        return feasible

    def _select_host(self, nodes: list[NodeInfo], totals: list[int]) -> str:
        """The highest total; among equals, one at random (kube's reservoir sampling)."""
        best = max(totals)
        ties = [i for i, t in enumerate(totals) if t == best]
        return nodes[ties[0] if len(ties) == 1 else self.rng.choice(ties)].name

    # -- outcomes -----------------------------------------------------------------------

    def _unschedulable(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, fit: FitError) -> None:
        if fwk.has("postFilter") and fit.diagnosis.node_to_status:
            nominated, status = fwk.run_post_filter(state, qpi.pod_info, fit.diagnosis.node_to_status)
            if status is not None and status.message():
                fit.diagnosis.post_filter_msg = preemption_message(fit.num_all_nodes, fit.diagnosis, status)
            if nominated:
                log.info("pod %s nominated to node %s by preemption", qpi.key, nominated)
        qpi.unschedulable_plugins = set(fit.diagnosis.unschedulable_plugins) - {""}
        self._fail(qpi, str(fit), reason="Unschedulable", unschedulable=True)

    def _fail(self, qpi: QueuedPodInfo, message: str, *, reason: str, unschedulable: bool) -> None:
        self.failed += 1
        where = self.queue.add_unschedulable_if_not_present(qpi, unschedulable=unschedulable)
        log.debug("pod %s not scheduled (%s): %s", qpi.key, where, message)
        self.binder.submit(FailureJob(qpi.pod_info.pod, reason, message))

    def _binding_done(self, job: BindJob, status: Status | None) -> None:
        """The bind worker's report: finish the assumption, or undo it and re-queue."""
        pi = job.qpi.pod_info
        if status is None:
            self.cache.finish_binding(pi.key)
            self.queue.done(pi.key)
            with self._lock:
                self.scheduled += 1
            return
        job.framework.run_unreserve(job.state, pi, job.node_name)
        self.cache.forget_pod(pi.key)
        message = status.message()
        if "already assigned" in message or "not found" in message.lower() or "being deleted" in message:
            self.queue.done(pi.key)  # bound by someone else, or gone: nothing to retry
            return
        # The node's resources are free again for the others.
        self.queue.move_all_on_event(ClusterEvent.ASSIGNED_POD_DELETE)
        job.qpi.unschedulable_plugins = set()
        self._fail(job.qpi, f"Binding rejected: {message}", reason="SchedulerError",
                   unschedulable=status.is_rejected)


def _window(nodes: list[NodeInfo], first: int, count: int) -> list[NodeInfo]:
    """`count` nodes from index `first` on, wrapping around the end of the list (count <= len)."""
    end = first + count
    if end <= len(nodes):
        return nodes[first:end]
    return nodes[first:] + nodes[:end - len(nodes)]


class _SchedulingError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


__all__ = ["Scheduler", "SchedulerSettings", "node_update_events", "num_feasible_nodes_to_find", "preemption_message"]
