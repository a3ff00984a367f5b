"""One StatefulSet sync as a plan: which pods to create, fix or delete, and the status to write.

Pure decisions over plain objects, used by the StatefulSet controller (controller.py),
which carries the plan out, and by its tests. Written after Kubernetes'
stateful_set_control.go (updateStatefulSet, processReplica, processCondemned, the
rolling update and completeRollingUpdate):

- every ordinal in [start, start + replicas) gets a pod; a missing one is created from
  the current revision's template below the RollingUpdate partition and from the update
  revision's otherwise; pods above the range are condemned, highest ordinal first;
- `OrderedReady` (monotonic): the pass stops at the first pod it creates or deletes and at
  the first pod that is not Running, Ready and available (minReadySeconds), so pods are
  made 0..N-1 one at a time, each Ready before the next, and removed from the highest;
  `Parallel`: every missing pod is created and every condemned pod deleted at once;
- a Failed or Succeeded pod is deleted (and made anew on a later pass, same name); a
  Pending pod whose claim is gone gets it made again (how a claim on a lost host is
  replaced: delete the claim, the waiting pod gets a new one, provisioned where it lands);
- a pod whose claim still belongs to a previous pod of its ordinal (whenScaled: Delete,
  waiting for the garbage collector) is not created until the claim is gone;
- RollingUpdate replaces, from the highest ordinal down to the partition, pods not at the
  update revision: one at a time, waiting for the replacement to be healthy; with
  `maxUnavailable` (a number or a percentage of replicas, rounded up, at least 1) as many
  as keep at most that many pods unavailable. OnDelete replaces a pod only once someone
  deletes it;
- status: replicas, readyReplicas, availableReplicas, currentReplicas, updatedReplicas,
  currentRevision, updateRevision, observedGeneration, collisionCount; once every pod is
  updated and ready, the update revision becomes the current one.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Mapping

from kctl.controllers.statefulset import claims as claimutil
from kctl.controllers.statefulset import pods as podutil

ORDERED_READY = "OrderedReady"
PARALLEL = "Parallel"
ROLLING_UPDATE = "RollingUpdate"
ON_DELETE = "OnDelete"


@dataclass
class Action:
    """One step of a plan: create, delete or fix (identity, claims, claim owners) one pod."""

    verb: str  # "create" | "delete" | "fix"
    pod: dict
    reason: str = ""


@dataclass
class Plan:
    """What one sync does, in order, the status it leaves, and why it stopped early (if it did)."""

    actions: list[Action] = field(default_factory=list)
    status: dict = field(default_factory=dict)
    waiting: str = ""


def pod_management(sts: dict) -> str:
    return (sts.get("spec") or {}).get("podManagementPolicy") or ORDERED_READY


def strategy(sts: dict) -> dict:
    return (sts.get("spec") or {}).get("updateStrategy") or {}


def strategy_type(sts: dict) -> str:
    return strategy(sts).get("type") or ROLLING_UPDATE


def partition(sts: dict) -> int:
    """spec.updateStrategy.rollingUpdate.partition (0 when unset)."""
    return int((strategy(sts).get("rollingUpdate") or {}).get("partition") or 0)


def max_unavailable(sts: dict) -> int | None:
    """getStatefulSetMaxUnavailable: None when unset, else the scaled value (rounded up), at least 1."""
    value = (strategy(sts).get("rollingUpdate") or {}).get("maxUnavailable")
    if value is None:
        return None
    replicas = podutil.replicas_of(sts)
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            scaled = math.ceil(int(value.strip()[:-1]) * replicas / 100)
        except ValueError:
            scaled = 1
    else:
        try:
            scaled = int(value)
        except (TypeError, ValueError):
            scaled = 1
    return max(1, scaled)


def min_ready_seconds(sts: dict) -> int:
    return int((sts.get("spec") or {}).get("minReadySeconds") or 0)


def replica_status(pods: list[dict], current: str, update: str, min_ready: int, now: dt.datetime) -> dict:
    """computeReplicaStatus over the pods that exist."""
    out = {"replicas": 0, "readyReplicas": 0, "availableReplicas": 0, "currentReplicas": 0, "updatedReplicas": 0}
    for pod in pods:
        out["replicas"] += 1
        if podutil.is_running_and_ready(pod):
            out["readyReplicas"] += 1
            if podutil.is_running_and_available(pod, min_ready, now):
                out["availableReplicas"] += 1
        if not podutil.is_terminating(pod):
            revision = podutil.revision_of(pod)
            if revision == current:
                out["currentReplicas"] += 1
            if revision == update:
                out["updatedReplicas"] += 1
    return out


def complete_rolling_update(sts: dict, status: dict) -> None:
    """completeRollingUpdate: all pods updated and ready -> the update revision is the current one."""
    if (strategy_type(sts) == ROLLING_UPDATE and status.get("updatedReplicas") == status.get("replicas")
            and status.get("readyReplicas") == status.get("replicas")):
        status["currentReplicas"] = status.get("updatedReplicas", 0)
        status["currentRevision"] = status.get("updateRevision", "")


def claims_need_fixing(sts: dict, pod: dict, claims: Mapping[str, dict]) -> bool:
    """A claim of the pod is missing, or its owners are not what the retention policy wants."""
    for name in claimutil.pod_claim_names(sts, pod):
        claim = claims.get(name)
        if claim is None:
            return True
        refs = (claim.get("metadata") or {}).get("ownerReferences") or []
        if claimutil.desired_owner_refs(claim, sts, pod) != refs:
            return True
    return False


def _missing_claim(sts: dict, pod: dict, claims: Mapping[str, dict]) -> bool:
    return any(name not in claims for name in claimutil.pod_claim_names(sts, pod))


def _stale_claim(sts: dict, ordinal: int, claims: Mapping[str, dict]) -> str:
    for template in podutil.claim_templates(sts):
        name = podutil.claim_name(template["metadata"]["name"], sts["metadata"]["name"], ordinal)
        claim = claims.get(name)
        if claim is not None and (claimutil.claim_is_stale(claim, None)
                                  or (claim.get("metadata") or {}).get("deletionTimestamp")):
            return name
    return ""


def plan(sts: dict, pods: list[dict], *, current_set: dict, update_set: dict, current: str, update: str,
         claims: Mapping[str, dict], now: dt.datetime, collision_count: int = 0) -> Plan:
    """The actions of one sync of `sts` over its claimed `pods`, and the status it leaves.

    `current_set`/`update_set` are the set with the current and update revisions'
    templates (ApplyRevision), `current`/`update` those revisions' names, `claims` the
    cached claims of the set's namespace by name.
    """
    start, count = podutil.start_ordinal(sts), podutil.replicas_of(sts)
    monotonic = pod_management(sts) != PARALLEL
    min_ready = min_ready_seconds(sts)
    status = {"observedGeneration": sts["metadata"].get("generation", 1), "currentRevision": current,
              "updateRevision": update, "collisionCount": collision_count,
              **replica_status(pods, current, update, min_ready, now)}
    result = Plan(status=status)
    slots: list[dict | None] = [None] * count
    condemned: list[dict] = []
    for pod in pods:
        ordinal = podutil.ordinal_of(pod)
        if start <= ordinal < start + count:
            slots[ordinal - start] = pod
        else:
            condemned.append(pod)
    condemned.sort(key=podutil.ordinal_of, reverse=True)
    first_unhealthy = next((p for p in [*(s for s in slots if s is not None), *condemned]
                            if not podutil.is_healthy(p, min_ready, now)), None)
    if sts["metadata"].get("deletionTimestamp"):
        return result

    def stop(why: str) -> Plan:
        result.waiting = why
        complete_rolling_update(sts, status)
        return result

    # every ordinal in range: create, replace failed, fix identity; in order
    for index, pod in enumerate(slots):
        ordinal = start + index
        name = podutil.pod_name(sts["metadata"]["name"], ordinal)
        if pod is not None and (podutil.is_failed(pod) or podutil.is_succeeded(pod)):
            if not podutil.is_terminating(pod):
                result.actions.append(Action("delete", pod, reason="failed"))
            if monotonic:
                return stop(f"recreating failed pod {name}")
            continue
        if pod is None:
            stale = _stale_claim(sts, ordinal, claims)
            if stale:
                if monotonic:
                    return stop(f"waiting for the stale claim {stale} to go")
                continue
            below_partition = strategy_type(sts) == ROLLING_UPDATE and ordinal < start + partition(sts)
            if below_partition:
                new = podutil.new_pod(current_set, ordinal, current)
            else:
                new = podutil.new_pod(update_set, ordinal, update)
            result.actions.append(Action("create", new))
            if monotonic:
                return stop(f"waiting for {name} to be created")
            continue
        if podutil.phase(pod) == "Pending" and _missing_claim(sts, pod, claims):
            result.actions.append(Action("fix", pod, reason="claims"))  # createMissingPersistentVolumeClaims
        if podutil.is_terminating(pod) and monotonic:
            return stop(f"waiting for {name} to terminate")
        if not podutil.is_running_and_ready(pod) and monotonic:
            return stop(f"waiting for {name} to be Running and Ready")
        if not podutil.is_running_and_available(pod, min_ready, now) and monotonic:
            return stop(f"waiting for {name} to be available")
        if (podutil.identity_matches(sts, pod) and podutil.storage_matches(sts, pod)
                and not claims_need_fixing(sts, pod, claims)):
            continue
        result.actions.append(Action("fix", pod))

    # claims of condemned pods take the retention policy's owners before the pods go
    for pod in condemned:
        if claims_need_fixing(sts, pod, claims) and not podutil.is_terminating(pod):
            result.actions.append(Action("fix", pod, reason="retention"))

    # scale down, highest ordinal first
    for pod in condemned:
        name = pod["metadata"]["name"]
        if podutil.is_terminating(pod):
            if monotonic:
                return stop(f"waiting for {name} to terminate")
            continue
        if monotonic and pod is not first_unhealthy and not podutil.is_healthy(pod, min_ready, now):
            return stop(f"waiting for {name} to be Running and Ready before removing it")
        result.actions.append(Action("delete", pod, reason="scale down"))
        _count_gone(status, pod, current, update)
        if monotonic:
            return stop(f"waiting for {name} to terminate")

    if strategy_type(sts) == ON_DELETE:
        return stop("")
    existing = [s for s in slots if s is not None]
    if len(existing) < count:
        return stop("")  # parallel creations still to be seen
    update_min = partition(sts)
    limit = max_unavailable(sts)
    if limit is None:
        for index in range(count - 1, update_min - 1, -1):
            pod = slots[index]
            assert pod is not None
            if podutil.revision_of(pod) != update and not podutil.is_terminating(pod):
                result.actions.append(Action("delete", pod, reason="update"))
                _count_gone(status, pod, current, update)
                return stop(f"waiting for {pod['metadata']['name']} to be replaced")
            if not podutil.is_healthy(pod, min_ready, now):
                return stop(f"waiting for {pod['metadata']['name']} to be healthy")
        return stop("")
    unavailable = sum(1 for pod in existing if not podutil.is_healthy(pod, min_ready, now))
    if unavailable >= limit:
        return stop(f"{unavailable} pods unavailable (maxUnavailable {limit})")
    deleted = 0
    for index in range(count - 1, update_min - 1, -1):
        if deleted >= limit - unavailable:
            break
        pod = slots[index]
        assert pod is not None
        if podutil.revision_of(pod) != update and not podutil.is_terminating(pod):
            result.actions.append(Action("delete", pod, reason="update"))
            _count_gone(status, pod, current, update)
            deleted += 1
    return stop("")


def _count_gone(status: dict, pod: dict, current: str, update: str) -> None:
    revision = podutil.revision_of(pod)
    if revision == current:
        status["currentReplicas"] = max(0, status["currentReplicas"] - 1)
    if revision == update:
        status["updatedReplicas"] = max(0, status["updatedReplicas"] - 1)


__all__ = ["Action", "ON_DELETE", "ORDERED_READY", "PARALLEL", "Plan", "ROLLING_UPDATE", "complete_rolling_update",
           "max_unavailable", "partition", "plan", "replica_status"]
