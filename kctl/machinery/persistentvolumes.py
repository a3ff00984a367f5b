"""What PersistentVolumes, PersistentVolumeClaims and StorageClasses mean, read off the objects.

The names and small helpers Kubernetes keeps in `pkg/apis/core/v1/helper`,
`pkg/volume/util` and `component-helpers/storage`: the well-known annotations and
finalizers, a claim's or a volume's class (the beta annotation first, as Kubernetes reads
it), whether a class is marked default and which default wins, access modes as kubectl
prints them (`RWO,ROX`), a volume's source. Shared by the admission plugins
(kctl.admission.plugins.defaultstorageclass, ...), the persistent-volume controllers
(kctl.controllers.persistentvolume), the scheduler's volume plugins and the printers
(kctl.output.tables, kctl.output.describe.storage); it imports nothing but the standard
library and the quantity parser.
"""

from __future__ import annotations

from fractions import Fraction

from kctl.machinery.quantity import parse_quantity

#: a StorageClass marked default (and its beta form, still honoured)
ANN_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
ANN_DEFAULT_CLASS_BETA = "storageclass.beta.kubernetes.io/is-default-class"
#: the class of a claim or volume before spec.storageClassName existed (read first, as Kubernetes does)
ANN_BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
#: set by the scheduler on a WaitForFirstConsumer claim: the node its first pod goes to
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
#: set on a claim that waits for a provisioner: which one (and its beta form)
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
#: a claim the binder has finished binding; a claim or volume the controller (not the user) bound
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
#: the provisioner that made a volume
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"

PVC_PROTECTION_FINALIZER = "kubernetes.io/pvc-protection"
PV_PROTECTION_FINALIZER = "kubernetes.io/pv-protection"

#: kctl's built-in provisioner: a Podman named volume on the node of the claim's first pod
LOCAL_VOLUME_PROVISIONER = "kctl.io/local-volume"
#: the default class kctl keeps (kctl.controllers.storageclass)
DEFAULT_CLASS_NAME = "local"
#: the node label a provisioned volume's node affinity names
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: Kubernetes' "no provisioner" marker: a class for static volumes only
NO_PROVISIONER = "kubernetes.io/no-provisioner"

#: every volume source a PersistentVolume spec may name (exactly one)
PV_SOURCES = ("awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume",
              "flocker", "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs",
              "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos",
              "vsphereVolume")

_MODE_SHORT = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"),
               ("ReadWriteOncePod", "RWOP"))


def is_default_class(sc: dict) -> bool:
    """A StorageClass annotated default ("true", or the beta annotation "true")."""
    annotations = (sc.get("metadata") or {}).get("annotations") or {}
    return annotations.get(ANN_DEFAULT_CLASS) == "true" or annotations.get(ANN_DEFAULT_CLASS_BETA) == "true"


def default_class(classes: list[dict]) -> dict | None:
    """The default StorageClass: of several, the newest, then the first by name (Kubernetes 1.28+)."""
    defaults = [sc for sc in classes if is_default_class(sc) and not (sc.get("metadata") or {}).get(
        "deletionTimestamp")]
    if not defaults:
        return None
    defaults.sort(key=lambda sc: sc["metadata"].get("name", ""))
    defaults.sort(key=lambda sc: str(sc["metadata"].get("creationTimestamp") or ""), reverse=True)
    return defaults[0]


def claim_class(pvc: dict) -> str:
    """A claim's class: the beta annotation, else spec.storageClassName, else "" (GetPersistentVolumeClaimClass)."""
    annotations = (pvc.get("metadata") or {}).get("annotations") or {}
    if ANN_BETA_CLASS in annotations:
        return str(annotations[ANN_BETA_CLASS])
    return str((pvc.get("spec") or {}).get("storageClassName") or "")


def claim_has_class(pvc: dict) -> bool:
    """The claim names a class, even "" (spec.storageClassName set, or the beta annotation)."""
    annotations = (pvc.get("metadata") or {}).get("annotations") or {}
    return ANN_BETA_CLASS in annotations or (pvc.get("spec") or {}).get("storageClassName") is not None


def volume_class(pv: dict) -> str:
    """A volume's class: the beta annotation, else spec.storageClassName (GetPersistentVolumeClass)."""
    annotations = (pv.get("metadata") or {}).get("annotations") or {}
    if ANN_BETA_CLASS in annotations:
        return str(annotations[ANN_BETA_CLASS])
    return str((pv.get("spec") or {}).get("storageClassName") or "")


def access_modes_string(modes: list | None) -> str:
    """kubectl's GetAccessModesAsString: `RWO,ROX,RWX,RWOP` in that order, each once."""
    present = set(modes or ())
    return ",".join(short for mode, short in _MODE_SHORT if mode in present)


def volume_sources(pv: dict) -> list[str]:
    """The volume sources a PersistentVolume spec names (a valid one names exactly one)."""
    spec = pv.get("spec") or {}
    return [name for name in PV_SOURCES if spec.get(name) is not None]


def storage_of(resources: dict | None) -> Fraction | None:
    """The `storage` quantity of a requests/capacity map, or None when absent or malformed."""
    value = (resources or {}).get("storage")
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except ValueError:
        return None


def claim_request(pvc: dict) -> Fraction | None:
    """spec.resources.requests.storage of a claim, parsed."""
    return storage_of(((pvc.get("spec") or {}).get("resources") or {}).get("requests"))


def volume_capacity(pv: dict) -> Fraction | None:
    """spec.capacity.storage of a volume, parsed."""
    return storage_of((pv.get("spec") or {}).get("capacity"))


def claim_key(pvc: dict) -> str:
    """`namespace/name` of a claim."""
    meta = pvc.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def claim_ref_key(pv: dict) -> str | None:
    """`namespace/name` of the claim a volume's claimRef names, or None."""
    ref = (pv.get("spec") or {}).get("claimRef")
    if not isinstance(ref, dict) or not ref.get("name"):
        return None
    return f"{ref.get('namespace') or ''}/{ref['name']}"


def pod_claim_names(pod: dict) -> list[str]:
    """The claims a pod's volumes use, in order: persistentVolumeClaim.claimName, and `<pod>-<volume>` for an
    ephemeral volume (the claim Kubernetes' ephemeral-volume controller makes)."""
    names = []
    pod_name = (pod.get("metadata") or {}).get("name") or ""
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if not isinstance(volume, dict):
            continue
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, dict) and source.get("claimName"):
            names.append(str(source["claimName"]))
        elif isinstance(volume.get("ephemeral"), dict) and volume.get("name"):
            names.append(f"{pod_name}-{volume['name']}")
    return names


__all__ = ["ANN_BETA_CLASS", "ANN_BETA_STORAGE_PROVISIONER", "ANN_BIND_COMPLETED", "ANN_BOUND_BY_CONTROLLER",
           "ANN_DEFAULT_CLASS", "ANN_DEFAULT_CLASS_BETA", "ANN_PROVISIONED_BY", "ANN_SELECTED_NODE",
           "ANN_STORAGE_PROVISIONER", "DEFAULT_CLASS_NAME", "HOSTNAME_LABEL", "LOCAL_VOLUME_PROVISIONER",
           "NO_PROVISIONER", "PVC_PROTECTION_FINALIZER", "PV_PROTECTION_FINALIZER", "PV_SOURCES",
           "access_modes_string", "claim_class", "claim_has_class", "claim_key", "claim_ref_key", "claim_request",
           "default_class", "is_default_class", "pod_claim_names", "storage_of", "volume_capacity",
           "volume_class", "volume_sources"]
