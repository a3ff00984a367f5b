"""Which PersistentVolume a claim may bind to: Kubernetes' findBestMatchForClaim.

Pure functions over objects, called by the binder (kctl.controllers.persistentvolume.binder).
A volume fits a claim when it is not being deleted, is free (no claimRef) or pre-bound to
this claim, has the claim's class, offers every access mode the claim asks for, has at
least the requested capacity, the same volumeMode (Filesystem when unset), and carries the
labels the claim's selector asks for. Of the fitting volumes a pre-bound one wins, then
the smallest (pv_controller.go / pkg/volume/util: FindMatchingVolume). A claim of a
WaitForFirstConsumer class (`delay_binding`) takes only a volume pre-bound to it (by the
user, or by the scheduler's VolumeBinding plugin): the scheduler chooses free ones.
"""

from __future__ import annotations

from kctl.machinery.errors import APIError
from kctl.machinery.persistentvolumes import claim_class, claim_request, volume_capacity, volume_class
from kctl.machinery.selectors import from_label_selector_object


def prebound_to(pv: dict, pvc: dict) -> bool:
    """The volume's claimRef names this claim (namespace, name, and uid when the ref has one)."""
    ref = (pv.get("spec") or {}).get("claimRef")
    if not isinstance(ref, dict):
        return False
    meta = pvc.get("metadata") or {}
    if ref.get("name") != meta.get("name") or (ref.get("namespace") or "") != (meta.get("namespace") or ""):
        return False
    return not ref.get("uid") or ref.get("uid") == meta.get("uid")


def mismatch(pv: dict, pvc: dict) -> str | None:
    """Why the volume cannot hold the claim (checkVolumeSatisfyClaim's words), or None when it can."""
    request = claim_request(pvc) or 0
    capacity = volume_capacity(pv)
    if capacity is None or capacity < request:
        return "requested PV is too small"
    if volume_class(pv) != claim_class(pvc):
        return "storageClassName does not match"
    if _volume_mode(pv) != _volume_mode(pvc):
        return "incompatible volumeMode"
    wanted = set((pvc.get("spec") or {}).get("accessModes") or ())
    if not wanted <= set((pv.get("spec") or {}).get("accessModes") or ()):
        return "incompatible accessMode"
    return None


def selector_matches(pv: dict, pvc: dict) -> bool:
    """The claim's spec.selector (none: any) selects the volume's labels."""
    selector = (pvc.get("spec") or {}).get("selector")
    if selector is None:
        return True
    try:
        parsed = from_label_selector_object(selector, path="spec.selector")
    except APIError:
        return False
    return parsed.matches((pv.get("metadata") or {}).get("labels") or {})


def best_match(volumes: list[dict], pvc: dict, *, delay_binding: bool) -> dict | None:
    """The volume the claim should bind to, or None (see the module docstring)."""
    best: dict | None = None
    for pv in volumes:
        meta = pv.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        prebound = prebound_to(pv, pvc)
        if (pv.get("spec") or {}).get("claimRef") and not prebound:
            continue
        if mismatch(pv, pvc) is not None or not selector_matches(pv, pvc):
            continue
        if prebound:
            return pv
        if delay_binding:
            continue
        if (pv.get("status") or {}).get("phase") not in (None, "", "Pending", "Available"):
            continue
        if best is None or (volume_capacity(pv) or 0) < (volume_capacity(best) or 0):
            best = pv
    return best


def _volume_mode(obj: dict) -> str:
    return (obj.get("spec") or {}).get("volumeMode") or "Filesystem"


__all__ = ["best_match", "mismatch", "prebound_to", "selector_matches"]
