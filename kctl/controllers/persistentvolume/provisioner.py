"""kctl's built-in provisioner `kctl.io/local-volume`: the PersistentVolume of a claim's node.

Kubernetes' dynamic provisioning, for the one provisioner kctl ships (k3s's local-path
model): when a claim of a class with `provisioner: kctl.io/local-volume` is unbound and
the scheduler has chosen its first pod's node (annotation
`volume.kubernetes.io/selected-node`), the binder (kctl.controllers.persistentvolume.binder)
calls `provision`, which creates the PV `pvc-<claim uid>` as docs/storage.md and the
storage contract say: the claim's size and access modes, the class's reclaim policy, node
affinity to that node (`kubernetes.io/hostname In [node]`), source
`csi: {driver: kctl.io/local-volume, volumeHandle: <PV name>}`, pre-bound to the claim. The
Podman named volume itself is made by the node agent of that node when the first pod
starts there (kctl.agent), and removed by it when the PV is Released with reclaim Delete.
A class of this provisioner with volumeBindingMode Immediate cannot be served (no node is
chosen): `provision` says so, and the binder records it as ProvisioningFailed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kctl.machinery.errors import AlreadyExists
from kctl.machinery.persistentvolumes import (ANN_BOUND_BY_CONTROLLER, ANN_PROVISIONED_BY, ANN_SELECTED_NODE,
                                              HOSTNAME_LABEL, LOCAL_VOLUME_PROVISIONER)

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

#: why an Immediate class of this provisioner cannot provision
IMMEDIATE_UNSUPPORTED = (f"{LOCAL_VOLUME_PROVISIONER} makes a volume on the node of the claim's first pod: its "
                         "StorageClass needs volumeBindingMode: WaitForFirstConsumer")


class ProvisioningFailed(Exception):
    """This claim cannot be provisioned as it is; the message is the ProvisioningFailed Event's."""


@dataclass(frozen=True)
class Provisioned:
    """What `provision` did: the PV (created now, or found from an earlier pass) and whether it made it."""

    volume: dict
    created: bool


def volume_name(pvc: dict) -> str:
    """`pvc-<claim uid>`, Kubernetes' name for a provisioned volume."""
    return f"pvc-{pvc['metadata']['uid']}"


def claim_ref(pvc: dict) -> dict:
    """The claimRef a volume bound to pvc carries."""
    meta = pvc["metadata"]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta.get("namespace", ""),
            "name": meta["name"], "uid": meta["uid"]}


def volume_for(pvc: dict, storage_class: dict, node: str) -> dict:
    """The PersistentVolume kctl.io/local-volume provisions for pvc on node (not yet created)."""
    name = volume_name(pvc)
    spec = pvc.get("spec") or {}
    requests = (spec.get("resources") or {}).get("requests") or {}
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: LOCAL_VOLUME_PROVISIONER,
                                                   ANN_BOUND_BY_CONTROLLER: "yes"}},
        "spec": {
            "capacity": {"storage": requests.get("storage")},
            "accessModes": list(spec.get("accessModes") or ()),
            "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
            "storageClassName": storage_class["metadata"]["name"],
            "volumeMode": "Filesystem",
            "claimRef": claim_ref(pvc),
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}]}]}},
            "csi": {"driver": LOCAL_VOLUME_PROVISIONER, "volumeHandle": name},
        },
    }


def provision(api: API, pvc: dict, storage_class: dict) -> Provisioned:
    """Create the claim's PV (an existing `pvc-<uid>` from an earlier pass is taken as it is).

    Raises ProvisioningFailed when the claim cannot be served (Immediate binding, no node,
    a Block volumeMode); API errors pass through (the binder retries them).
    """
    if storage_class.get("volumeBindingMode") != "WaitForFirstConsumer":
        raise ProvisioningFailed(IMMEDIATE_UNSUPPORTED)
    if ((pvc.get("spec") or {}).get("volumeMode") or "Filesystem") != "Filesystem":
        raise ProvisioningFailed(f"{LOCAL_VOLUME_PROVISIONER} provisions only volumeMode Filesystem")
    node = ((pvc.get("metadata") or {}).get("annotations") or {}).get(ANN_SELECTED_NODE)
    if not node:
        raise ProvisioningFailed("no node selected for the claim yet")
    wanted = volume_for(pvc, storage_class, node)
    try:
        return Provisioned(api.create(wanted), True)
    except AlreadyExists:
        return Provisioned(api.get(api.resource("persistentvolumes"), wanted["metadata"]["name"]), False)


__all__ = ["IMMEDIATE_UNSUPPORTED", "Provisioned", "ProvisioningFailed", "claim_ref", "provision", "volume_for",
           "volume_name"]
