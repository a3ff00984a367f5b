"""kubectl describe's layouts for the policy kinds admission enforces: ResourceQuota, LimitRange, PriorityClass.

As kubectl's describeQuota (its scopes with their help text, then a `Resource Used Hard` table
from the status, used written in hard's format), describeLimitRange (one line per item and
resource: `Type Resource Min Max Default Request Default Limit Max Limit/Request Ratio`, `-`
where unset) and describePriorityClass. Entries of the kind -> describer table in
kctl.output.describe.
"""

from __future__ import annotations

from kctl.machinery.quantity import parse_quantity
from kctl.machinery.quantity_format import canonical, format_of, format_quantity
from kctl.output.describe.context import Context
from kctl.output.describe.sections import write_events, write_header
from kctl.output.describe.writer import PrefixWriter

__all__ = ["describe_limit_range", "describe_priority_class", "describe_quota"]

#: kubectl's helpTextForResourceQuotaScope
_SCOPE_HELP = {
    "Terminating": "Matches all pods that have an active deadline. These pods have a limited lifespan on a node "
                   "before being actively terminated by the system.",
    "NotTerminating": "Matches all pods that do not have an active deadline. These pods usually include long "
                      "running pods whose container command is not expected to terminate.",
    "BestEffort": "Matches all pods that do not have resource requirements set. These pods have a best effort "
                  "quality of service.",
    "NotBestEffort": "Matches all pods that have at least one resource requirement set. These pods have a burstable "
                     "or guaranteed quality of service.",
}


def _quantity(value: object) -> str:
    try:
        return canonical(value)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return str(value)


def _used(used: object, hard: object) -> str:
    """The used amount written as the hard one is (kubectl converts when their formats differ)."""
    try:
        return format_quantity(parse_quantity(used), fmt=format_of(hard))  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return str(used)


def describe_quota(w: PrefixWriter, quota: dict, ctx: Context) -> None:
    """kubectl's describeQuota: name, namespace, scopes, then each status.hard name's used and hard amounts."""
    meta, spec, status = quota.get("metadata") or {}, quota.get("spec") or {}, quota.get("status") or {}
    write_header(w, meta)
    scopes = sorted(str(s) for s in spec.get("scopes") or [])
    if scopes:
        w.write(0, f"Scopes:\t{', '.join(scopes)}\n")
        for scope in scopes:
            if scope in _SCOPE_HELP:
                w.write(0, f" * {_SCOPE_HELP[scope]}\n")
    w.write(0, "Resource\tUsed\tHard\n")
    w.write(0, "--------\t----\t----\n")
    hard, used = status.get("hard") or {}, status.get("used") or {}
    for name in sorted(hard):
        w.write(0, f"{name}\t{_used(used.get(name, 0), hard[name])}\t{_quantity(hard[name])}\n")


def describe_limit_range(w: PrefixWriter, limit_range: dict, ctx: Context) -> None:
    """kubectl's describeLimitRange: one line per item and resource, `-` where a value is unset."""
    meta = limit_range.get("metadata") or {}
    write_header(w, meta)
    w.write(0, "Type\tResource\tMin\tMax\tDefault Request\tDefault Limit\tMax Limit/Request Ratio\n")
    w.write(0, "----\t--------\t---\t---\t---------------\t-------------\t-----------------------\n")
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if not isinstance(item, dict):
            continue
        columns = [item.get(key) if isinstance(item.get(key), dict) else {}
                   for key in ("min", "max", "defaultRequest", "default", "maxLimitRequestRatio")]
        for resource in sorted({name for column in columns for name in column}):
            cells = [_quantity(column[resource]) if resource in column else "-" for column in columns]
            w.write(0, "\t".join([str(item.get("type", "")), resource, *cells]) + "\n")


def describe_priority_class(w: PrefixWriter, pc: dict, ctx: Context) -> None:
    """kubectl's describePriorityClass: value, global default, preemption policy, description, annotations, events."""
    meta = pc.get("metadata") or {}
    write_header(w, meta, namespace=False)
    w.write(0, f"Value:\t{pc.get('value') or 0}\n")
    w.write(0, f"GlobalDefault:\t{'true' if pc.get('globalDefault') is True else 'false'}\n")
    w.write(0, f"PreemptionPolicy:\t{pc.get('preemptionPolicy') or ''}\n")
    w.write(0, f"Description:\t{pc.get('description') or ''}\n")
    annotations = meta.get("annotations") or {}
    w.write(0, "Annotations:\t" + (",".join(f"{k}={annotations[k]}" for k in sorted(annotations)) or "<none>") + "\n")
    write_events(w, ctx.events, ctx.now)
