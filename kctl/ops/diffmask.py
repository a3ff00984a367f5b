"""Secret values hidden from `kctl diff` output, as kubectl diff's Masker does. Called by kctl.ops.diff.

kubectl replaces each value of a Secret's `data` with `***`, or with `*** (before)` and
`*** (after)` where a key's value changed, so a diff shows which keys change but never a value.
kctl also hides the values in the Secret's last-applied-configuration annotation (kubectl
prints that annotation as it is, values included).
"""

from __future__ import annotations

import copy
import json

MASK, MASK_BEFORE, MASK_AFTER = "***", "*** (before)", "*** (after)"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def mask_secrets(live: dict | None, merged: dict | None) -> tuple[dict | None, dict | None]:
    """Copies of the two sides of a diff with Secret values masked (objects of other kinds unchanged)."""
    if not any(isinstance(o, dict) and o.get("kind") == "Secret" for o in (live, merged)):
        return live, merged
    before, after = copy.deepcopy(live), copy.deepcopy(merged)
    old, new = _data(before), _data(after)
    for key in old:
        if key in new and old[key] != new[key]:
            old[key], new[key] = MASK_BEFORE, MASK_AFTER
        else:
            old[key] = MASK
    for key in new:
        if new[key] != MASK_AFTER:
            new[key] = MASK
    for obj in (before, after):
        _mask_last_applied(obj)
    return before, after


def _data(obj: dict | None) -> dict:
    data = obj.get("data") if isinstance(obj, dict) else None
    return data if isinstance(data, dict) else {}


def _mask_last_applied(obj: dict | None) -> None:
    annotations = ((obj or {}).get("metadata") or {}).get("annotations")
    if not isinstance(annotations, dict) or not isinstance(annotations.get(LAST_APPLIED), str):
        return
    try:
        applied = json.loads(annotations[LAST_APPLIED])
    except ValueError:
        annotations[LAST_APPLIED] = MASK
        return
    if not isinstance(applied, dict):
        return
    for field in ("data", "stringData"):
        if isinstance(applied.get(field), dict):
            applied[field] = {key: MASK for key in applied[field]}
    annotations[LAST_APPLIED] = json.dumps(applied, separators=(",", ":"), sort_keys=True)


__all__ = ["mask_secrets"]
