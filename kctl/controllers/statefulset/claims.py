"""A StatefulSet's PersistentVolumeClaims: one per volumeClaimTemplate and ordinal, and who owns them.

Pure functions, used by the StatefulSet controller (controller.py) and its tests; written
after Kubernetes' stateful_set_utils.go (getPersistentVolumeClaims,
updateClaimOwnerRefForSetAndPod, isClaimOwnerUpToDate) and the storage contract
(/work/briefs, docs/storage.md):

- the claim of template `www` for pod `web-2` is `www-web-2`, in the set's namespace,
  labelled with the set's selector matchLabels (over the template's own labels), its spec
  the template's (no storageClassName unless the template sets one, so the default class
  applies at admission);
- `spec.persistentVolumeClaimRetentionPolicy` decides its ownerReferences (plain, not
  controller references; the garbage collector deletes a claim once every owner is gone):
  whenDeleted Delete -> owned by the StatefulSet; whenScaled Delete -> owned by the pod
  while that pod's ordinal is scaled away (and not by the set); Retain -> no such owner.
"""

from __future__ import annotations

import copy

from kctl.controllers.statefulset.pods import claim_name, claim_templates, in_ordinal_range, ordinal_of

RETAIN = "Retain"
DELETE = "Delete"


def retention_policy(sts: dict) -> tuple[str, str]:
    """(whenDeleted, whenScaled) of spec.persistentVolumeClaimRetentionPolicy; Retain when unset."""
    policy = (sts.get("spec") or {}).get("persistentVolumeClaimRetentionPolicy") or {}
    when_deleted = policy.get("whenDeleted") or RETAIN
    when_scaled = policy.get("whenScaled") or RETAIN
    return (when_deleted if when_deleted in (RETAIN, DELETE) else RETAIN,
            when_scaled if when_scaled in (RETAIN, DELETE) else RETAIN)


def claims_for(sts: dict, ordinal: int) -> list[dict]:
    """getPersistentVolumeClaims: the claims the pod of `ordinal` uses, as they are created."""
    meta = sts["metadata"]
    match_labels = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    out = []
    for template in claim_templates(sts):
        tmeta = template.get("metadata") or {}
        claim_meta: dict = {"name": claim_name(tmeta["name"], meta["name"], ordinal),
                            "namespace": meta.get("namespace", "default"),
                            "labels": {**(tmeta.get("labels") or {}), **match_labels}}
        if tmeta.get("annotations"):
            claim_meta["annotations"] = dict(tmeta["annotations"])
        if not claim_meta["labels"]:
            del claim_meta["labels"]
        out.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": claim_meta,
                    "spec": copy.deepcopy(template.get("spec") or {})})
    return out


def _ref(owner: dict, kind: str, api_version: str) -> dict:
    meta = owner["metadata"]
    return {"apiVersion": owner.get("apiVersion") or api_version, "kind": kind, "name": meta["name"],
            "uid": meta["uid"]}


def desired_owner_refs(claim: dict, sts: dict, pod: dict | None, *, ordinal: int | None = None) -> list[dict]:
    """The claim's ownerReferences after updateClaimOwnerRefForSetAndPod (others' references kept).

    `pod` is the claim's pod (None when it does not exist: then the pod reference is left as
    it is); `ordinal` is the pod's ordinal when `pod` is None.
    """
    refs = [dict(r) for r in (claim.get("metadata") or {}).get("ownerReferences") or () if isinstance(r, dict)]
    set_uid = sts["metadata"]["uid"]
    when_deleted, when_scaled = retention_policy(sts)
    if pod is not None:
        scaled_down = not in_ordinal_range(pod, sts)
    else:
        scaled_down = not in_ordinal_range({"metadata": {"name": f"{sts['metadata']['name']}-{ordinal}"}}, sts)

    def has(uid: str) -> bool:
        return any(r.get("uid") == uid for r in refs)

    def drop(uid: str) -> None:
        refs[:] = [r for r in refs if r.get("uid") != uid]

    def add(ref: dict) -> None:
        if not has(ref["uid"]):
            refs.append(ref)

    set_ref = _ref(sts, "StatefulSet", "apps/v1")
    want_set = when_deleted == DELETE and not (when_scaled == DELETE and scaled_down)
    want_pod = when_scaled == DELETE and scaled_down
    if want_set:
        add(set_ref)
    else:
        drop(set_uid)
    if pod is not None:
        pod_uid = pod["metadata"].get("uid") or ""
        if want_pod and pod_uid:
            add(_ref(pod, "Pod", "v1"))
        elif not want_pod:
            drop(pod_uid)
    return refs


def claim_is_stale(claim: dict, pod: dict | None) -> bool:
    """PodClaimIsStale: the claim is owned by a Pod other than `pod` (a scaled-down pod's, awaiting deletion)."""
    pod_uid = ((pod or {}).get("metadata") or {}).get("uid")
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("kind") == "Pod" and ref.get("uid") != pod_uid:
            return True
    return False


def pod_claim_names(sts: dict, pod: dict) -> list[str]:
    """The names of the claims `pod` (of this set) uses."""
    ordinal = ordinal_of(pod)
    return [claim_name(t["metadata"]["name"], sts["metadata"]["name"], ordinal) for t in claim_templates(sts)]


__all__ = ["DELETE", "RETAIN", "claim_is_stale", "claims_for", "desired_owner_refs", "pod_claim_names",
           "retention_policy"]
