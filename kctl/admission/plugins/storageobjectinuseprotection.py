"""StorageObjectInUseProtection: new claims and volumes carry their protection finalizers.

Kubernetes' `StorageObjectInUseProtection` admission plugin (plugin/pkg/admission/
storage/storageobjectinuse): on CREATE, a PersistentVolumeClaim gets the finalizer
`kubernetes.io/pvc-protection` and a PersistentVolume `kubernetes.io/pv-protection`, so a
claim a pod still uses, or a volume still Bound, stays (Terminating) when deleted until the
pvc-protection / pv-protection controllers (kctl.controllers.pvcprotection, pvprotection)
take the finalizer off. Registered in kctl.admission.plugins.builtin_plugins.
"""

from __future__ import annotations

from kctl.admission.plugins import AdmissionPlugin, Attributes, Lister
from kctl.machinery.persistentvolumes import PV_PROTECTION_FINALIZER, PVC_PROTECTION_FINALIZER

NAME = "StorageObjectInUseProtection"
_FINALIZER = {"PersistentVolumeClaim": PVC_PROTECTION_FINALIZER, "PersistentVolume": PV_PROTECTION_FINALIZER}


def mutate(attrs: Attributes, lister: Lister) -> None:
    """Add the kind's protection finalizer to a new claim or volume (once)."""
    obj = attrs.obj
    if attrs.operation != "CREATE" or attrs.subresource or not isinstance(obj, dict):
        return
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return
    finalizers = meta.get("finalizers")
    if finalizers is None:
        finalizers = meta["finalizers"] = []
    if not isinstance(finalizers, list):
        return  # schema validation refuses it with its field path
    wanted = _FINALIZER[attrs.rt.group_kind]
    if wanted not in finalizers:
        finalizers.append(wanted)


PLUGIN = AdmissionPlugin(name=NAME, kinds=frozenset(_FINALIZER), mutate=mutate)

__all__ = ["NAME", "PLUGIN", "mutate"]
