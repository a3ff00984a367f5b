"""The arithmetic of a Deployment rollout, as pure functions over plain objects.

Used by the Deployment controller (kctl/controllers/deployment.py) and its tests; written
after Kubernetes' pkg/controller/deployment/util/deployment_util.go and the decisions
inside rolling.go, recreate.go and sync.go. Nothing here reads the store or writes it:
each function takes a Deployment and its ReplicaSets (dicts as the API returns them) and
returns numbers, plans or conditions.

- surge and unavailability: `resolve_fenceposts` (percentages of spec.replicas, surge
  rounded up, unavailable rounded down, both zero -> unavailable 1), `max_surge`,
  `max_unavailable`;
- the new ReplicaSet's next size (`new_rs_new_replicas`) and the old ReplicaSets' scale
  down (`plan_old_scale_down`: unhealthy replicas first, then only what keeps
  `replicas - maxUnavailable` available);
- proportional scaling when a Deployment is resized mid-rollout (`plan_proportional_scale`);
- the pod-template-hash (`pod_template_hash`), template equality ignoring it, finding
  the new and old ReplicaSets, revisions and their annotations;
- status and conditions (`calculate_status`, `set_condition`, progress and deadline).

Surge is counted as Kubernetes counts it (GetReplicaCountForReplicaSets): the sum of the
ReplicaSets' spec.replicas never exceeds replicas + maxSurge. Pods an old ReplicaSet has
not yet deleted after a scale-down are not counted, so the new ReplicaSet grows in the
same step (a lagging old status costs no hand-off); while such pods terminate, the live
pods may briefly exceed replicas + maxSurge, as in Kubernetes. One guard goes beyond
Kubernetes, so availability holds even while a ReplicaSet's status lags its spec: a
ReplicaSet counts as min(status.availableReplicas, spec.replicas) available pods when
deciding how far old ones may shrink.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Iterable, Sequence

HASH_LABEL = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
REVISION_HISTORY_ANNOTATION = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
ROLLBACK_TO_ANNOTATION = "deprecated.deployment.rollback.to"
#: annotations never copied from a Deployment to its ReplicaSets (skipCopyAnnotation)
SKIP_COPY_ANNOTATIONS = frozenset({LAST_APPLIED_ANNOTATION, REVISION_ANNOTATION, REVISION_HISTORY_ANNOTATION,
                                   DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, ROLLBACK_TO_ANNOTATION})
MAX_REVISION_HISTORY_CHARS = 2000

# condition types and reasons (deployment_util.go)
PROGRESSING = "Progressing"
AVAILABLE = "Available"
REPLICA_FAILURE = "ReplicaFailure"
NEW_RS_REASON = "NewReplicaSetCreated"
FOUND_NEW_RS_REASON = "FoundNewReplicaSet"
RS_UPDATED_REASON = "ReplicaSetUpdated"
NEW_RS_AVAILABLE_REASON = "NewReplicaSetAvailable"
TIMED_OUT_REASON = "ProgressDeadlineExceeded"
FAILED_RS_CREATE_REASON = "ReplicaSetCreateError"
PAUSED_REASON = "DeploymentPaused"
RESUMED_REASON = "DeploymentResumed"
MIN_AVAILABLE_REASON = "MinimumReplicasAvailable"
MIN_UNAVAILABLE_REASON = "MinimumReplicasUnavailable"

_SAFE = "bcdfghjklmnpqrstvwxz2456789"


class RolloutError(ValueError):
    """A Deployment whose rollout parameters cannot be used (a malformed maxSurge, ...)."""


# -- small accessors ------------------------------------------------------------------------

def spec_replicas(obj: dict | None, *, default: int = 1) -> int:
    """spec.replicas of a Deployment or ReplicaSet (0 for a missing ReplicaSet)."""
    if obj is None:
        return 0
    value = (obj.get("spec") or {}).get("replicas", default)
    return int(value) if value is not None else default


def status_count(obj: dict | None, field: str) -> int:
    if obj is None:
        return 0
    return int((obj.get("status") or {}).get(field) or 0)


def annotations(obj: dict) -> dict:
    return (obj.get("metadata") or {}).get("annotations") or {}


def is_rolling_update(d: dict) -> bool:
    return ((d.get("spec") or {}).get("strategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"


def is_recreate(d: dict) -> bool:
    return ((d.get("spec") or {}).get("strategy") or {}).get("type") == "Recreate"


def progress_deadline(d: dict) -> int | None:
    """spec.progressDeadlineSeconds, None when unset or 'infinite' (MaxInt32) as Kubernetes treats it."""
    value = (d.get("spec") or {}).get("progressDeadlineSeconds")
    if value is None or int(value) == 2**31 - 1:
        return None
    return int(value)


def revision_history_limit(d: dict) -> int | None:
    value = (d.get("spec") or {}).get("revisionHistoryLimit")
    return None if value is None else int(value)


def created_key(obj: dict) -> tuple[str, str]:
    """ReplicaSetsByCreationTimestamp: by creation time, then name."""
    meta = obj.get("metadata") or {}
    return meta.get("creationTimestamp") or "", meta.get("name") or ""


def active(rss: Iterable[dict | None]) -> list[dict]:
    """FilterActiveReplicaSets: those that want pods."""
    return [rs for rs in rss if rs is not None and spec_replicas(rs) > 0]


def replica_count(rss: Iterable[dict | None]) -> int:
    """GetReplicaCountForReplicaSets: the sum of spec.replicas."""
    return sum(spec_replicas(rs) for rs in rss if rs is not None)


def actual_count(rss: Iterable[dict | None]) -> int:
    """GetActualReplicaCountForReplicaSets: the sum of status.replicas."""
    return sum(status_count(rs, "replicas") for rs in rss if rs is not None)


def available_lower_bound(rss: Iterable[dict | None]) -> int:
    """Available pods that will remain: min(status.availableReplicas, spec.replicas) each."""
    return sum(min(status_count(rs, "availableReplicas"), spec_replicas(rs)) for rs in rss if rs is not None)


# -- surge and unavailability ---------------------------------------------------------------

def scaled_value(value: int | str | None, total: int, *, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an int as is, "N%" of total rounded as asked."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise RolloutError(f"invalid value {value!r}: want an integer or a percentage")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%"):
        try:
            percent = int(text[:-1])
        except ValueError:
            raise RolloutError(f"invalid value {value!r}: want an integer or a percentage") from None
        product = percent * total
        return -(-product // 100) if round_up else product // 100
    try:
        return int(text)
    except ValueError:
        raise RolloutError(f"invalid value {value!r}: want an integer or a percentage") from None


def resolve_fenceposts(max_surge: int | str | None, max_unavailable: int | str | None,
                       desired: int) -> tuple[int, int]:
    """ResolveFenceposts: (surge rounded up, unavailable rounded down); both 0 -> unavailable 1."""
    surge = scaled_value(max_surge if max_surge is not None else 0, desired, round_up=True)
    unavailable = scaled_value(max_unavailable if max_unavailable is not None else 0, desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def rolling_params(d: dict) -> tuple[int | str | None, int | str | None]:
    rolling = ((d.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    return rolling.get("maxSurge", "25%"), rolling.get("maxUnavailable", "25%")


def max_surge(d: dict) -> int:
    """MaxSurge: extra pods a RollingUpdate may run above spec.replicas (0 for Recreate)."""
    if not is_rolling_update(d):
        return 0
    surge, unavailable = rolling_params(d)
    return resolve_fenceposts(surge, unavailable, spec_replicas(d))[0]


def max_unavailable(d: dict) -> int:
    """MaxUnavailable: pods a RollingUpdate may have unavailable (0 for Recreate or 0 replicas)."""
    replicas = spec_replicas(d)
    if not is_rolling_update(d) or replicas == 0:
        return 0
    surge, unavailable = rolling_params(d)
    return min(resolve_fenceposts(surge, unavailable, replicas)[1], replicas)


def min_available(d: dict) -> int:
    return spec_replicas(d) - max_unavailable(d)


# -- scaling decisions ----------------------------------------------------------------------

def new_rs_new_replicas(d: dict, all_rss: Sequence[dict | None], new_rs: dict | None) -> int:
    """NewRSNewReplicas: how big the new ReplicaSet may be now (spec.replicas counted, as Kubernetes)."""
    replicas = spec_replicas(d)
    current_new = spec_replicas(new_rs) if new_rs is not None else 0
    if is_rolling_update(d):
        surge, _ = rolling_params(d)
        max_total = replicas + scaled_value(surge, replicas, round_up=True)
        current = replica_count(all_rss)
        if current >= max_total:
            return current_new
        return current_new + max(0, min(max_total - current, replicas - current_new))
    return replicas


def plan_old_scale_down(d: dict, old_rss: Sequence[dict], new_rs: dict | None) -> list[tuple[dict, int]]:
    """reconcileOldReplicaSets: (ReplicaSet, new size) for old ReplicaSets to shrink now.

    First unhealthy replicas (spec above available), oldest ReplicaSet first, within
    what the new ReplicaSet's unavailable pods leave; then healthy ones, only as far as
    keeps `replicas - maxUnavailable` pods available.
    """
    sizes = {id(rs): spec_replicas(rs) for rs in old_rss}
    old_count = sum(sizes.values())
    if old_count == 0:
        return []
    floor = min_available(d)
    all_count = old_count + (spec_replicas(new_rs) if new_rs is not None else 0)
    new_unavailable = (spec_replicas(new_rs) - status_count(new_rs, "availableReplicas")) if new_rs else 0
    max_scaled_down = all_count - floor - max(0, new_unavailable)
    if max_scaled_down <= 0:
        return []
    ordered = sorted(old_rss, key=created_key)
    # cleanupUnhealthyReplicas
    cleaned = 0
    for rs in ordered:
        if cleaned >= max_scaled_down:
            break
        size = sizes[id(rs)]
        healthy = min(status_count(rs, "availableReplicas"), size)
        if size == 0 or size == healthy:
            continue
        step = min(max_scaled_down - cleaned, size - healthy)
        sizes[id(rs)] = size - step
        cleaned += step
    # scaleDownOldReplicaSetsForRollingUpdate
    available = sum(min(status_count(rs, "availableReplicas"), sizes[id(rs)]) for rs in old_rss)
    if new_rs is not None:
        available += available_lower_bound([new_rs])
    if available > floor:
        budget, done = available - floor, 0
        for rs in ordered:
            if done >= budget:
                break
            size = sizes[id(rs)]
            if size == 0:
                continue
            step = min(size, budget - done)
            sizes[id(rs)] = size - step
            done += step
    return [(rs, sizes[id(rs)]) for rs in ordered if sizes[id(rs)] != spec_replicas(rs)]


def _round_half_away(value: float) -> int:
    """integer.RoundToInt32 (math.Round: halves away from zero)."""
    return int(math.floor(value + 0.5)) if value >= 0 else -int(math.floor(-value + 0.5))


def replica_set_fraction(rs: dict, d: dict) -> int:
    """getReplicaSetFraction: how many replicas this ReplicaSet gains (or loses) in a resize."""
    if spec_replicas(d) == 0:
        return -spec_replicas(rs)
    deployment_replicas = spec_replicas(d) + max_surge(d)
    try:
        annotated = int(annotations(rs).get(MAX_REPLICAS_ANNOTATION))
    except (TypeError, ValueError):
        annotated = status_count(d, "replicas")
    if annotated == 0:
        return 0
    return _round_half_away(spec_replicas(rs) * deployment_replicas / annotated) - spec_replicas(rs)


def proportion(rs: dict, d: dict, to_add: int, added: int) -> int:
    """GetProportion: this ReplicaSet's share of `to_add`, given `added` already handed out."""
    if spec_replicas(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = replica_set_fraction(rs, d)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def plan_proportional_scale(d: dict, new_rs: dict | None, old_rss: Sequence[dict]) -> list[tuple[dict, int]]:
    """The RollingUpdate branch of scale(): spread a resize over the active ReplicaSets.

    Bigger ReplicaSets get their share first (newer first when scaling up, older first
    when scaling down); the leftover goes to the first. Returns (ReplicaSet, new size)
    for every active ReplicaSet, in update order.
    """
    all_rss = active([*old_rss, new_rs])
    replicas = spec_replicas(d)
    allowed = replicas + max_surge(d) if replicas > 0 else 0
    to_add = allowed - replica_count(all_rss)
    if to_add > 0:  # ReplicaSetsBySizeNewer
        all_rss.sort(key=created_key, reverse=True)
        all_rss.sort(key=spec_replicas, reverse=True)
    elif to_add < 0:  # ReplicaSetsBySizeOlder
        all_rss.sort(key=created_key)
        all_rss.sort(key=spec_replicas, reverse=True)
    sizes: list[int] = []
    added = 0
    for rs in all_rss:
        share = proportion(rs, d, to_add, added) if to_add else 0
        sizes.append(spec_replicas(rs) + share)
        added += share
    if all_rss and to_add:
        sizes[0] = max(0, sizes[0] + to_add - added)
    return list(zip(all_rss, sizes))


def is_saturated(d: dict, rs: dict | None) -> bool:
    """IsSaturated: the new ReplicaSet has all the Deployment's replicas, all available."""
    if rs is None:
        return False
    try:
        desired = int(annotations(rs).get(DESIRED_REPLICAS_ANNOTATION))
    except (TypeError, ValueError):
        return False
    replicas = spec_replicas(d)
    return desired == replicas and spec_replicas(rs) == replicas and status_count(rs, "availableReplicas") == replicas


def find_active_or_latest(new_rs: dict | None, old_rss: Sequence[dict]) -> dict | None:
    """FindActiveOrLatest: the only active ReplicaSet, or the newest when none is active."""
    if new_rs is None and not old_rss:
        return None
    newest_first = sorted(old_rss, key=created_key, reverse=True)
    live = active([*newest_first, new_rs])
    if not live:
        return new_rs if new_rs is not None else newest_first[0]
    return live[0] if len(live) == 1 else None


def is_scaling_event(d: dict, new_rs: dict | None, old_rss: Sequence[dict]) -> bool:
    """isScalingEvent: some active ReplicaSet was sized for a different spec.replicas."""
    for rs in active([*old_rss, new_rs]):
        value = annotations(rs).get(DESIRED_REPLICAS_ANNOTATION)
        try:
            desired = int(value)
        except (TypeError, ValueError):
            continue
        if desired != spec_replicas(d):
            return True
    return False


def rs_to_clean_up(d: dict, old_rss: Sequence[dict]) -> list[dict]:
    """cleanupDeployment: the oldest revisions beyond revisionHistoryLimit that are empty and settled."""
    limit = revision_history_limit(d)
    if limit is None:
        return []
    alive = [rs for rs in old_rss if not rs["metadata"].get("deletionTimestamp")]
    diff = len(alive) - limit
    if diff <= 0:
        return []
    alive.sort(key=lambda rs: (revision_of(rs), created_key(rs)))
    doomed = []
    for rs in alive[:diff]:
        if status_count(rs, "replicas") != 0 or spec_replicas(rs) != 0:
            continue
        if rs["metadata"].get("generation", 1) > int((rs.get("status") or {}).get("observedGeneration") or 0):
            continue
        doomed.append(rs)
    return doomed


# -- templates, hashes, revisions -----------------------------------------------------------

def _normalized_template(template: dict | None) -> dict:
    """A template with the hash label removed and empty label/annotation maps dropped."""
    t = copy.deepcopy(template or {})
    meta = t.get("metadata")
    if isinstance(meta, dict):
        labels = dict(meta.get("labels") or {})
        labels.pop(HASH_LABEL, None)
        for key, value in (("labels", labels), ("annotations", meta.get("annotations"))):
            if value:
                meta[key] = value
            else:
                meta.pop(key, None)
        meta.pop("creationTimestamp", None)
        if not meta:
            t.pop("metadata")
    return t


def pod_template_hash(template: dict | None, collision_count: int | None = None) -> str:
    """controller.ComputeHash: FNV-32a of the template (and collisionCount), safe-encoded."""
    data = json.dumps(_normalized_template(template), sort_keys=True, separators=(",", ":")).encode()
    if collision_count is not None:
        data += int(collision_count).to_bytes(8, "little", signed=False)
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in str(value))


def equal_ignore_hash(t1: dict | None, t2: dict | None) -> bool:
    """EqualIgnoreHash: two pod templates are the same apart from pod-template-hash."""
    return _normalized_template(t1) == _normalized_template(t2)


def template_of(obj: dict) -> dict:
    return (obj.get("spec") or {}).get("template") or {}


def find_new_replica_set(d: dict, rss: Sequence[dict]) -> dict | None:
    """FindNewReplicaSet: the oldest ReplicaSet whose template equals the Deployment's."""
    for rs in sorted(rss, key=created_key):
        if equal_ignore_hash(template_of(rs), template_of(d)):
            return rs
    return None


def revision_of(obj: dict | None) -> int:
    """The deployment.kubernetes.io/revision annotation (0 when missing or malformed)."""
    if obj is None:
        return 0
    try:
        return int(annotations(obj).get(REVISION_ANNOTATION, 0))
    except (TypeError, ValueError):
        return 0


def max_revision(rss: Iterable[dict]) -> int:
    return max((revision_of(rs) for rs in rss), default=0)


def copy_deployment_annotations(d: dict, rs: dict) -> bool:
    """copyDeploymentAnnotationsToReplicaSet: the Deployment's own annotations onto rs; changed?"""
    target = rs["metadata"].setdefault("annotations", {})
    changed = False
    for key, value in annotations(d).items():
        if key in SKIP_COPY_ANNOTATIONS or target.get(key) == value:
            continue
        target[key] = value
        changed = True
    return changed


def set_replicas_annotations(rs: dict, desired: int, max_replicas: int) -> bool:
    """SetReplicasAnnotations: desired-replicas and max-replicas on rs; changed?"""
    target = rs["metadata"].setdefault("annotations", {})
    changed = False
    for key, value in ((DESIRED_REPLICAS_ANNOTATION, str(desired)), (MAX_REPLICAS_ANNOTATION, str(max_replicas))):
        if target.get(key) != value:
            target[key] = value
            changed = True
    return changed


def set_new_replica_set_annotations(d: dict, rs: dict, new_revision: int, *, exists: bool) -> bool:
    """SetNewReplicaSetAnnotations: copy annotations, raise the revision, keep its history; changed?"""
    changed = copy_deployment_annotations(d, rs)
    target = rs["metadata"].setdefault("annotations", {})
    old_text = target.get(REVISION_ANNOTATION)
    try:
        old_revision = int(old_text) if old_text not in (None, "") else 0
    except ValueError:
        return changed
    if old_revision < new_revision:
        target[REVISION_ANNOTATION] = str(new_revision)
        changed = True
        if old_text not in (None, ""):
            # rolled back to this ReplicaSet: remember the revisions it had
            history = [r for r in (target.get(REVISION_HISTORY_ANNOTATION) or "").split(",") if r]
            history.append(str(old_text))
            while history and len(",".join(history)) > MAX_REVISION_HISTORY_CHARS:
                history.pop(0)
            target[REVISION_HISTORY_ANNOTATION] = ",".join(history)
    if not exists and set_replicas_annotations(rs, spec_replicas(d), spec_replicas(d) + max_surge(d)):
        changed = True
    return changed


# -- status and conditions ------------------------------------------------------------------

def get_condition(status: dict | None, type_: str) -> dict | None:
    for cond in (status or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return cond
    return None


def new_condition(type_: str, status: str, reason: str, message: str, now: str) -> dict:
    return {"type": type_, "status": status, "lastUpdateTime": now, "lastTransitionTime": now,
            "reason": reason, "message": message}


def set_condition(status: dict, cond: dict) -> None:
    """SetDeploymentCondition: replace the condition of its type unless status and reason match."""
    current = get_condition(status, cond["type"])
    if current is not None and current.get("status") == cond["status"] and current.get("reason") == cond["reason"]:
        return
    cond = dict(cond)
    if current is not None and current.get("status") == cond["status"]:
        cond["lastTransitionTime"] = current.get("lastTransitionTime", cond["lastTransitionTime"])
    status["conditions"] = [c for c in status.get("conditions") or () if c.get("type") != cond["type"]] + [cond]


def remove_condition(status: dict, type_: str) -> None:
    conditions = [c for c in status.get("conditions") or () if c.get("type") != type_]
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)


def calculate_status(d: dict, all_rss: Sequence[dict | None], new_rs: dict | None, now: str) -> dict:
    """calculateStatus: counts from the ReplicaSets' status, and the Available condition."""
    rss = [rs for rs in all_rss if rs is not None]
    available = sum(status_count(rs, "availableReplicas") for rs in rss)
    unavailable = max(0, replica_count(rss) - available)
    old = d.get("status") or {}
    status: dict = {
        "observedGeneration": d["metadata"].get("generation", 1),
        "replicas": actual_count(rss),
        "updatedReplicas": actual_count([new_rs]),
        "readyReplicas": sum(status_count(rs, "readyReplicas") for rs in rss),
        "availableReplicas": available,
        "unavailableReplicas": unavailable,
    }
    if old.get("collisionCount") is not None:
        status["collisionCount"] = old["collisionCount"]
    if old.get("conditions"):
        status["conditions"] = [dict(c) for c in old["conditions"]]
    if available >= min_available(d):
        set_condition(status, new_condition(AVAILABLE, "True", MIN_AVAILABLE_REASON,
                                            "Deployment has minimum availability.", now))
    else:
        set_condition(status, new_condition(AVAILABLE, "False", MIN_UNAVAILABLE_REASON,
                                            "Deployment does not have minimum availability.", now))
    return status


def deployment_complete(d: dict, status: dict) -> bool:
    """DeploymentComplete: every replica updated and available, and the latest spec observed."""
    replicas = spec_replicas(d)
    return (int(status.get("updatedReplicas") or 0) == replicas and int(status.get("replicas") or 0) == replicas
            and int(status.get("availableReplicas") or 0) == replicas
            and int(status.get("observedGeneration") or 0) >= d["metadata"].get("generation", 1))


def deployment_progressing(d: dict, new_status: dict) -> bool:
    """DeploymentProgressing: more updated, fewer old, more ready or more available pods than before."""
    old = d.get("status") or {}

    def n(s: dict, f: str) -> int:
        return int(s.get(f) or 0)

    return (n(new_status, "updatedReplicas") > n(old, "updatedReplicas")
            or (n(new_status, "replicas") - n(new_status, "updatedReplicas")
                < n(old, "replicas") - n(old, "updatedReplicas"))
            or n(new_status, "readyReplicas") > n(old, "readyReplicas")
            or n(new_status, "availableReplicas") > n(old, "availableReplicas"))


def seconds_until_deadline(d: dict, status: dict, now: float) -> float | None:
    """Seconds left before the Progressing condition's lastUpdateTime + progressDeadlineSeconds."""
    from kctl.controllers.replicaset import parse_time

    deadline = progress_deadline(d)
    cond = get_condition(status, PROGRESSING)
    if deadline is None or cond is None:
        return None
    since = parse_time(cond.get("lastUpdateTime"))
    if since is None:
        return None
    return since.timestamp() + deadline - now


def deployment_timed_out(d: dict, status: dict, now: float) -> bool:
    """DeploymentTimedOut: no progress reported for progressDeadlineSeconds."""
    cond = get_condition(status, PROGRESSING)
    if progress_deadline(d) is None or cond is None:
        return False
    if cond.get("reason") == NEW_RS_AVAILABLE_REASON:
        return False
    if cond.get("reason") == TIMED_OUT_REASON:
        return True
    left = seconds_until_deadline(d, status, now)
    return left is not None and left < 0

