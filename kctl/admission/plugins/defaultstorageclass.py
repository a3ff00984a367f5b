"""DefaultStorageClass: a new claim that names no class gets the default one.

Kubernetes' `DefaultStorageClass` admission plugin (plugin/pkg/admission/storage/storageclass/
setdefault): on CREATE of a PersistentVolumeClaim with neither spec.storageClassName nor the
beta class annotation, set spec.storageClassName to the class annotated
`storageclass.kubernetes.io/is-default-class: "true"`; of several defaults the newest wins
(then the first by name), as Kubernetes 1.28+. `storageClassName: ""` is a choice ("no
class": static volumes only) and stays. No default class: the claim keeps no class, and the
binder gives it one later if a default appears (not done yet: see docs/storage.md).
Registered in kctl.admission.plugins.builtin_plugins; the chain calls `mutate`.
"""

from __future__ import annotations

from kctl.admission.plugins import AdmissionPlugin, Attributes, Lister
from kctl.machinery.persistentvolumes import claim_has_class, default_class

NAME = "DefaultStorageClass"
STORAGE_CLASS = "StorageClass.storage.k8s.io"


def mutate(attrs: Attributes, lister: Lister) -> None:
    """Name the default class on a new claim that names none."""
    pvc = attrs.obj
    if attrs.operation != "CREATE" or attrs.subresource or not isinstance(pvc, dict):
        return
    if not isinstance(pvc.get("spec"), dict) or claim_has_class(pvc):
        return
    chosen = default_class(lister(STORAGE_CLASS))
    if chosen is not None:
        pvc["spec"]["storageClassName"] = chosen["metadata"]["name"]


PLUGIN = AdmissionPlugin(name=NAME, kinds=frozenset({"PersistentVolumeClaim"}), mutate=mutate)

__all__ = ["NAME", "PLUGIN", "mutate"]
