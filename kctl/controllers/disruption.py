"""The disruption controller: keeps every PodDisruptionBudget's status (how many pods may be disrupted now).

As kube-controller-manager's `disruption` controller (pkg/controller/disruption), run by the
controller manager in `kctl daemon` (registered in kctl/daemon/controllers.py). A budget is
queued when it changes and when a pod its selector matches (in its namespace) is added,
changed or deleted. Its reconcile:

- the pods: those the selector matches in the budget's namespace (policy/v1: `{}` selects all);
- expectedPods and desiredHealthy: with an integer minAvailable, desiredHealthy is it and
  expectedPods the number of pods; with a percentage minAvailable, or any maxUnavailable, the
  owning controllers' scale is summed (getExpectedScale: each pod's controller -> a ReplicaSet
  not owned by a Deployment, a Deployment through its ReplicaSet, or a StatefulSet; spec.replicas)
  and the percentage is of that, rounded up (desiredHealthy = expected - maxUnavailable, at
  least 0). Pods with no controller are left out of the scale and a Warning `UnmanagedPods`
  says so; a pod whose controller is none of those (or gone) fails the sync;
- disruptedPods: the eviction subresource's entries (kctl.apiserver.eviction) for pods still
  there and not yet being deleted, dropped after 2 minutes (Warning `NotDeleted` on the pod);
  the budget is looked at again when the earliest one expires;
- currentHealthy: pods Ready, not being deleted and not in disruptedPods;
- disruptionsAllowed = currentHealthy - desiredHealthy (0 when negative or when expectedPods is 0),
  observedGeneration, and the DisruptionAllowed condition (True/SufficientPods or
  False/InsufficientPods). The status is written only when something changed, with the cached
  resourceVersion as a precondition (an eviction's write in between is a Conflict: looked at again).

A sync that fails other than by Conflict sets disruptionsAllowed 0 and the condition
False/SyncFailed with the error (failSafe), so evictions stop rather than guess. Not done:
ReplicationControllers (kctl has none) and the scale subresource of custom resources.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from typing import TYPE_CHECKING

from kctl.controllers.base import clock_now, controller_ref, key_of, split_key
from kctl.machinery import disruption
from kctl.machinery.errors import Conflict, NotFound
from kctl.machinery.times import format_time, parse_time

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.disruption")


class SyncFailed(Exception):
    """The budget's status cannot be computed (a pod's controller is not found); failSafe follows."""


class DisruptionController:
    """Computes status.disruptionsAllowed (and the rest of the status) of every PodDisruptionBudget."""

    name = "disruption"

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.budgets = ctx.informers.informer("poddisruptionbudgets")
        self.pods = ctx.informers.informer("pods")
        self.replicasets = ctx.informers.informer("replicasets")
        self.deployments = ctx.informers.informer("deployments")
        self.statefulsets = ctx.informers.informer("statefulsets")
        self.budgets.add_handler(self._enqueue, lambda old, new: self._enqueue(new), self._enqueue)
        self.pods.add_handler(self._pod_changed, self._pod_updated, self._pod_changed)

    def object_for(self, key: str) -> dict | None:
        """The cached budget of a key (a permanent failure's Warning Event goes on it)."""
        return self.budgets.get(*split_key(key))

    # -- what queues a budget --------------------------------------------------------------

    def _enqueue(self, pdb: dict) -> None:
        self.queue.add(key_of(pdb))

    def _pod_changed(self, pod: dict) -> None:
        for pdb in self.budgets.list((pod.get("metadata") or {}).get("namespace") or ""):
            if disruption.selects(pdb, pod):
                self._enqueue(pdb)

    def _pod_updated(self, old: dict, new: dict) -> None:
        if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
            self._pod_changed(old)
        self._pod_changed(new)

    # -- reconcile ---------------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        """Compute and write the budget's status; seconds until the earliest disruptedPods entry expires."""
        namespace, name = split_key(key)
        pdb = self.budgets.get(namespace, name)
        if pdb is None:
            return None
        try:
            return self._sync(pdb)
        except (Conflict, NotFound):
            raise  # Conflict: looked at again without failSafe; NotFound: the budget went
        except Exception as exc:  # noqa: BLE001 - failSafe: stop evictions rather than guess
            log.warning("poddisruptionbudget %s: sync failed: %s", key, exc)
            self._fail_safe(pdb, str(exc))
            raise

    def _sync(self, pdb: dict) -> float | None:
        namespace = pdb["metadata"].get("namespace") or ""
        pods = [p for p in self.pods.list(namespace) if disruption.selects(pdb, p)]
        if not pods:
            self.ctx.recorder.event(pdb, "Normal", "NoPods", "No matching pods found")
        expected, desired, unmanaged = self._expected_count(pdb, pods)
        if unmanaged:
            selector = (pdb.get("spec") or {}).get("selector")
            self.ctx.recorder.event(
                pdb, "Warning", "UnmanagedPods",
                f"Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be unmanaged. "
                "As a result, the status of the PDB cannot be calculated correctly, which may result in undefined "
                'behavior. To account for these pods please set ".spec.minAvailable" field of the PDB to an '
                "integer value.")
        now = clock_now(self.ctx.clock)
        disrupted, recheck = self._disrupted_pods(pdb, pods, now)
        healthy = sum(1 for p in pods if not p["metadata"].get("deletionTimestamp")
                      and p["metadata"]["name"] not in disrupted and disruption.pod_ready(p))
        self._write_status(pdb, healthy, desired, expected, disrupted, now)
        return None if recheck is None else max(0.0, (recheck - now).total_seconds())

    def _expected_count(self, pdb: dict, pods: list[dict]) -> tuple[int, int, list[str]]:
        """getExpectedPodCount: (expectedPods, desiredHealthy, names of pods no controller owns)."""
        spec = pdb.get("spec") or {}
        if spec.get("maxUnavailable") is not None:
            expected, unmanaged = self._expected_scale(pods)
            unavailable = _scaled(spec["maxUnavailable"], expected, "maxUnavailable")
            return expected, max(0, expected - unavailable), unmanaged
        min_available = spec.get("minAvailable")
        if isinstance(min_available, int) and not isinstance(min_available, bool):
            return len(pods), min_available, []
        if isinstance(min_available, str):
            expected, unmanaged = self._expected_scale(pods)
            return expected, _scaled(min_available, expected, "minAvailable"), unmanaged
        return 0, 0, []

    def _expected_scale(self, pods: list[dict]) -> tuple[int, list[str]]:
        """getExpectedScale: the sum of spec.replicas over the pods' controllers; unmanaged pods apart."""
        scales: dict[str, int] = {}
        unmanaged: list[str] = []
        for pod in pods:
            ref = controller_ref(pod)
            if ref is None:
                unmanaged.append(pod["metadata"]["name"])
                continue
            if ref.get("uid") in scales:
                continue
            found = self._controller_scale(ref, pod["metadata"].get("namespace") or "")
            if found is None:
                raise SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
            scales[found[0]] = found[1]
        return sum(scales.values()), unmanaged

    def _controller_scale(self, ref: dict, namespace: str) -> tuple[str, int] | None:
        """(uid, replicas) of the controller a pod's controllerRef leads to: a Deployment through its
        ReplicaSet, a ReplicaSet of its own, or a StatefulSet; None when none matches."""
        group = str(ref.get("apiVersion") or "").partition("/")[0]
        if group not in ("apps", "extensions"):
            return None
        if ref.get("kind") == "ReplicaSet":
            rs = self.replicasets.get(namespace, ref.get("name") or "")
            if rs is None or rs["metadata"].get("uid") != ref.get("uid"):
                return None
            owner = controller_ref(rs)
            if owner is None or owner.get("kind") != "Deployment":
                return rs["metadata"]["uid"], _replicas(rs)
            deployment = self.deployments.get(namespace, owner.get("name") or "")
            if deployment is None or deployment["metadata"].get("uid") != owner.get("uid"):
                return None
            return deployment["metadata"]["uid"], _replicas(deployment)
        if ref.get("kind") == "StatefulSet":
            sts = self.statefulsets.get(namespace, ref.get("name") or "")
            if sts is None or sts["metadata"].get("uid") != ref.get("uid"):
                return None
            return sts["metadata"]["uid"], _replicas(sts)
        return None

    def _disrupted_pods(self, pdb: dict, pods: list[dict], now: dt.datetime) -> tuple[dict, dt.datetime | None]:
        """buildDisruptedPodMap: the entries still pending (and when the earliest expires); stale ones dropped."""
        recorded = (pdb.get("status") or {}).get("disruptedPods") or {}
        kept: dict[str, str] = {}
        recheck: dt.datetime | None = None
        for pod in pods:
            name = pod["metadata"]["name"]
            if pod["metadata"].get("deletionTimestamp") or name not in recorded:
                continue
            since = parse_time(recorded[name])
            if since is None:
                continue
            expires = since + dt.timedelta(seconds=disruption.DELETION_TIMEOUT)
            if expires < now:
                ns = pdb["metadata"].get("namespace")
                self.ctx.recorder.event(pod, "Warning", "NotDeleted",
                                        f"Pod was expected by PDB {ns}/{pdb['metadata']['name']} to be deleted but "
                                        "it wasn't")
                continue
            kept[name] = recorded[name]
            recheck = expires if recheck is None or expires < recheck else recheck
        return kept, recheck

    def _write_status(self, pdb: dict, healthy: int, desired: int, expected: int, disrupted: dict,
                      now: dt.datetime) -> None:
        """updatePdbStatus: write only when something changed."""
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        old = pdb.get("status") or {}
        generation = int(pdb["metadata"].get("generation") or 0)
        if (old.get("currentHealthy"), old.get("desiredHealthy"), old.get("expectedPods"),
                old.get("disruptionsAllowed"), old.get("disruptedPods") or {}, old.get("observedGeneration")) \
                == (healthy, desired, expected, allowed, disrupted, generation) \
                and disruption.conditions_up_to_date(old):
            return
        status: dict = {"currentHealthy": healthy, "desiredHealthy": desired, "disruptionsAllowed": allowed,
                        "expectedPods": expected, "observedGeneration": generation,
                        "conditions": copy.deepcopy(old.get("conditions") or [])}
        if disrupted:
            status["disruptedPods"] = dict(disrupted)
        disruption.set_disruption_allowed(status, now=format_time(now))
        self.api.update_status({**pdb, "status": status})

    def _fail_safe(self, pdb: dict, message: str) -> None:
        """failSafe: no disruptions allowed, condition False/SyncFailed with the error (best effort)."""
        status = copy.deepcopy(pdb.get("status") or {})
        status["disruptionsAllowed"] = 0
        disruption.set_condition(status, condition_status="False", reason=disruption.SYNC_FAILED, message=message,
                                 now=format_time(clock_now(self.ctx.clock)))
        try:
            self.api.update_status({**pdb, "status": status})
        except Exception as exc:  # noqa: BLE001 - the sync's own error is what is reported
            log.warning("poddisruptionbudget %s: failSafe status write failed: %s", key_of(pdb), exc)


def _replicas(obj: dict) -> int:
    replicas = (obj.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)


def _scaled(value: object, total: int, field: str) -> int:
    try:
        return disruption.scaled_value(value, total, round_up=True)
    except ValueError as exc:
        raise SyncFailed(f"spec.{field}: {exc}") from None


__all__ = ["DisruptionController", "SyncFailed"]
