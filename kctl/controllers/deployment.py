"""The Deployment controller: rolls a Deployment's pods through ReplicaSets.

Run by the controller manager in `kctl daemon` (see `controllers()` at the bottom);
written after Kubernetes' pkg/controller/deployment (deployment_controller.go, sync.go,
rolling.go, recreate.go, progress.go). The arithmetic lives in
kctl/controllers/rollout.py; this module reads the caches, writes ReplicaSets and the
Deployment's status, and records Events. For each Deployment key it:

- claims ReplicaSets: adopts orphans matching the selector, releases those that stopped
  matching (controller ownerReferences, blockOwnerDeletion);
- finds the new ReplicaSet (template equal to the Deployment's, ignoring
  `pod-template-hash`) or creates it as `<name>-<hash>` with the hash label on its
  selector, template (and so its pods); a ReplicaSet made current again (by `kctl
  rollout undo`, which copies an old template into the Deployment) is reused and given
  the next revision, its earlier ones kept in `deployment.kubernetes.io/revision-history`;
  the revision is also written on the Deployment;
- paused: only scales (proportionally) and cleans up; a changed spec.replicas during a
  rollout is spread over the ReplicaSets in proportion (isScalingEvent -> sync);
- RollingUpdate: grows the new ReplicaSet within replicas + maxSurge, shrinks old ones
  only while replicas - maxUnavailable pods stay available; Recreate: scales old ones
  to zero, waits until their pods are gone, then scales the new one up;
- keeps revisionHistoryLimit old ReplicaSets once a rollout is complete;
- writes status (replicas, updatedReplicas, readyReplicas, availableReplicas,
  unavailableReplicas, observedGeneration, collisionCount) and the Progressing
  (NewReplicaSetCreated, FoundNewReplicaSet, ReplicaSetUpdated, NewReplicaSetAvailable,
  ProgressDeadlineExceeded, DeploymentPaused/Resumed) and Available
  (MinimumReplicasAvailable/Unavailable) conditions, requeueing itself to notice a
  progress deadline passing.

kctl's status path writes only status, so the revision annotation on the Deployment is
written through the main path (a merge patch of metadata.annotations), where Kubernetes
lets UpdateStatus carry it.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Callable

from kctl.machinery.errors import AlreadyExists, APIError, Conflict, NotFound
from kctl.machinery.selectors import LabelSelector
from kctl.client.claim import ControllerRefManager
from kctl.client.statuswriter import StatusWriter
from kctl.controllers.base import DeferredEvents, key_of
from kctl.controllers import rollout as ro
from kctl.controllers.replicaset import (controller_ref, format_time, owner_reference, selector_of,
                                         to_datetime)

log = logging.getLogger("kctl.controllers.deployment")

COMPONENT = "deployment-controller"


@dataclass(frozen=True)
class DeploymentSettings:
    """Knobs of the Deployment controller (none yet beyond Kubernetes' defaults)."""

    #: smallest delay when requeueing to check a progress deadline
    min_deadline_requeue: float = 0.05


class RetryLater(Exception):
    """A sync that must run again with back-off (a hash collision, a failed create)."""


class DeploymentController:
    """Drives each Deployment's ReplicaSets toward its spec, one bounded step per sync."""

    name = "deployment"

    def __init__(self, *, settings: DeploymentSettings = DeploymentSettings()) -> None:
        self.settings = settings
        self._events = DeferredEvents()  # Events of the pass running on this worker, recorded as it ends

    def register(self, ctx, queue) -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.clock: Callable[[], float] = ctx.clock
        self.deployments = ctx.informers.informer("deployments")
        self.replicasets = ctx.informers.informer("replicasets")
        self.pods = ctx.informers.informer("pods")
        self.deployments.add_handler(self._enqueue, lambda old, new: self._enqueue(new), self._enqueue)
        self.replicasets.add_handler(self._on_rs_add, self._on_rs_update, self._on_rs_delete)
        self.pods.add_handler(lambda pod: None, lambda old, new: None, self._on_pod_delete)
        self.rs_rt = self.api.resource("replicasets")
        self.deploy_rt = self.api.resource("deployments")
        self.status_writer = StatusWriter(self.api)

    # -- event handlers ----------------------------------------------------------------------

    def _enqueue(self, d: dict) -> None:
        self.queue.add(key_of(d))

    def _resolve(self, namespace: str | None, ref: dict | None) -> dict | None:
        """The cached Deployment a controller reference names (None if not a live Deployment)."""
        if ref is None or ref.get("kind") != "Deployment":
            return None
        d = self.deployments.get(namespace, ref.get("name", ""))
        if d is None or d["metadata"].get("uid") != ref.get("uid"):
            return None
        return d

    def _matching(self, rs: dict) -> list[dict]:
        """Deployments whose selector matches an orphan ReplicaSet's labels."""
        labels = rs["metadata"].get("labels") or {}
        found = []
        for d in self.deployments.list(rs["metadata"].get("namespace")):
            try:
                selector = selector_of(d)
            except APIError:
                continue
            if not selector.is_empty and selector.matches(labels):
                found.append(d)
        return found

    def _on_rs_add(self, rs: dict) -> None:
        if rs["metadata"].get("deletionTimestamp"):
            self._on_rs_delete(rs)
            return
        ref = controller_ref(rs)
        if ref is not None:
            d = self._resolve(rs["metadata"].get("namespace"), ref)
            if d is not None:
                self._enqueue(d)
            return
        for d in self._matching(rs):
            self._enqueue(d)

    def _on_rs_update(self, old: dict, new: dict) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        ns = new["metadata"].get("namespace")
        old_ref, new_ref = controller_ref(old), controller_ref(new)
        if old_ref is not None and (new_ref is None or old_ref.get("uid") != new_ref.get("uid")):
            d = self._resolve(ns, old_ref)
            if d is not None:
                self._enqueue(d)
        if new_ref is not None:
            d = self._resolve(ns, new_ref)
            if d is not None:
                self._enqueue(d)
            return
        if old["metadata"].get("labels") != new["metadata"].get("labels") or old_ref is not None:
            for d in self._matching(new):
                self._enqueue(d)

    def _on_rs_delete(self, rs: dict) -> None:
        d = self._resolve(rs["metadata"].get("namespace"), controller_ref(rs))
        if d is not None:
            self._enqueue(d)

    def _on_pod_delete(self, pod: dict) -> None:
        """A Recreate rollout waits for the old pods to be gone: look again when one goes."""
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        ns = pod["metadata"].get("namespace")
        rs = self.replicasets.get(ns, ref.get("name", ""))
        if rs is None:
            return
        d = self._resolve(ns, controller_ref(rs))
        if d is not None and ro.is_recreate(d):
            self._enqueue(d)

    # -- reconcile ---------------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        namespace, _, name = key.rpartition("/")
        cached = self.deployments.get(namespace, name)
        if cached is None:
            return None  # deleted: the garbage collector removes its ReplicaSets
        self._events.recorder = getattr(self.ctx, "recorder", None)
        with self._events.deferred():  # recorded in one transaction when the pass ends, off its writes
            return _Sync(self, copy.deepcopy(cached)).run()

    def event(self, obj: dict, type_: str, reason: str, message: str) -> None:
        """Record an Event (deferred to the end of the pass; best effort, never raises)."""
        self._events.add(copy.deepcopy(obj), type_, reason, message)


class _Sync:
    """One syncDeployment pass over a private copy of the Deployment and its ReplicaSets.

    ReplicaSets are deep copies, updated in place after each write, so every later step
    of the pass sees what was just written.
    """

    def __init__(self, controller: DeploymentController, d: dict) -> None:
        self.c = controller
        self.api = controller.api
        self.d = d
        self._stored_status: dict = copy.deepcopy(d.get("status") or {})  # as the API has it, for write_status
        self.d.setdefault("status", {})
        self.clock_now = controller.clock()
        self.now = format_time(to_datetime(self.clock_now))

    # -- the pass --------------------------------------------------------------------------

    def run(self) -> float | None:
        d = self.d
        try:
            selector = selector_of(d)
        except APIError as exc:
            self.c.event(d, "Warning", "InvalidSelector", str(exc))
            return None
        if selector.is_empty:
            self.c.event(d, "Warning", "SelectingAll",
                         "This deployment is selecting all pods. A non-empty selector is required.")
            if int(d["status"].get("observedGeneration") or 0) < d["metadata"].get("generation", 1):
                d["status"]["observedGeneration"] = d["metadata"].get("generation", 1)
                self.write_status()
            return None
        try:
            ro.resolve_fenceposts(*ro.rolling_params(d), ro.spec_replicas(d))
        except ro.RolloutError as exc:
            self.c.event(d, "Warning", "InvalidStrategy", str(exc))
            return None
        rss = self.claim_replica_sets(selector)
        if d["metadata"].get("deletionTimestamp"):
            new_rs, old = self.all_replica_sets(rss, create=False)
            return self.sync_deployment_status([*old, new_rs], new_rs)
        self.check_paused_conditions()
        if (d.get("spec") or {}).get("paused"):
            return self.sync(rss)
        new_rs, old = self.all_replica_sets(rss, create=False)
        if ro.is_scaling_event(d, new_rs, old):
            return self.sync(rss)
        if ro.is_recreate(d):
            return self.rollout_recreate(rss)
        return self.rollout_rolling(rss)

    # -- claiming ReplicaSets --------------------------------------------------------------

    def claim_replica_sets(self, selector: LabelSelector) -> list[dict]:
        """ClaimReplicaSets: private copies of the ReplicaSets this Deployment controls.

        RetryLater when the claim is incomplete (an adoption or release conflicted, or the
        Deployment read fresh is gone, replaced or being deleted: a stale cache must not
        adopt, or act, for a Deployment going away).
        """
        manager = ControllerRefManager(self.api, self.d, kind="Deployment", owner_rt=self.c.deploy_rt,
                                       selector=selector)
        result = manager.claim(self.c.replicasets.list(self.d["metadata"].get("namespace")))
        if not result.complete:
            raise RetryLater(result.problem or "claiming replica sets did not complete")
        return [copy.deepcopy(rs) for rs in result.claimed]

    # -- finding and creating the new ReplicaSet -------------------------------------------

    def all_replica_sets(self, rss: list[dict], *, create: bool) -> tuple[dict | None, list[dict]]:
        """getAllReplicaSetsAndSyncRevision: (new ReplicaSet or None, the old ones)."""
        existing = ro.find_new_replica_set(self.d, rss)
        old = [rs for rs in rss if rs is not existing]
        return self.new_replica_set(existing, old, create=create), old

    def new_replica_set(self, existing: dict | None, old: list[dict], *, create: bool) -> dict | None:
        """getNewReplicaSet: sync the existing new ReplicaSet's revision, or create it."""
        d = self.d
        new_revision = ro.max_revision(old) + 1
        min_ready = int((d.get("spec") or {}).get("minReadySeconds") or 0)
        if existing is not None:
            rs_copy = copy.deepcopy(existing)
            changed = ro.set_new_replica_set_annotations(d, rs_copy, new_revision, exists=True)
            if changed or int(rs_copy["spec"].get("minReadySeconds") or 0) != min_ready:
                rs_copy["spec"]["minReadySeconds"] = min_ready
                self._replace(existing, self.api.update(rs_copy))
                return existing
            needs_update = self.set_deployment_revision(ro.revision_of(existing))
            if ro.progress_deadline(d) is not None and ro.get_condition(d["status"], ro.PROGRESSING) is None:
                ro.set_condition(d["status"], ro.new_condition(
                    ro.PROGRESSING, "True", ro.FOUND_NEW_RS_REASON,
                    f'Found new replica set "{existing["metadata"]["name"]}"', self.now))
                needs_update = True
            if needs_update:
                self.write_status()
            return existing
        if not create:
            return None
        new_rs = self._new_replica_set_object(old, new_revision)
        name = new_rs["metadata"]["name"]
        already = False
        try:
            created = self.api.create(new_rs)
        except AlreadyExists:
            found = self.api.get(self.c.rs_rt, name, namespace=d["metadata"].get("namespace"))
            ref = controller_ref(found)
            if ref is None or ref.get("uid") != d["metadata"]["uid"] \
                    or not ro.equal_ignore_hash(ro.template_of(d), ro.template_of(found)):
                count = int(d["status"].get("collisionCount") or 0) + 1
                d["status"]["collisionCount"] = count
                self.write_status()
                raise RetryLater(f'hash collision for replica set "{name}": collisionCount is now {count}') from None
            created, already = found, True
        except APIError as exc:
            message = f'Failed to create new replica set "{name}": {exc}'
            if ro.progress_deadline(d) is not None:
                ro.set_condition(d["status"], ro.new_condition(ro.PROGRESSING, "False", ro.FAILED_RS_CREATE_REASON,
                                                               message, self.now))
                self.write_status()
            self.c.event(d, "Warning", "FailedCreate", message)
            raise
        replicas = ro.spec_replicas(created)
        if not already and replicas > 0:
            self.c.event(d, "Normal", "ScalingReplicaSet", f"Scaled up replica set {name} from 0 to {replicas}")
        needs_update = self.set_deployment_revision(new_revision)
        if not already and ro.progress_deadline(d) is not None:
            ro.set_condition(d["status"], ro.new_condition(ro.PROGRESSING, "True", ro.NEW_RS_REASON,
                                                           f'Created new replica set "{name}"', self.now))
            needs_update = True
        if needs_update:
            self.write_status()
        return copy.deepcopy(created)

    def _new_replica_set_object(self, old: list[dict], revision: int) -> dict:
        d = self.d
        template = copy.deepcopy(ro.template_of(d))
        hash_ = ro.pod_template_hash(template, d["status"].get("collisionCount"))
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), ro.HASH_LABEL: hash_}
        selector = copy.deepcopy((d.get("spec") or {}).get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), ro.HASH_LABEL: hash_}
        spec: dict = {"replicas": 0, "selector": selector, "template": template}
        min_ready = (d.get("spec") or {}).get("minReadySeconds")
        if min_ready:
            spec["minReadySeconds"] = int(min_ready)
        new_rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": f"{d['metadata']['name']}-{hash_}",
                               "namespace": d["metadata"].get("namespace") or "default",
                               "labels": dict(tmeta["labels"]),
                               "ownerReferences": [owner_reference(d, "Deployment")]},
                  "spec": spec}
        spec["replicas"] = ro.new_rs_new_replicas(d, [*old, new_rs], new_rs)
        ro.set_new_replica_set_annotations(d, new_rs, revision, exists=False)
        return new_rs

    def set_deployment_revision(self, revision: int) -> bool:
        """SetDeploymentRevision, written at once through the main path; False (no status change)."""
        value = str(revision)
        if ro.annotations(self.d).get(ro.REVISION_ANNOTATION) == value:
            return False
        meta = self.d["metadata"]
        patched = self.api.patch(self.c.deploy_rt, meta["name"],
                                 {"metadata": {"annotations": {ro.REVISION_ANNOTATION: value}}},
                                 patch_type="merge", namespace=meta.get("namespace"))
        if patched["metadata"].get("uid") != meta["uid"]:
            raise RetryLater("the deployment was replaced")
        status = self.d["status"]
        self._remember(patched)
        self.d["status"] = status
        return False

    def _remember(self, stored: dict) -> None:
        """Take `stored` (the Deployment as the API returned it) as self.d, its status as the stored one."""
        self.d = copy.deepcopy(stored)
        self._stored_status = copy.deepcopy(self.d.get("status") or {})

    # -- scaling ---------------------------------------------------------------------------

    @staticmethod
    def _replace(target: dict, new: dict) -> None:
        target.clear()
        target.update(copy.deepcopy(new))

    def scale_rs(self, rs: dict, size: int, operation: str) -> bool:
        """scaleReplicaSet: write size and the replicas annotations; True if the size changed."""
        old_size = ro.spec_replicas(rs)
        rs_copy = copy.deepcopy(rs)
        replicas = ro.spec_replicas(self.d)
        annotations_changed = ro.set_replicas_annotations(rs_copy, replicas, replicas + ro.max_surge(self.d))
        if old_size == size and not annotations_changed:
            return False
        rs_copy["spec"]["replicas"] = size
        self._replace(rs, self.api.update(rs_copy))
        if old_size != size:
            self.c.event(self.d, "Normal", "ScalingReplicaSet",
                         f"Scaled {operation} replica set {rs['metadata']['name']} from {old_size} to {size}")
        return old_size != size

    def scale_rs_and_record(self, rs: dict, size: int) -> bool:
        old_size = ro.spec_replicas(rs)
        if old_size == size:
            return False
        return self.scale_rs(rs, size, "up" if old_size < size else "down")

    def scale(self, new_rs: dict | None, old: list[dict]) -> None:
        """scale(): resize for a changed spec.replicas (or while paused)."""
        d = self.d
        target = ro.find_active_or_latest(new_rs, old)
        if target is not None:
            self.scale_rs_and_record(target, ro.spec_replicas(d))
            return
        if ro.is_saturated(d, new_rs):
            for rs in ro.active(old):
                self.scale_rs_and_record(rs, 0)
            return
        if ro.is_rolling_update(d):
            for rs, size in ro.plan_proportional_scale(d, new_rs, old):
                self.scale_rs(rs, size, "up" if size > ro.spec_replicas(rs) else "down")

    def sync(self, rss: list[dict]) -> float | None:
        """sync(): scaling only (a paused Deployment, or spec.replicas changed)."""
        new_rs, old = self.all_replica_sets(rss, create=False)
        self.scale(new_rs, old)
        if (self.d.get("spec") or {}).get("paused"):
            self.cleanup(old)
        return self.sync_deployment_status([*old, new_rs], new_rs)

    # -- rollouts --------------------------------------------------------------------------

    def rollout_rolling(self, rss: list[dict]) -> float | None:
        """rolloutRolling: one step of a RollingUpdate."""
        new_rs, old = self.all_replica_sets(rss, create=True)
        assert new_rs is not None
        all_rss = [*old, new_rs]
        if self.reconcile_new_replica_set(all_rss, new_rs):
            return self.sync_rollout_status(all_rss, new_rs)
        if self.reconcile_old_replica_sets(ro.active(old), new_rs):
            return self.sync_rollout_status(all_rss, new_rs)
        if ro.deployment_complete(self.d, self.d["status"]):
            self.cleanup(old)
        return self.sync_rollout_status(all_rss, new_rs)

    def reconcile_new_replica_set(self, all_rss: list[dict], new_rs: dict) -> bool:
        want, have = ro.spec_replicas(self.d), ro.spec_replicas(new_rs)
        if have == want:
            return False
        if have > want:
            return self.scale_rs_and_record(new_rs, want)
        return self.scale_rs_and_record(new_rs, ro.new_rs_new_replicas(self.d, all_rss, new_rs))

    def reconcile_old_replica_sets(self, old_active: list[dict], new_rs: dict) -> bool:
        scaled = False
        for rs, size in ro.plan_old_scale_down(self.d, old_active, new_rs):
            scaled |= self.scale_rs_and_record(rs, size)
        return scaled

    def rollout_recreate(self, rss: list[dict]) -> float | None:
        """rolloutRecreate: old ReplicaSets to zero, wait for their pods to go, then the new one up."""
        new_rs, old = self.all_replica_sets(rss, create=False)
        all_rss = [*old, new_rs]
        scaled_down = False
        for rs in ro.active(old):
            scaled_down |= self.scale_rs_and_record(rs, 0)
        if scaled_down or self.old_pods_running(new_rs, old):
            return self.sync_rollout_status(all_rss, new_rs)
        if new_rs is None:
            new_rs, old = self.all_replica_sets(rss, create=True)
            all_rss = [*old, new_rs]
        assert new_rs is not None
        self.scale_rs_and_record(new_rs, ro.spec_replicas(self.d))
        if ro.deployment_complete(self.d, self.d["status"]):
            self.cleanup(old)
        return self.sync_rollout_status(all_rss, new_rs)

    def old_pods_running(self, new_rs: dict | None, old: list[dict]) -> bool:
        """oldPodsRunning: an old ReplicaSet still reports pods, or still has a pod not finished."""
        if ro.actual_count(old) > 0:
            return True
        for rs in old:
            uid = rs["metadata"]["uid"]
            for pod in self.c.pods.by_index("owner", uid):
                if (controller_ref(pod) or {}).get("uid") != uid:
                    continue
                if (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded"):
                    return True
        return False

    def cleanup(self, old: list[dict]) -> None:
        """cleanupDeployment: delete the oldest empty ReplicaSets beyond revisionHistoryLimit."""
        for rs in ro.rs_to_clean_up(self.d, old):
            meta = rs["metadata"]
            try:
                self.api.delete(self.c.rs_rt, meta["name"], namespace=meta.get("namespace"),
                                resource_version=meta.get("resourceVersion"))
            except (NotFound, Conflict):
                continue  # gone, or changed since: the next pass decides again

    # -- status ----------------------------------------------------------------------------

    def check_paused_conditions(self) -> None:
        """checkPausedConditions: Progressing Unknown with DeploymentPaused / DeploymentResumed."""
        d = self.d
        if ro.progress_deadline(d) is None:
            return
        cond = ro.get_condition(d["status"], ro.PROGRESSING)
        if cond is not None and cond.get("reason") == ro.TIMED_OUT_REASON:
            return
        paused = bool((d.get("spec") or {}).get("paused"))
        paused_cond = cond is not None and cond.get("reason") == ro.PAUSED_REASON
        if paused and not paused_cond:
            ro.set_condition(d["status"], ro.new_condition(ro.PROGRESSING, "Unknown", ro.PAUSED_REASON,
                                                           "Deployment is paused", self.now))
        elif not paused and paused_cond:
            ro.set_condition(d["status"], ro.new_condition(ro.PROGRESSING, "Unknown", ro.RESUMED_REASON,
                                                           "Deployment is resumed", self.now))
        else:
            return
        self.write_status()

    def sync_deployment_status(self, all_rss: list[dict | None], new_rs: dict | None) -> None:
        status = ro.calculate_status(self.d, all_rss, new_rs, self.now)
        if status != self.d["status"]:
            self.d["status"] = status
            self.write_status()
        return None

    def sync_rollout_status(self, all_rss: list[dict | None], new_rs: dict | None) -> float | None:
        """syncRolloutStatus: status plus the Progressing condition; the delay to check the deadline."""
        d = self.d
        status = ro.calculate_status(d, all_rss, new_rs, self.now)
        has_deadline = ro.progress_deadline(d) is not None
        if not has_deadline:
            ro.remove_condition(status, ro.PROGRESSING)
        current = ro.get_condition(d["status"], ro.PROGRESSING)
        complete = (status["replicas"] == status["updatedReplicas"] and current is not None
                    and current.get("reason") == ro.NEW_RS_AVAILABLE_REASON)
        name = f'ReplicaSet "{new_rs["metadata"]["name"]}"' if new_rs is not None \
            else f'Deployment "{d["metadata"]["name"]}"'
        if has_deadline and not complete:
            if ro.deployment_complete(d, status):
                ro.set_condition(status, ro.new_condition(ro.PROGRESSING, "True", ro.NEW_RS_AVAILABLE_REASON,
                                                          f"{name} has successfully progressed.", self.now))
            elif ro.deployment_progressing(d, status):
                cond = ro.new_condition(ro.PROGRESSING, "True", ro.RS_UPDATED_REASON, f"{name} is progressing.",
                                        self.now)
                if current is not None:
                    if current.get("status") == "True":
                        cond["lastTransitionTime"] = current.get("lastTransitionTime", self.now)
                    ro.remove_condition(status, ro.PROGRESSING)
                ro.set_condition(status, cond)
            elif ro.deployment_timed_out(d, status, self.clock_now):
                ro.set_condition(status, ro.new_condition(ro.PROGRESSING, "False", ro.TIMED_OUT_REASON,
                                                          f"{name} has timed out progressing.", self.now))
                if (current or {}).get("reason") != ro.TIMED_OUT_REASON:
                    self.c.event(d, "Warning", ro.TIMED_OUT_REASON, f"{name} has timed out progressing.")
        failure = self._replica_failure(all_rss, new_rs)
        if failure is not None:
            ro.set_condition(status, failure)
        else:
            ro.remove_condition(status, ro.REPLICA_FAILURE)
        if status != d["status"]:
            d["status"] = status
            self.write_status()
        return self._requeue_stuck(status)

    def _replica_failure(self, all_rss: list[dict | None], new_rs: dict | None) -> dict | None:
        """getReplicaFailures: the new ReplicaSet's ReplicaFailure condition, else an old one's."""
        for rs in [new_rs, *all_rss]:
            cond = ro.get_condition((rs or {}).get("status"), "ReplicaFailure")
            if cond is not None:
                when = cond.get("lastTransitionTime") or self.now
                return {"type": ro.REPLICA_FAILURE, "status": cond.get("status", "True"),
                        "lastUpdateTime": when, "lastTransitionTime": when,
                        "reason": cond.get("reason", ""), "message": cond.get("message", "")}
        return None

    def _requeue_stuck(self, status: dict) -> float | None:
        """requeueStuckDeployment: when to look again for the progress deadline."""
        current = ro.get_condition(self.d["status"], ro.PROGRESSING)
        if ro.progress_deadline(self.d) is None or current is None:
            return None
        if ro.deployment_complete(self.d, status) or current.get("reason") in (ro.TIMED_OUT_REASON,
                                                                                ro.NEW_RS_AVAILABLE_REASON):
            return None
        left = ro.seconds_until_deadline(self.d, self.d["status"], self.clock_now)
        if left is None:
            return None
        return max(left + 0.05, self.c.settings.min_deadline_requeue)

    def write_status(self) -> None:
        """UpdateStatus with the status built so far, if it differs from the stored one.

        Through StatusWriter: a Conflict re-reads the Deployment and writes the status onto
        it (observedGeneration never past the live generation), a few attempts; a Deployment
        deleted or replaced (another uid) meanwhile is RetryLater.
        """
        d = self.d
        status = d["status"]

        def desired(current: dict) -> dict:
            new = dict(status)
            if "observedGeneration" in new:
                new["observedGeneration"] = min(int(new.get("observedGeneration") or 0),
                                                current["metadata"].get("generation", 1))
            return new

        written = self.c.status_writer.write({**d, "status": self._stored_status}, desired)
        if written is None:
            raise RetryLater("the deployment was deleted or replaced")
        self._remember(written)
        self.d["status"] = status


__all__ = ["DeploymentController", "DeploymentSettings", "RetryLater"]
