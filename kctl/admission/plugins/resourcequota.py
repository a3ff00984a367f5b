"""Kubernetes' ResourceQuota admission plugin: refuse a write that would take a namespace over a quota.

Runs last, after the validating hooks, as in Kubernetes (plugin/pkg/admission/resourcequota).
On CREATE of any namespaced object, and on UPDATE of a pod, Service or claim whose charge
grows (a pod's resources, a Service turned NodePort/LoadBalancer, a bigger claim), for each
ResourceQuota of the namespace that constrains the object (kctl.admission.quota.quota_matches:
its `spec.hard` names something the kind is charged for, its scopes select it):
- a pod must state every container's cpu/memory request or limit the quota constrains
  (`failed quota: q: must specify limits.cpu for: app`);
- what the namespace's stored objects use now plus what this write adds must stay within
  `spec.hard`, else `exceeded quota: q, requested: cpu=1, used: cpu=2, limited: cpu=2`.

Deviations from Kubernetes, documented in docs/admission.md: usage is computed from the stored
objects of the namespace (one list of the quotas and one of the object's kind per request),
not read from `status.used`, so it is enforced without the quota controller running and a
quota is enforced from the moment it is stored; and the check is not made atomic with the
write (Kubernetes writes the quota's status in the same admission, with a resourceVersion
precondition), so two creates racing from two processes, or several objects of one
`kctl apply -f`, may together pass a quota; the quota controller's `status.used` then shows
used above hard, and later creates are refused until usage is back under.

A request it cannot apply to returns before listing anything (deletes, cluster-scoped kinds,
updates that do not grow a charge; status writes skip admission); a create lists the
namespace's quotas, and the stored objects of its kind only when a quota constrains it.
Dry runs are checked like real writes. Registered in kctl.admission.plugins.builtin_plugins.
"""

from __future__ import annotations

from fractions import Fraction

from kctl.admission import quota as q
from kctl.admission.plugins import AdmissionPlugin, Attributes, Lister
from kctl.machinery.errors import Forbidden

RESOURCE_QUOTA = "ResourceQuota"


def _delta(attrs: Attributes) -> q.Usage:
    """What the write adds: the new object's charge, less the stored one's on UPDATE (no negatives, no zeros)."""
    charged = q.usage(attrs.rt, attrs.obj or {})
    if attrs.operation == "UPDATE" and attrs.old_obj is not None:
        before = q.usage(attrs.rt, attrs.old_obj)
        charged = {name: value - before.get(name, Fraction(0)) for name, value in charged.items()}
    return {name: value for name, value in charged.items() if value > 0}


def validate(attrs: Attributes, lister: Lister) -> None:
    """Refuse the write when it would exceed a matching quota of its namespace (see the module docstring)."""
    if not attrs.rt.namespaced or not attrs.namespace or not isinstance(attrs.obj, dict) or attrs.subresource:
        return
    if attrs.operation == "UPDATE":
        if attrs.rt.group_kind not in q.UPDATE_CHARGED:
            return
        delta = _delta(attrs)
        if not delta:
            return  # nothing grows: no list at all
    elif attrs.operation == "CREATE":
        delta = None  # computed once a quota is found
    else:
        return
    matching = [quota for quota in lister(RESOURCE_QUOTA, attrs.namespace)
                if q.quota_matches(quota, attrs.rt, attrs.obj)]
    if not matching:
        return
    if delta is None:
        delta = _delta(attrs)
    stored: list[dict] | None = None
    for quota in matching:
        name = (quota.get("metadata") or {}).get("name", "")
        if attrs.rt.group_kind == q.POD:
            problem = q.pod_constraint_error(quota, attrs.obj)
            if problem:
                raise _forbidden(attrs, f"failed quota: {name}: {problem}")
        hard = (quota.get("spec") or {}).get("hard") or {}
        hard_values = _amounts(hard)
        requested = {res: value for res, value in delta.items() if res in hard_values}
        if not requested:
            continue
        if stored is None:
            stored = lister(attrs.rt.group_kind, attrs.namespace)
        used = q.kind_usage(quota, attrs.rt, stored)
        exceeded = sorted(res for res, value in requested.items()
                          if used.get(res, Fraction(0)) + value > hard_values[res])
        if exceeded:
            formats = {res: q.hard_format(quota, res) for res in exceeded}
            raise _forbidden(attrs, f"exceeded quota: {name}, "
                                    f"requested: {_pretty({r: requested[r] for r in exceeded}, formats)}, "
                                    f"used: {_pretty({r: used.get(r, Fraction(0)) for r in exceeded}, formats)}, "
                                    f"limited: {_pretty({r: hard_values[r] for r in exceeded}, formats)}")


def _amounts(hard: dict) -> dict[str, Fraction]:
    from kctl.admission.podresources import resource_list

    return resource_list(hard)[0]


def _pretty(amounts: q.Usage, formats: dict) -> str:
    """Kubernetes' prettyPrint: `name=value` sorted by name, comma-separated."""
    written = q.written(amounts, formats)
    return ",".join(f"{name}={written[name]}" for name in sorted(written))


def _forbidden(attrs: Attributes, message: str) -> Forbidden:
    return Forbidden(f'{attrs.rt.group_resource} "{attrs.name}" is forbidden: {message}')


PLUGIN = AdmissionPlugin(name="ResourceQuota", validate=validate, last=True)

__all__ = ["PLUGIN"]
