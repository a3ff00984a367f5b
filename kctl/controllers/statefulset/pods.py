"""A StatefulSet pod's identity, as Kubernetes' stateful_set_utils.go gives it.

Pure functions over plain objects, used by the StatefulSet controller
(kctl/controllers/statefulset/controller.py) and its tests. A pod of set `web` with
ordinal 2 is named `web-2`, labelled `statefulset.kubernetes.io/pod-name: web-2`,
`apps.kubernetes.io/pod-index: "2"` and `controller-revision-hash: <revision name>`, has
`hostname: web-2` and `subdomain: <spec.serviceName>` (stable DNS through a headless
Service of that name), a controller ownerReference to the set, and one
`persistentVolumeClaim` volume per volumeClaimTemplate naming its own claim
(`<template>-web-2`, claims.py). Also the health tests the controller orders by
(`is_running_and_ready`, `is_healthy`, ...).
"""

from __future__ import annotations

import copy
import datetime as dt
import re

from kctl.client import pods as podutil
from kctl.client.claim import owner_reference

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"
KIND = "StatefulSet"

_ORDINAL = re.compile(r"^(.*)-([0-9]+)$")


def pod_name(set_name: str, ordinal: int) -> str:
    """getPodName: `<set>-<ordinal>`."""
    return f"{set_name}-{ordinal}"


def parent_and_ordinal(pod: dict) -> tuple[str, int]:
    """getParentNameAndOrdinal: ("web", 2) for `web-2`; ("", -1) for a name without an ordinal."""
    match = _ORDINAL.match((pod.get("metadata") or {}).get("name") or "")
    if not match:
        return "", -1
    return match.group(1), int(match.group(2))


def ordinal_of(pod: dict) -> int:
    """getOrdinal: the pod's ordinal, -1 when its name has none."""
    return parent_and_ordinal(pod)[1]


def is_member_of(sts: dict, pod: dict) -> bool:
    """isMemberOf: the pod's name says it belongs to the set."""
    return parent_and_ordinal(pod)[0] == sts["metadata"]["name"]


def revision_of(pod: dict) -> str:
    """getPodRevision: the pod's controller-revision-hash label ("" when none)."""
    return ((pod.get("metadata") or {}).get("labels") or {}).get(REVISION_LABEL, "")


def start_ordinal(sts: dict) -> int:
    """spec.ordinals.start (0 unless set)."""
    return int(((sts.get("spec") or {}).get("ordinals") or {}).get("start") or 0)


def replicas_of(sts: dict) -> int:
    """spec.replicas (1 when unset, as the API defaults it)."""
    value = (sts.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def in_ordinal_range(pod: dict, sts: dict) -> bool:
    """podInOrdinalRange: start <= ordinal < start + replicas."""
    start = start_ordinal(sts)
    return start <= ordinal_of(pod) < start + replicas_of(sts)


def claim_name(template_name: str, set_name: str, ordinal: int) -> str:
    """getPersistentVolumeClaimName: `<template>-<set>-<ordinal>`."""
    return f"{template_name}-{set_name}-{ordinal}"


def claim_templates(sts: dict) -> list[dict]:
    """spec.volumeClaimTemplates that have a name."""
    return [t for t in (sts.get("spec") or {}).get("volumeClaimTemplates") or ()
            if isinstance(t, dict) and (t.get("metadata") or {}).get("name")]


def _update_identity(sts: dict, pod: dict, ordinal: int) -> None:
    meta = pod.setdefault("metadata", {})
    meta["name"] = pod_name(sts["metadata"]["name"], ordinal)
    meta["namespace"] = sts["metadata"].get("namespace", "default")
    labels = meta.get("labels")
    if not isinstance(labels, dict):
        labels = meta["labels"] = {}
    labels[POD_NAME_LABEL] = meta["name"]
    labels[POD_INDEX_LABEL] = str(ordinal)


def _update_storage(sts: dict, pod: dict, ordinal: int) -> None:
    """updateStorage: one claim volume per template (named as the template), then the other volumes."""
    spec = pod.setdefault("spec", {})
    templates = claim_templates(sts)
    names = {t["metadata"]["name"] for t in templates}
    volumes = [{"name": t["metadata"]["name"],
                "persistentVolumeClaim": {"claimName": claim_name(t["metadata"]["name"], sts["metadata"]["name"],
                                                                  ordinal)}}
               for t in templates]
    volumes += [v for v in spec.get("volumes") or () if isinstance(v, dict) and v.get("name") not in names]
    if volumes:
        spec["volumes"] = volumes


def new_pod(sts: dict, ordinal: int, revision: str, *, template: dict | None = None) -> dict:
    """newVersionedStatefulSetPod: the pod of `ordinal` from `template` (default: the set's), at `revision`."""
    template = copy.deepcopy(template if template is not None else (sts.get("spec") or {}).get("template") or {})
    tmeta = template.get("metadata") or {}
    meta: dict = {"labels": dict(tmeta.get("labels") or {}),
                  "ownerReferences": [owner_reference(sts, KIND)]}
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    pod: dict = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec") or {}}
    _update_identity(sts, pod, ordinal)
    pod["spec"]["hostname"] = meta["name"]
    service = (sts.get("spec") or {}).get("serviceName")
    if service:
        pod["spec"]["subdomain"] = service
    _update_storage(sts, pod, ordinal)
    if revision:
        meta["labels"][REVISION_LABEL] = revision
    return pod


def identity_matches(sts: dict, pod: dict) -> bool:
    """identityMatches: name, namespace and the pod-name label are the set's for this ordinal."""
    name, ordinal = parent_and_ordinal(pod)
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (ordinal >= 0 and name == sts["metadata"]["name"]
            and (meta.get("namespace") or "default") == (sts["metadata"].get("namespace") or "default")
            and labels.get(POD_NAME_LABEL) == meta.get("name")
            and labels.get(POD_INDEX_LABEL) == str(ordinal))


def storage_matches(sts: dict, pod: dict) -> bool:
    """storageMatches: every claim template's volume names this ordinal's claim."""
    ordinal = ordinal_of(pod)
    if ordinal < 0:
        return False
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or () if isinstance(v, dict)}
    for template in claim_templates(sts):
        name = template["metadata"]["name"]
        volume = volumes.get(name)
        want = claim_name(name, sts["metadata"]["name"], ordinal)
        if volume is None or (volume.get("persistentVolumeClaim") or {}).get("claimName") != want:
            return False
    return True


def with_identity(sts: dict, pod: dict) -> dict:
    """A copy of `pod` with the set's identity labels restored (updateIdentity; volumes are immutable)."""
    fixed = copy.deepcopy(pod)
    _update_identity(sts, fixed, ordinal_of(pod))
    return fixed


# -- health ------------------------------------------------------------------------------------

def phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or ""


def is_terminating(pod: dict) -> bool:
    return podutil.pod_terminating(pod)


def is_failed(pod: dict) -> bool:
    return phase(pod) == "Failed"


def is_succeeded(pod: dict) -> bool:
    return phase(pod) == "Succeeded"


def is_running_and_ready(pod: dict) -> bool:
    """isRunningAndReady: phase Running and the Ready condition True."""
    return phase(pod) == "Running" and podutil.pod_ready(pod)


def is_running_and_available(pod: dict, min_ready_seconds: int, now: dt.datetime) -> bool:
    """isRunningAndAvailable: running, ready, and ready for more than minReadySeconds."""
    return phase(pod) == "Running" and podutil.pod_available(pod, min_ready_seconds, now)


def is_healthy(pod: dict, min_ready_seconds: int, now: dt.datetime) -> bool:
    """isHealthy: running, available and not being deleted."""
    return is_running_and_available(pod, min_ready_seconds, now) and not is_terminating(pod)


__all__ = ["POD_INDEX_LABEL", "POD_NAME_LABEL", "REVISION_LABEL", "claim_name", "claim_templates",
           "identity_matches", "in_ordinal_range", "is_healthy", "is_member_of", "is_running_and_available",
           "is_running_and_ready", "new_pod", "ordinal_of", "parent_and_ordinal", "pod_name", "replicas_of",
           "revision_of", "start_ordinal", "storage_matches", "with_identity"]
