"""What an object charges to a ResourceQuota: Kubernetes' quota evaluators (pkg/quota/v1/evaluator/core).

`usage(rt, obj)` is what one object uses (a pod: `pods`, `count/pods`, `requests.cpu`, `cpu`,
`limits.memory` ...; a Service: `services`, `services.nodeports`, `services.loadbalancers`; a
claim: `persistentvolumeclaims`, `requests.storage` and the per-StorageClass names; any
namespaced kind: `count/<resource>.<group>`). `quota_matches(quota, rt, obj)` says whether a
quota constrains the object (one of its `spec.hard` names is charged by the object's kind, and
its scopes, `spec.scopes` and `spec.scopeSelector`, select it). `kind_usage` adds up the
stored objects of one kind in a namespace for a quota. `pod_constraint_error` is the old rule that a quota
on cpu or memory needs every container to say its request/limit of it.

Used by the ResourceQuota admission plugin (kctl.admission.plugins.resourcequota, which refuses
what would exceed `spec.hard`) and the quota controller (kctl.controllers.resourcequota, which
writes `status.used`); both read the same numbers, so `kctl get quota` agrees with admission.
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Callable

from kctl.admission.podresources import pod_totals, resource_list
from kctl.machinery.quantity_format import Format, format_of, format_quantity
from kctl.machinery.resources import ResourceType
from kctl.machinery.times import parse_time

#: resource name -> amount
Usage = dict[str, Fraction]

#: the kinds charged more than their object count (each has its own evaluator below)
POD, SERVICE, PVC = "Pod", "Service", "PersistentVolumeClaim"
#: `<class>.storageclass.storage.k8s.io/requests.storage`: a claim's charge to its StorageClass
_STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
#: core kinds Kubernetes also counts under a bare name (`configmaps` as well as `count/configmaps`)
_LEGACY_COUNTS = {"ConfigMap": "configmaps", "Secret": "secrets", "ResourceQuota": "resourcequotas",
                  "ReplicationController": "replicationcontrollers"}
#: a quota on any of these makes every container state its own (the evaluator's validationSet)
_CONTAINER_REQUIRED = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")
_COMPUTE = ("cpu", "memory", "ephemeral-storage")
#: the kinds whose UPDATE may change what they charge (pods only when their resources change)
UPDATE_CHARGED = frozenset({POD, SERVICE, PVC})


def count_name(rt: ResourceType) -> str:
    """`count/<resource>[.<group>]`: the object-count name of a kind (`count/deployments.apps`)."""
    return f"count/{rt.group_resource}"


def _charges_resource(rt: ResourceType, name: str) -> bool:
    """Whether objects of rt are charged for the quota resource `name` (the evaluator's MatchingResources)."""
    kind = rt.group_kind
    if name == count_name(rt) or name == _LEGACY_COUNTS.get(kind):
        return True
    if kind == POD:
        return name in ("pods",) + _COMPUTE or name.startswith(("requests.", "limits.", "hugepages-"))
    if kind == SERVICE:
        return name in ("services", "services.nodeports", "services.loadbalancers")
    if kind == PVC:
        return name in ("persistentvolumeclaims", "requests.storage") or (
            _STORAGE_CLASS_SUFFIX in name and name.endswith(("/requests.storage", "/persistentvolumeclaims")))
    return False


def charged_names(rt: ResourceType, hard: dict) -> list[str]:
    """The names of `hard` that objects of rt are charged for."""
    return [name for name in hard if _charges_resource(rt, name)]


def pod_is_active(pod: dict, *, now: float | None = None) -> bool:
    """Not terminal (Kubernetes' QuotaV1Pod): not Succeeded/Failed, not past its deletion grace period."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    meta = pod.get("metadata") or {}
    deleted, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if deleted and isinstance(grace, (int, float)):
        try:
            end = parse_time(deleted).timestamp() + grace
        except (ValueError, TypeError):
            return True
        return (time.time() if now is None else now) <= end
    return True


def _compute_usage(requests: Usage, limits: Usage) -> Usage:
    """podComputeUsageHelper: what one container's (or the pod's) requests and limits charge."""
    result: Usage = {"pods": Fraction(1)}
    for name in _COMPUTE:
        if name in requests:
            result[name] = result[f"requests.{name}"] = requests[name]
        if name in limits:
            result[f"limits.{name}"] = limits[name]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            result[name] = result[f"requests.{name}"] = value
        elif "/" in name and not name.startswith(("kubernetes.io/", "requests.")):  # an extended resource
            result[f"requests.{name}"] = value
    for name, value in limits.items():
        if name.startswith("hugepages-"):
            result[f"limits.{name}"] = value
    return result


def pod_usage(pod: dict, *, now: float | None = None) -> Usage:
    """What a pod charges: `count/pods` always; `pods` and its compute resources while it is active."""
    result: Usage = {"count/pods": Fraction(1)}
    if not pod_is_active(pod, now=now):
        return result
    spec = pod.get("spec") or {}
    requests, _ = pod_totals(spec, "requests")
    limits, _ = pod_totals(spec, "limits")
    result.update(_compute_usage(requests, limits))
    return result


def _service_usage(svc: dict) -> Usage:
    spec = svc.get("spec") or {}
    ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]
    result: Usage = {"count/services": Fraction(1), "services": Fraction(1),
                     "services.loadbalancers": Fraction(0), "services.nodeports": Fraction(0)}
    kind = spec.get("type")
    if kind == "NodePort":
        result["services.nodeports"] = Fraction(len(ports))
    elif kind == "LoadBalancer":
        if spec.get("allocateLoadBalancerNodePorts") is False:
            result["services.nodeports"] = Fraction(sum(1 for p in ports if p.get("nodePort")))
        else:
            result["services.nodeports"] = Fraction(len(ports))
        result["services.loadbalancers"] = Fraction(1)
    return result


def claim_storage_class(claim: dict) -> str:
    """A claim's class: spec.storageClassName, else the beta annotation (GetPersistentVolumeClaimClass)."""
    name = (claim.get("spec") or {}).get("storageClassName")
    if name is None:
        name = ((claim.get("metadata") or {}).get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class")
    return name if isinstance(name, str) else ""


def _claim_usage(claim: dict) -> Usage:
    result: Usage = {"persistentvolumeclaims": Fraction(1), "count/persistentvolumeclaims": Fraction(1)}
    cls = claim_storage_class(claim)
    if cls:
        result[f"{cls}{_STORAGE_CLASS_SUFFIX}persistentvolumeclaims"] = Fraction(1)
    requested, _ = resource_list(((claim.get("spec") or {}).get("resources") or {}).get("requests"))
    allocated, _ = resource_list((claim.get("status") or {}).get("allocatedResources"))
    storage = max([v for v in (requested.get("storage"), allocated.get("storage")) if v is not None], default=None)
    if storage is not None:
        result["requests.storage"] = storage
        if cls:
            result[f"{cls}{_STORAGE_CLASS_SUFFIX}requests.storage"] = storage
    return result


def usage(rt: ResourceType, obj: dict, *, now: float | None = None) -> Usage:
    """Everything one object of kind rt charges (each evaluator's Usage)."""
    kind = rt.group_kind
    if kind == POD:
        return pod_usage(obj, now=now)
    if kind == SERVICE:
        return _service_usage(obj)
    if kind == PVC:
        return _claim_usage(obj)
    result: Usage = {count_name(rt): Fraction(1)}
    if kind in _LEGACY_COUNTS:
        result[_LEGACY_COUNTS[kind]] = Fraction(1)
    return result


def quota_scopes(quota: dict) -> list[tuple[str, str, list[str]]]:
    """(scopeName, operator, values) of spec.scopes (operator Exists) and spec.scopeSelector.matchExpressions."""
    spec = quota.get("spec") or {}
    scopes = [(str(s), "Exists", []) for s in spec.get("scopes") or []]
    for expr in ((spec.get("scopeSelector") or {}).get("matchExpressions") or []):
        if isinstance(expr, dict):
            scopes.append((str(expr.get("scopeName")), str(expr.get("operator") or "Exists"),
                           [str(v) for v in expr.get("values") or []]))
    return scopes


def _pod_in_scope(pod: dict, scope: str, operator: str, values: list[str]) -> bool:
    """podMatchesScopeFunc: one scope against a pod."""
    spec = pod.get("spec") or {}
    if scope == "PriorityClass":
        name = spec.get("priorityClassName") or ""
        if operator == "Exists":
            return bool(name)
        if operator == "DoesNotExist":
            return not name
        if operator == "In":
            return bool(name) and name in values
        if operator == "NotIn":
            return not name or name not in values
        return False
    deadline = spec.get("activeDeadlineSeconds")
    terminating = isinstance(deadline, int) and deadline >= 0
    best_effort = (pod.get("status") or {}).get("qosClass") == "BestEffort"
    if not (pod.get("status") or {}).get("qosClass"):
        from kctl.admission.defaults import pod_qos_class

        best_effort = pod_qos_class(spec) == "BestEffort"
    matched = {"Terminating": terminating, "NotTerminating": not terminating, "BestEffort": best_effort,
               "NotBestEffort": not best_effort}.get(scope, False)
    return not matched if operator == "DoesNotExist" else matched


def quota_matches(quota: dict, rt: ResourceType, obj: dict) -> bool:
    """Whether `quota` constrains `obj`: it names a resource the kind is charged for, and its scopes select it.

    As Kubernetes: only pods can be in a scope, so a quota with scopes matches no other kind.
    """
    hard = (quota.get("spec") or {}).get("hard") or {}
    if not charged_names(rt, hard):
        return False
    scopes = quota_scopes(quota)
    if not scopes:
        return True
    if rt.group_kind != POD:
        return False
    return all(_pod_in_scope(obj, *scope) for scope in scopes)


def pod_constraint_error(quota: dict, pod: dict) -> str | None:
    """`must specify limits.cpu for: app; requests.memory for: app,side` when the quota constrains cpu or
    memory and a container does not state it (the pod evaluator's Constraints); None when all do."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    required = {name for name in _CONTAINER_REQUIRED if name in hard}
    if not required:
        return None
    spec = pod.get("spec") or {}
    missing: dict[str, set[str]] = {}
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            resources = container.get("resources") or {}
            requests, _ = resource_list(resources.get("requests"))
            limits, _ = resource_list(resources.get("limits"))
            for name in required - set(_compute_usage(requests, limits)):
                missing.setdefault(name, set()).add(str(container.get("name") or ""))
    if not missing:
        return None
    return "must specify " + "; ".join(f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing))


def kind_usage(quota: dict, rt: ResourceType, objects: list[dict], *, now: float | None = None) -> Usage:
    """What `objects` (the stored objects of kind rt in the quota's namespace) use of the quota's hard names
    that rt is charged for (0 each when none); names charged by other kinds are left out."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    names = charged_names(rt, hard)
    used: Usage = {name: Fraction(0) for name in names}
    if not names:
        return used
    for obj in objects:
        if not quota_matches(quota, rt, obj):
            continue
        charged = usage(rt, obj, now=now)
        for name in names:
            if name in charged:
                used[name] += charged[name]
    return used


def kind_charged_by(name: str, resource: Callable[[str], ResourceType | None]) -> ResourceType | None:
    """The kind a quota resource name charges (`requests.cpu` -> pods, `count/deployments.apps` -> Deployment).

    `resource(plural_or_group_resource)` looks a kind up by name (None when unknown).
    """
    if name.startswith("count/"):
        return resource(name.removeprefix("count/"))
    if name in ("services", "services.nodeports", "services.loadbalancers"):
        return resource("services")
    if name in ("persistentvolumeclaims", "requests.storage") or _STORAGE_CLASS_SUFFIX in name:
        return resource("persistentvolumeclaims")
    legacy = {plural: plural for plural in _LEGACY_COUNTS.values()}
    if name in legacy:
        return resource(name)
    if name == "pods" or name in _COMPUTE or name.startswith(("requests.", "limits.", "hugepages-")):
        return resource("pods")
    return None


def hard_format(quota: dict, name: str) -> Format:
    """The format of a quota's hard value for `name` (used amounts are written in it, as kubectl shows them)."""
    return format_of(((quota.get("spec") or {}).get("hard") or {}).get(name))


def written(amounts: Usage, formats: dict[str, Format]) -> dict[str, str]:
    """Amounts as quantities written in Kubernetes' canonical form (DecimalSI where no format is known)."""
    return {name: format_quantity(value, fmt=formats.get(name, "DecimalSI")) for name, value in amounts.items()}


__all__ = ["UPDATE_CHARGED", "Usage", "charged_names", "claim_storage_class", "count_name", "hard_format",
           "kind_charged_by", "kind_usage", "pod_constraint_error", "pod_is_active", "pod_usage",
           "quota_matches", "quota_scopes", "usage", "written"]
