"""`kctl describe hpa`: kubectl's HorizontalPodAutoscalerDescriber (describeHorizontalPodAutoscalerV2).

Registered in kctl.output.describe's DESCRIBERS for HorizontalPodAutoscaler.autoscaling. Shows
the target, each metric as `( current / target )`, the replica bounds, the behavior when the
HPA has one, the target's current and desired pods, the conditions the controller wrote
(kctl/controllers/podautoscaler) and the HPA's Events.
"""

from __future__ import annotations

from kctl.output.describe.context import Context
from kctl.output.describe.sections import rfc1123z, write_annotations, write_events, write_header, write_labels
from kctl.output.describe.writer import PrefixWriter

__all__ = ["describe_hpa"]

_FIELDS = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods", "Object": "object",
           "External": "external"}


def _current(status: dict | None, kind: str) -> dict | None:
    """The `current` of a metric status of the same type, or None."""
    if not isinstance(status, dict) or status.get("type") != kind:
        return None
    return (status.get(_FIELDS[kind]) or {}).get("current") or {}


def _write_metric(w: PrefixWriter, spec: dict, status: dict | None) -> None:
    kind = str(spec.get("type"))
    field = _FIELDS.get(kind)
    if field is None:
        w.write(1, f'<unknown metric type "{kind}">\n')
        return
    source = spec.get(field) or {}
    target = source.get("target") or {}
    current = _current(status, kind)
    if kind in ("Resource", "ContainerResource"):
        where = "on pods" if kind == "Resource" else f"of container \"{source.get('container', '')}\" on pods"
        w.write(1, f"resource {source.get('name', '')} {where}")
        if target.get("averageValue") is not None:
            value = str(current["averageValue"]) if current and current.get("averageValue") is not None \
                else "<unknown>"
            w.write(0, f":\t{value} / {target['averageValue']}\n")
            return
        value = "<unknown>"
        if current and current.get("averageUtilization") is not None:
            value = f"{current['averageUtilization']}% ({current.get('averageValue', '0')})"
        goal = f"{target['averageUtilization']}%" if target.get("averageUtilization") is not None else "<auto>"
        w.write(1, f"(as a percentage of request):\t{value} / {goal}\n")
        return
    metric = (source.get("metric") or {}).get("name", "")
    if kind == "Pods":
        value = str(current["averageValue"]) if current and current.get("averageValue") is not None else "<unknown>"
        w.write(1, f'"{metric}" on pods:\t{value} / {target.get("averageValue")}\n')
        return
    if kind == "Object":
        described = source.get("describedObject") or {}
        w.write(1, f'"{metric}" on {described.get("kind", "")}/{described.get("name", "")}')
    else:
        w.write(1, f'"{metric}" (target {"average " if target.get("averageValue") is not None else ""}value)')
    if target.get("averageValue") is not None:
        value = str(current["averageValue"]) if current and current.get("averageValue") is not None else "<unknown>"
        w.write(0, f" (target average value):\t{value} / {target['averageValue']}\n" if kind == "Object"
                else f":\t{value} / {target['averageValue']}\n")
    else:
        value = str(current["value"]) if current and current.get("value") is not None else "<unknown>"
        w.write(0, f":\t{value} / {target.get('value')}\n")


def _write_direction(w: PrefixWriter, title: str, rules: dict | None) -> None:
    """printDirectionBehavior: a direction's window, select policy and policies."""
    if not isinstance(rules, dict):
        return
    w.write(1, f"{title}:\n")
    if rules.get("stabilizationWindowSeconds") is not None:
        w.write(2, f"Stabilization Window: {rules['stabilizationWindowSeconds']} seconds\n")
    policies = [p for p in rules.get("policies") or () if isinstance(p, dict)]
    if policies:
        w.write(2, f"Select Policy: {rules.get('selectPolicy') or 'Max'}\n")
        w.write(2, "Policies:\n")
        for p in policies:
            w.write(3, f"- Type: {p.get('type')}\tValue: {p.get('value')}\tPeriod: {p.get('periodSeconds')} seconds\n")


def describe_hpa(w: PrefixWriter, hpa: dict, ctx: Context) -> None:
    """kubectl's describeHorizontalPodAutoscalerV2."""
    meta, spec, status = hpa.get("metadata") or {}, hpa.get("spec") or {}, hpa.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    write_header(w, meta)
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    w.write(0, f"Reference:\t{ref.get('kind', '')}/{ref.get('name', '')}\n")
    w.write(0, "Metrics:\t( current / target )\n")
    statuses = status.get("currentMetrics") or []
    for i, metric in enumerate(m for m in spec.get("metrics") or () if isinstance(m, dict)):
        _write_metric(w, metric, statuses[i] if i < len(statuses) else None)
    least = spec.get("minReplicas")
    w.write(0, f"Min replicas:\t{'<unset>' if least is None else least}\n")
    w.write(0, f"Max replicas:\t{spec.get('maxReplicas') or 0}\n")
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        w.write(0, "Behavior:\n")
        _write_direction(w, "Scale Up", behavior.get("scaleUp"))
        _write_direction(w, "Scale Down", behavior.get("scaleDown"))
    w.write(0, f"{ref.get('kind', '')} pods:\t")
    w.write(0, f"{int(status.get('currentReplicas') or 0)} current / {int(status.get('desiredReplicas') or 0)} "
               "desired\n")
    conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    if conditions:
        w.write(0, "Conditions:\n")
        w.write(1, "Type\tStatus\tReason\tMessage\n")
        w.write(1, "----\t------\t------\t-------\n")
        for c in conditions:
            w.write(1, f"{c.get('type', '')}\t{c.get('status', '')}\t{c.get('reason', '')}\t{c.get('message', '')}\n")
    write_events(w, ctx.events, ctx.now)
