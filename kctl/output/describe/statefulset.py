"""kubectl describe's layout for a StatefulSet (describeStatefulSet): replicas, update strategy,
pod counts by phase, the pod template, the volume claim templates and events.

One entry of the kind -> describer table in kctl.output.describe; the pods counted come from
the `describe` command (kctl.cli.get) through the Context (`pods`: the set's namespace's pods,
those the set controls are counted).
"""

from __future__ import annotations

from kctl.output.cells import format_label_selector
from kctl.output.describe.context import Context
from kctl.output.describe.podspec import describe_pod_template
from kctl.output.describe.sections import rfc1123z, write_annotations, write_events, write_header, write_labels
from kctl.output.describe.writer import PrefixWriter

__all__ = ["describe_statefulset"]

STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"


def _phase_counts(sts: dict, pods: list[dict] | None) -> tuple[int, int, int, int]:
    """getPodStatusForController: (running, waiting, succeeded, failed) of the pods the set controls."""
    uid = (sts.get("metadata") or {}).get("uid")
    counts = {"Running": 0, "Pending": 0, "Succeeded": 0, "Failed": 0}
    for pod in pods or ():
        refs = (pod.get("metadata") or {}).get("ownerReferences") or ()
        if not any(r.get("controller") and r.get("uid") == uid for r in refs if isinstance(r, dict)):
            continue
        phase = (pod.get("status") or {}).get("phase")
        if phase in counts:
            counts[phase] += 1
    return counts["Running"], counts["Pending"], counts["Succeeded"], counts["Failed"]


def _indented_map(w: PrefixWriter, title: str, values: dict | None) -> None:
    """printLabelsMultilineWithIndent(w, "  ", title, "\\t", ...): `key=value` lines under a two-space title."""
    w.write(0, f"  {title}:\t")
    if not values:
        w.write(0, "<none>\n")
        return
    for i, key in enumerate(sorted(values)):
        if i:
            w.write(0, "  \t")
        w.write(0, f"{key}={values[key]}\n")


def _claim_templates(w: PrefixWriter, templates: list[dict]) -> None:
    """describeVolumeClaimTemplates."""
    if not templates:
        w.write(0, "Volume Claims:\t<none>\n")
        return
    w.write(0, "Volume Claims:\n")
    for pvc in templates:
        meta, spec = pvc.get("metadata") or {}, pvc.get("spec") or {}
        klass = (meta.get("annotations") or {}).get(STORAGE_CLASS_ANNOTATION) or spec.get("storageClassName") or ""
        w.write(1, f"Name:\t{meta.get('name', '')}\n")
        w.write(1, f"StorageClass:\t{klass}\n")
        _indented_map(w, "Labels", meta.get("labels"))
        _indented_map(w, "Annotations", meta.get("annotations"))
        capacity = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        w.write(1, f"Capacity:\t{capacity if capacity is not None else '<default>'}\n")
        w.write(1, f"Access Modes:\t[{' '.join(spec.get('accessModes') or ())}]\n")


def describe_statefulset(w: PrefixWriter, sts: dict, ctx: Context) -> None:
    """kubectl's StatefulSetDescriber."""
    meta, spec, status = sts.get("metadata") or {}, sts.get("spec") or {}, sts.get("status") or {}
    write_header(w, meta)
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    w.write(0, f"Selector:\t{format_label_selector(spec.get('selector'), empty='')}\n")
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Replicas:\t{spec.get('replicas', 1)} desired | {status.get('replicas', 0)} total\n")
    strategy = spec.get("updateStrategy") or {}
    w.write(0, f"Update Strategy:\t{strategy.get('type', '')}\n")
    rolling = strategy.get("rollingUpdate")
    if isinstance(rolling, dict) and rolling.get("partition") is not None:
        w.write(1, f"Partition:\t{rolling['partition']}\n")
        if rolling.get("maxUnavailable") is not None:
            w.write(1, f"MaxUnavailable:\t{rolling['maxUnavailable']}\n")
    running, waiting, succeeded, failed = _phase_counts(sts, getattr(ctx, "pods", None))
    w.write(0, f"Pods Status:\t{running} Running / {waiting} Waiting / {succeeded} Succeeded / {failed} Failed\n")
    describe_pod_template(w, spec.get("template") or {})
    _claim_templates(w, [t for t in spec.get("volumeClaimTemplates") or () if isinstance(t, dict)])
    write_events(w, ctx.events, ctx.now)
