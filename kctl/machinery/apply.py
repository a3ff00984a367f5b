"""kubectl's client-side apply: a three-way strategic merge against the live object.

`kctl apply -f` (and git sync) call `applied_object` to compute what to store: the live
object, patched with the difference between the manifest and the live object, minus
what the previous manifest (kept in the last-applied annotation) had and this one
dropped. Fields written by others (status, defaults, a controller's labels) survive.
The patch itself (`apply_patch`, `{}` when nothing changes) tells "unchanged" from
"configured".
"""

from __future__ import annotations

import copy
import json

from kctl.machinery.patch import diff_strategic, strategic_merge_patch

__all__ = ["LAST_APPLIED", "last_applied_of", "last_applied_annotation", "three_way_patch",
           "apply_patch", "applied_object", "unchanged_by_apply"]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def last_applied_of(obj: dict | None) -> dict | None:
    """The configuration last applied to `obj`, or None (no annotation, or not a JSON object)."""
    if not isinstance(obj, dict):
        return None
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(LAST_APPLIED) if isinstance(annotations, dict) else None
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _without_last_applied(modified: dict) -> dict:
    config = copy.deepcopy(modified)
    metadata = config.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("annotations"), dict):
        metadata["annotations"].pop(LAST_APPLIED, None)
        if not metadata["annotations"]:
            del metadata["annotations"]
    return config


def last_applied_annotation(modified: dict) -> str:
    """The annotation's value for a manifest: compact JSON, keys sorted, without itself."""
    return json.dumps(_without_last_applied(modified), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)


def _annotated(modified: dict) -> dict:
    """`modified` carrying the last-applied annotation of itself, as kubectl sends it."""
    value = last_applied_annotation(modified)
    config = _without_last_applied(modified)
    metadata = config.get("metadata")
    if not isinstance(metadata, dict):
        metadata = config["metadata"] = {}
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict):
        annotations = metadata["annotations"] = {}
    annotations[LAST_APPLIED] = value
    return config


def three_way_patch(original: dict | None, modified: dict, current: dict,
                    schema: dict | None) -> dict:
    """kubectl's CreateThreeWayMergePatch.

    Sets every field of `modified` that differs from `current`; deletes fields and
    merge-keyed list elements that `original` (the last-applied configuration) had and
    `modified` no longer has; keeps what only `current` has. Lists without a merge
    strategy are replaced whole when they differ. strategic_merge_patch(current, p,
    schema) is the applied object; `{}` means nothing to do.
    """
    return diff_strategic(original, modified, current, schema)


def apply_patch(modified: dict, current: dict, schema: dict | None) -> dict:
    """The patch `kctl apply` makes to `current`, the last-applied annotation included."""
    return three_way_patch(last_applied_of(current), _annotated(modified), current, schema)


def applied_object(modified: dict, current: dict | None, schema: dict | None) -> dict:
    """The object to store when `modified` is applied over `current` (None: a create).

    Server-set fields of `current` (resourceVersion, uid, creationTimestamp, generation,
    status) survive unless `modified` sets them; the last-applied annotation is updated.
    """
    if current is None:
        return _annotated(modified)
    return strategic_merge_patch(current, apply_patch(modified, current, schema), schema)


def unchanged_by_apply(merged: dict, current: dict) -> bool:
    """Whether an apply changes nothing but the last-applied annotation.

    kctl then writes nothing and says "unchanged" (kubectl would rewrite the annotation
    and say "configured"), so the YAML of `kctl get -o yaml` applies back unchanged.
    """
    return _without_last_applied(merged) == _without_last_applied(current)

