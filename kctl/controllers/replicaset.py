"""The ReplicaSet controller: keeps `spec.replicas` pods running for each ReplicaSet.

Run by the controller manager in `kctl daemon` (see `controllers()` at the bottom, which
the daemon wires in); written after Kubernetes' pkg/controller/replicaset
(replica_set.go) and pkg/controller/controller_utils.go. For each ReplicaSet key it:

- re-reads the ReplicaSet from the informer cache (not found is success);
- claims pods: adopts orphans in its namespace that match its selector (an
  ownerReference with controller: true and blockOwnerDeletion: true) and releases
  owned pods whose labels stopped matching (ControllerRefManager.ClaimPods);
- when its expectations are satisfied (so a stale cache never makes it act twice),
  creates missing pods in slow-start batches (1, 2, 4, ...; a failing batch stops the
  rest) named `<rs-name>-<5 random chars>` through generateName, or deletes surplus
  pods in one write_all transaction (Kubernetes deletes them in parallel), choosing
  them as Kubernetes does (`pods_to_delete`: unscheduled before
  scheduled, Pending < Unknown < Running, not ready before ready, lower
  pod-deletion-cost first, pods doubled up on a node first, ready for less time first,
  more restarts first, newer first — the two time comparisons on Kubernetes'
  logarithmic scale);
- always recomputes and writes status: replicas, fullyLabeledReplicas, readyReplicas,
  availableReplicas (Ready for minReadySeconds, re-checked by requeueing), the
  ReplicaFailure condition, observedGeneration.

The pure decisions (`pods_to_delete`, `slow_start_batches`, `pod_available`, ...) are
module functions so the Deployment controller and the tests can use them alone.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import logging
import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from kctl.machinery.errors import AlreadyExists, APIError, Conflict, NotFound
from kctl.machinery.selectors import LabelSelector, from_label_selector_object
from kctl.machinery.times import format_time, parse_time, to_datetime
from kctl.client.pods import pod_active, pod_available, pod_ready, pod_ready_since
from kctl.client.claim import ControllerRefManager, owner_reference
from kctl.apiserver.contract import WriteResult
from kctl.controllers.base import DeferredEvents, controller_ref, key_of, owner_key

log = logging.getLogger("kctl.controllers.replicaset")

COMPONENT = "replicaset-controller"
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
#: podPhaseToOrdinal in controller_utils.go (anything else counts as Pending)
_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


@dataclass(frozen=True)
class ReplicaSetSettings:
    """Bounds on one reconcile's work (Kubernetes' BurstReplicas and slow start)."""

    #: most pods created or deleted by one reconcile; the rest on the next pass
    burst_replicas: int = 500
    #: size of the first slow-start batch of creations
    initial_batch: int = 1


# -- pods: pure helpers ---------------------------------------------------------------------

def max_container_restarts(pod: dict) -> int:
    status = pod.get("status") or {}
    counts = [int(c.get("restartCount") or 0)
              for key in ("containerStatuses", "initContainerStatuses")
              for c in status.get(key) or () if isinstance(c, dict)]
    return max(counts, default=0)


def deletion_cost(pod: dict) -> int:
    """The controller.kubernetes.io/pod-deletion-cost annotation (0 when absent or invalid)."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(DELETION_COST_ANNOTATION)
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


def _after_or_zero(t1: dt.datetime | None, t2: dt.datetime | None) -> bool:
    """afterOrZero: a zero time sorts first, then the later time."""
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


def _log_rank(t: dt.datetime, now: dt.datetime) -> int:
    ns = (now - t).total_seconds() * 1e9
    return int(math.log2(ns)) if ns > 0 else -1


def _newer_on_log_scale(t1: dt.datetime | None, t2: dt.datetime | None, now: dt.datetime | None,
                        uid1: str, uid2: str) -> bool:
    """Kubernetes' LogarithmicScaleDown: compare ages in powers of two, then by uid."""
    if now is None or t1 is None or t2 is None:
        return _after_or_zero(t1, t2)
    diff = _log_rank(t1, now) - _log_rank(t2, now)
    if diff == 0:
        return uid1 < uid2
    return diff < 0


def _delete_first(a: tuple[dict, int], b: tuple[dict, int], now: dt.datetime | None) -> bool:
    """ActivePodsWithRanks.Less: should pod a be deleted before pod b?"""
    pa, rank_a = a
    pb, rank_b = b
    na, nb = (pa.get("spec") or {}).get("nodeName") or "", (pb.get("spec") or {}).get("nodeName") or ""
    # 1. unassigned < assigned
    if na != nb and (not na or not nb):
        return not na
    # 2. Pending < Unknown < Running
    oa = _PHASE_ORDINAL.get((pa.get("status") or {}).get("phase") or "", 0)
    ob = _PHASE_ORDINAL.get((pb.get("status") or {}).get("phase") or "", 0)
    if oa != ob:
        return oa < ob
    # 3. not ready < ready
    ra, rb = pod_ready(pa), pod_ready(pb)
    if ra != rb:
        return not ra
    # 4. lower pod-deletion-cost < higher
    ca, cb = deletion_cost(pa), deletion_cost(pb)
    if ca != cb:
        return ca < cb
    # 5. doubled up (more related pods on the same node) < not
    if rank_a != rank_b:
        return rank_a > rank_b
    ua, ub = pa["metadata"].get("uid", ""), pb["metadata"].get("uid", "")
    # 6. ready for less time < more time
    if ra and rb:
        ta, tb = pod_ready_since(pa), pod_ready_since(pb)
        if ta != tb:
            return _newer_on_log_scale(ta, tb, now, ua, ub)
    # 7. more restarts < fewer
    xa, xb = max_container_restarts(pa), max_container_restarts(pb)
    if xa != xb:
        return xa > xb
    # 8. newer < older
    ta, tb = parse_time(pa["metadata"].get("creationTimestamp")), parse_time(pb["metadata"].get("creationTimestamp"))
    if ta != tb:
        return _newer_on_log_scale(ta, tb, now, ua, ub)
    return False


def rank_by_related_pods_on_node(pods: Sequence[dict], related: Iterable[dict]) -> list[int]:
    """getPodsRankedByRelatedPodsOnSameNode: per pod, how many active related pods share its node."""
    per_node: dict[str, int] = {}
    for pod in related:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and pod_active(pod):
            per_node[node] = per_node.get(node, 0) + 1
    return [per_node.get((p.get("spec") or {}).get("nodeName") or "", 0) for p in pods]


def pods_to_delete(pods: Sequence[dict], count: int, *, related: Iterable[dict] | None = None,
                   now: dt.datetime | None = None) -> list[dict]:
    """The `count` pods a ReplicaSet deletes first when scaling down (getPodsToDelete)."""
    if count <= 0:
        return []
    if count >= len(pods):
        return list(pods)
    ranks = rank_by_related_pods_on_node(pods, pods if related is None else related)
    ranked = list(zip(pods, ranks))

    def compare(a: tuple[dict, int], b: tuple[dict, int]) -> int:
        if _delete_first(a, b, now):
            return -1
        if _delete_first(b, a, now):
            return 1
        return 0

    ranked.sort(key=functools.cmp_to_key(compare))
    return [pod for pod, _ in ranked[:count]]


def slow_start_batches(count: int, *, initial: int = 1) -> list[int]:
    """slowStartBatch's batch sizes for `count` creations: initial, 2x, 4x, ... (the last cut)."""
    sizes: list[int] = []
    batch, remaining = max(1, initial), count
    while remaining > 0:
        size = min(batch, remaining)
        sizes.append(size)
        remaining -= size
        batch *= 2
    return sizes


def fully_labeled(pod: dict, template_labels: dict) -> bool:
    """The pod carries every label of the template with the same value."""
    labels = pod["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in template_labels.items())


def pod_from_template(owner: dict, kind: str) -> dict:
    """controller.GetPodFromTemplate: labels, annotations, finalizers and spec of the template."""
    meta = owner["metadata"]
    template = (owner.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    pod_meta: dict = {"generateName": f"{meta['name']}-", "namespace": meta.get("namespace") or "default",
                      "ownerReferences": [owner_reference(owner, kind)]}
    for key in ("labels", "annotations"):
        if tmeta.get(key):
            pod_meta[key] = dict(tmeta[key])
    if tmeta.get("finalizers"):
        pod_meta["finalizers"] = list(tmeta["finalizers"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
            "spec": copy.deepcopy(template.get("spec") or {})}


def replica_set_status(rs: dict, pods: Sequence[dict], now: dt.datetime, *,
                       failure: tuple[str, str] | None = None) -> dict:
    """calculateStatus: the counts over the active pods the ReplicaSet owns, and ReplicaFailure."""
    spec = rs.get("spec") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    old = rs.get("status") or {}
    status: dict = {
        "replicas": len(pods),
        "fullyLabeledReplicas": sum(1 for p in pods if fully_labeled(p, template_labels)),
        "readyReplicas": sum(1 for p in pods if pod_ready(p)),
        "availableReplicas": sum(1 for p in pods if pod_available(p, min_ready, now)),
        "observedGeneration": rs["metadata"].get("generation", 1),
    }
    conditions = [c for c in old.get("conditions") or () if c.get("type") != "ReplicaFailure"]
    current = next((c for c in old.get("conditions") or () if c.get("type") == "ReplicaFailure"), None)
    if failure is not None:
        reason, message = failure
        if current is not None and current.get("reason") == reason and current.get("status") == "True":
            conditions.append(current)
        else:
            conditions.append({"type": "ReplicaFailure", "status": "True", "reason": reason,
                               "message": message, "lastTransitionTime": format_time(now)})
    if conditions:
        status["conditions"] = conditions
    return status


def requeue_for_availability(pods: Sequence[dict], min_ready_seconds: int, now: dt.datetime) -> float | None:
    """Seconds until the first ready-but-not-yet-available pod becomes available."""
    if min_ready_seconds <= 0:
        return None
    waits = []
    for pod in pods:
        since = pod_ready_since(pod)
        if since is not None and not pod_available(pod, min_ready_seconds, now):
            waits.append((since + dt.timedelta(seconds=min_ready_seconds) - now).total_seconds())
    return max(0.0, min(waits)) + 0.05 if waits else None


def selector_of(obj: dict) -> LabelSelector:
    """The object's spec.selector (an Invalid error when malformed)."""
    return from_label_selector_object((obj.get("spec") or {}).get("selector"))


# -- the controller -------------------------------------------------------------------------

class ReplicaSetController:
    """Creates and deletes pods so each ReplicaSet has spec.replicas of them."""

    name = "replicaset"

    def __init__(self, *, settings: ReplicaSetSettings = ReplicaSetSettings()) -> None:
        self.settings = settings
        self._events = DeferredEvents()  # Events of the pass running on this worker

    def register(self, ctx, queue) -> None:
        from kctl.client.expectations import Expectations

        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.clock: Callable[[], float] = ctx.clock
        self.expectations = Expectations(clock=ctx.clock) if _takes_clock(Expectations) else Expectations()
        self.replicasets = ctx.informers.informer("replicasets")
        self.pods = ctx.informers.informer("pods")
        self.replicasets.add_handler(self._enqueue, self._on_rs_update, self._on_rs_delete)
        self.pods.add_handler(self._on_pod_add, self._on_pod_update, self._on_pod_delete)
        self._pod_rt = self.api.resource("pods")
        self._rs_rt = self.api.resource("replicasets")

    # -- event handlers ----------------------------------------------------------------------

    def _enqueue(self, rs: dict) -> None:
        self.queue.add(key_of(rs))

    def _on_rs_update(self, old: dict, new: dict) -> None:
        self._enqueue(new)

    def _on_rs_delete(self, rs: dict) -> None:
        key = key_of(rs)
        self.expectations.delete(key)
        self.queue.add(key)

    def _owner_key(self, pod: dict) -> str | None:
        """The key of the ReplicaSet that controls the pod, if one does and it is cached."""
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return None
        ns = pod["metadata"].get("namespace")
        rs = self.replicasets.get(ns, ref.get("name", ""))
        if rs is None or rs["metadata"].get("uid") != ref.get("uid"):
            return None
        return owner_key(pod, "ReplicaSet")

    def _on_pod_add(self, pod: dict) -> None:
        if pod["metadata"].get("deletionTimestamp"):
            self._on_pod_delete(pod)  # a restarted controller sees a pod already terminating
            return
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.creation_observed(key)
            self.queue.add(key)
        elif controller_ref(pod) is None:
            self._enqueue_matching(pod)

    def _on_pod_update(self, old: dict, new: dict) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return  # a resync: nothing changed
        labels_changed = old["metadata"].get("labels") != new["metadata"].get("labels")
        if new["metadata"].get("deletionTimestamp") and not old["metadata"].get("deletionTimestamp"):
            # a graceful delete: the pod is gone as far as counting goes (updatePod -> deletePod)
            self._on_pod_delete(new)
            if labels_changed:
                self._on_pod_delete(old)
            return
        old_ref, new_ref = controller_ref(old), controller_ref(new)
        if old_ref and (new_ref is None or old_ref.get("uid") != new_ref.get("uid")):
            old_key = self._owner_key(old)
            if old_key is not None:
                self.queue.add(old_key)
        key = self._owner_key(new)
        if key is not None:
            self.queue.add(key)
            rs = self.replicasets.get(*key.split("/", 1))
            min_ready = int(((rs or {}).get("spec") or {}).get("minReadySeconds") or 0)
            if min_ready > 0 and not pod_ready(old) and pod_ready(new):
                self.queue.add_after(key, min_ready + 1.0)  # re-check availability then
        elif new_ref is None and (labels_changed or old_ref is not None):
            self._enqueue_matching(new)

    def _on_pod_delete(self, pod: dict) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.deletion_observed(key, pod["metadata"]["uid"])
            self.queue.add(key)

    def _enqueue_matching(self, pod: dict) -> None:
        """An orphan pod: every ReplicaSet whose selector matches it may adopt it."""
        labels = pod["metadata"].get("labels") or {}
        if not labels:
            return
        for rs in self.replicasets.list(pod["metadata"].get("namespace")):
            try:
                selector = selector_of(rs)
            except APIError:
                continue
            if not selector.is_empty and selector.matches(labels):
                self._enqueue(rs)

    # -- reconcile ---------------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        """syncReplicaSet; Events are recorded after the status write (by the manager's worker: once the key
        is released, see DeferredEvents), off the rollout's critical path."""
        self._events.recorder = getattr(self.ctx, "recorder", None)
        with self._events.deferred():
            return self._sync(key)

    def _sync(self, key: str) -> float | None:
        namespace, _, name = key.rpartition("/")
        rs = self.replicasets.get(namespace, name)
        if rs is None:
            self.expectations.delete(key)
            return None
        now = to_datetime(self.clock())
        needs_sync = self.expectations.satisfied(key)
        try:
            selector = selector_of(rs)
        except APIError as exc:
            self._event(rs, "Warning", "InvalidSelector", str(exc))
            return None
        pods, retry = self._claim_pods(rs, selector)
        if retry:
            # an adoption conflicted or the cache is stale: act only on a complete claim (ClaimPods' error)
            raise _Retry(f"replicaset {key}: claiming pods did not complete")
        failure: tuple[str, str] | None = None
        gone: set[str] = set()
        if needs_sync and not rs["metadata"].get("deletionTimestamp"):
            failure, gone = self._manage_replicas(key, rs, pods, now)
        counted = [p for p in pods if p["metadata"]["uid"] not in gone]
        status = replica_set_status(rs, counted, now, failure=failure)
        self._write_status(rs, status)
        if failure is not None:
            raise _Retry(f"replicaset {key}: {failure[1]}")
        spec = rs.get("spec") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        if min_ready > 0 and status["readyReplicas"] == int(spec.get("replicas", 1)) \
                and status["availableReplicas"] != status["readyReplicas"]:
            return requeue_for_availability(counted, min_ready, now) or float(min_ready)
        return None

    def _claim_pods(self, rs: dict, selector: LabelSelector) -> tuple[list[dict], bool]:
        """ClaimPods: owned matching pods, adopting orphans and releasing the non-matching.

        Returns the active pods the ReplicaSet now owns and whether the claim was
        incomplete (a write conflicted, or the ReplicaSet read fresh may not adopt), so the
        key is tried again.
        """
        manager = ControllerRefManager(self.api, rs, kind="ReplicaSet", owner_rt=self._rs_rt, selector=selector)
        result = manager.claim(p for p in self.pods.list(rs["metadata"].get("namespace")) if pod_active(p))
        return result.claimed, not result.complete

    def _manage_replicas(self, key: str, rs: dict, pods: list[dict],
                         now: dt.datetime) -> tuple[tuple[str, str] | None, set[str]]:
        """Create or delete pods toward spec.replicas; returns the failure (if any) and deleted uids."""
        want = int((rs.get("spec") or {}).get("replicas", 1))
        diff = len(pods) - want
        if diff < 0:
            return self._create_pods(key, rs, min(-diff, self.settings.burst_replicas)), set()
        if diff > 0:
            victims = pods_to_delete(pods, min(diff, self.settings.burst_replicas),
                                     related=self._related_pods(rs), now=now)
            return self._delete_pods(key, rs, victims)
        return None, set()

    def _create_pods(self, key: str, rs: dict, count: int) -> tuple[str, str] | None:
        """slowStartBatch: batches of 1, 2, 4, ... until one fails; Events once the pods exist."""
        self.expectations.expect_creations(key, count)
        done = 0
        created: list[str] = []
        errors: list[str] = []
        for size in slow_start_batches(count, initial=self.settings.initial_batch):
            names, batch_errors = self._create_batch(rs, size)
            created.extend(names)
            errors.extend(batch_errors)
            done += size
            for _ in range(size - len(names)):
                self.expectations.creation_observed(key)  # will never be observed
            if batch_errors:
                break
        for _ in range(count - done):
            self.expectations.creation_observed(key)  # skipped by slow start
        for name in created:
            self._event(rs, "Normal", "SuccessfulCreate", f"Created pod: {name}")
        for error in errors:
            self._event(rs, "Warning", "FailedCreate", f"Error creating: {error}")
        return ("FailedCreate", errors[0]) if errors else None

    def _create_batch(self, rs: dict, size: int) -> tuple[list[str], list[str]]:
        """One slow-start batch in one transaction; a generated-name clash is retried once."""
        template = pod_from_template(rs, "ReplicaSet")
        results = self.api.write_all([("create", copy.deepcopy(template)) for _ in range(size)])
        names: list[str] = []
        errors: list[str] = []
        for result in results:
            if result.error is not None and isinstance(result.error, AlreadyExists):
                try:
                    result.obj, result.error = self.api.create(copy.deepcopy(template)), None
                except APIError as exc:
                    result.error = exc
            if result.error is None and result.obj is not None:
                names.append(result.obj["metadata"]["name"])
            elif result.error is not None:
                errors.append(str(result.error))
        return names, errors

    def _delete_pods(self, key: str, rs: dict, victims: list[dict]) -> tuple[tuple[str, str] | None, set[str]]:
        """Delete the victims in one transaction (Kubernetes deletes them in parallel); each fails alone.

        No preconditions, as Kubernetes: a concurrent write is no reason to fail (a Conflict
        is retried by the API). Gone already counts as deleted.
        """
        self.expectations.expect_deletions(key, [p["metadata"]["uid"] for p in victims])
        failure: tuple[str, str] | None = None
        gone: set[str] = set()
        ops = [("delete", {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": p["metadata"]["name"], "namespace": p["metadata"].get("namespace")}})
               for p in victims]
        try:
            results = self.api.write_all(ops)
        except APIError as exc:  # the whole batch failed (the store is unusable, ...)
            results = [WriteResult(error=exc) for _ in victims]
        for pod, result in zip(victims, results):
            meta = pod["metadata"]
            if result.error is None:
                gone.add(meta["uid"])
                self._event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}")
            elif isinstance(result.error, NotFound):
                self.expectations.deletion_observed(key, meta["uid"])
                gone.add(meta["uid"])
            else:
                self.expectations.deletion_observed(key, meta["uid"])
                failure = ("FailedDelete", str(result.error))
                self._event(rs, "Warning", "FailedDelete", f"Error deleting: {result.error}")
        return failure, gone

    def _related_pods(self, rs: dict) -> list[dict]:
        """getIndirectlyRelatedPods: pods of every ReplicaSet with the same controller owner."""
        ref = controller_ref(rs)
        if ref is None:
            return list(self.pods.by_index("owner", rs["metadata"]["uid"]))
        related: list[dict] = []
        for sibling in self.replicasets.by_index("owner", ref.get("uid", "")):
            related.extend(self.pods.by_index("owner", sibling["metadata"]["uid"]))
        return related

    def _write_status(self, rs: dict, status: dict) -> None:
        if status == (rs.get("status") or {}):
            return
        new = copy.deepcopy(rs)
        new["status"] = status
        try:
            self.api.update_status(new)
        except NotFound:
            return
        except Conflict:
            live = self.api.get(self._rs_rt, rs["metadata"]["name"], namespace=rs["metadata"].get("namespace"))
            if live["metadata"].get("uid") != rs["metadata"]["uid"]:
                return
            status = dict(status, observedGeneration=min(status["observedGeneration"],
                                                          live["metadata"].get("generation", 1)))
            live["status"] = status
            self.api.update_status(live)

    def _event(self, rs: dict, type_: str, reason: str, message: str) -> None:
        self._events.add(rs, type_, reason, message)

class _Retry(Exception):
    """A reconcile that must run again with back-off (a create/delete failed or a claim conflicted)."""


def _takes_clock(cls: type) -> bool:
    import inspect

    try:
        return "clock" in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False


__all__ = ["ReplicaSetController", "ReplicaSetSettings", "pods_to_delete", "slow_start_batches",
           "pod_available", "pod_ready", "pod_active", "controller_ref", "owner_reference",
           "pod_from_template", "replica_set_status"]
