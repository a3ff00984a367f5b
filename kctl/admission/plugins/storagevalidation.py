"""The checks Kubernetes makes on claims, volumes and classes that their JSON Schemas cannot say.

Kubernetes makes most of these in its registry's validation (pkg/apis/core/validation:
ValidatePersistentVolume(Claim)(Update), pkg/apis/storage/validation) and the resize one in
the `PersistentVolumeClaimResize` admission plugin; kctl makes them here, after schema
validation, with Kubernetes' messages (one line each, the field path first):

- a PersistentVolumeClaim needs `spec.accessModes` (ReadWriteOncePod alone) and
  `spec.resources.requests.storage` > 0; after creation its spec is immutable except that
  `volumeName` may be set once (by the binder), a class set where none was, and, on a Bound
  claim, `resources.requests` grown when its class has `allowVolumeExpansion: true`
  (never shrunk);
- a PersistentVolume needs `spec.accessModes`, `spec.capacity.storage` > 0 (and nothing
  else in capacity), exactly one volume source, and node affinity for a `local` source;
  its source, volumeMode and node affinity do not change;
- a StorageClass's provisioner, parameters, reclaimPolicy and volumeBindingMode do not change.

Registered in kctl.admission.plugins.builtin_plugins; the chain calls `validate`.
"""

from __future__ import annotations

import copy

from kctl.admission.plugins import AdmissionPlugin, Attributes, Lister
from kctl.machinery.errors import FieldError, Forbidden, Invalid
from kctl.machinery.persistentvolumes import (ANN_BETA_CLASS, claim_request, storage_of, volume_sources)

NAME = "StorageValidation"
PVC, PV, SC = "PersistentVolumeClaim", "PersistentVolume", "StorageClass.storage.k8s.io"
STORAGE_CLASS = SC
#: Kubernetes' message for a changed claim spec (kube-apiserver 1.29+)
CLAIM_SPEC_IMMUTABLE = ("spec is immutable after creation except resources.requests and "
                        "volumeAttributesClassName for bound claims")
RESIZE_FORBIDDEN = ("only dynamically provisioned pvc can be resized and the storageclass that provisions "
                    "the pvc must support resize")


def validate(attrs: Attributes, lister: Lister) -> None:
    """Refuse a claim, volume or class Kubernetes would refuse (Invalid / Forbidden, one line)."""
    obj = attrs.obj
    if attrs.operation not in ("CREATE", "UPDATE") or attrs.subresource or not isinstance(obj, dict):
        return
    old = attrs.old_obj if attrs.operation == "UPDATE" and isinstance(attrs.old_obj, dict) else None
    kind = attrs.rt.group_kind
    if kind == PVC:
        errors = claim_errors(obj) + (claim_update_errors(obj, old) if old else [])
    elif kind == PV:
        errors = volume_errors(obj) + (volume_update_errors(obj, old) if old else [])
    elif kind == SC:
        errors = class_update_errors(obj, old) if old else []
    else:
        return
    if errors:
        raise Invalid(f'{attrs.rt.kind} "{attrs.name}"', errors)
    if kind == PVC and old is not None:
        _check_resize(attrs.name, obj, old, lister)


def claim_errors(pvc: dict) -> list[FieldError]:
    """ValidatePersistentVolumeClaimSpec: access modes and a positive storage request."""
    spec = pvc.get("spec") if isinstance(pvc.get("spec"), dict) else {}
    errors = _access_mode_errors(spec.get("accessModes"), required="at least 1 access mode is required")
    requests = (spec.get("resources") or {}).get("requests") if isinstance(spec.get("resources"), dict) else None
    if not isinstance(requests, dict) or requests.get("storage") is None:
        errors.append(FieldError("spec.resources[storage]", "Required value"))
    else:
        size = storage_of(requests)
        if size is not None and size <= 0:
            errors.append(FieldError("spec.resources[storage]",
                                     f'Invalid value: "{requests["storage"]}": must be greater than zero'))
    return errors


def claim_update_errors(new: dict, old: dict) -> list[FieldError]:
    """ValidatePersistentVolumeClaimUpdate: what may change in a claim's spec after creation."""
    new_spec = copy.deepcopy(new.get("spec") or {})
    old_spec = copy.deepcopy(old.get("spec") or {})
    if not old_spec.get("volumeName"):  # the binder sets it once
        _same(old_spec, new_spec, "volumeName")
    old_annotations = (old.get("metadata") or {}).get("annotations") or {}
    if old_spec.get("storageClassName") is None and ANN_BETA_CLASS not in old_annotations \
            and new_spec.get("storageClassName"):  # a class given to a claim that had none
        _same(old_spec, new_spec, "storageClassName")
    _same(old_spec, new_spec, "volumeAttributesClassName")
    errors = []
    if ((old.get("status") or {}).get("phase")) == "Bound":
        old_requests = (old_spec.get("resources") or {}).get("requests")
        new_resources = new_spec.get("resources")
        if isinstance(old_requests, dict) and isinstance(new_resources, dict) \
                and isinstance(new_resources.get("requests"), dict):
            if "storage" in old_requests:
                new_resources["requests"]["storage"] = old_requests["storage"]
            else:
                new_resources["requests"].pop("storage", None)
    if new_spec != old_spec:
        errors.append(FieldError("spec", f"Forbidden: {CLAIM_SPEC_IMMUTABLE}"))
    old_size, new_size = claim_request(old), claim_request(new)
    if old_size is not None and new_size is not None and new_size < old_size:
        errors.append(FieldError("spec.resources.requests.storage",
                                 "Forbidden: field can not be less than previous value"))
    return errors


def volume_errors(pv: dict) -> list[FieldError]:
    """ValidatePersistentVolumeSpec: access modes, capacity, exactly one source, a local volume's node affinity."""
    spec = pv.get("spec") if isinstance(pv.get("spec"), dict) else {}
    errors = _access_mode_errors(spec.get("accessModes"), required="")
    capacity = spec.get("capacity")
    if not capacity:
        errors.append(FieldError("spec.capacity", "Required value"))
    elif isinstance(capacity, dict):
        if "storage" not in capacity or len(capacity) > 1:
            errors.append(FieldError("spec.capacity", f"Unsupported value: {_go_map(capacity)}: "
                                                      'supported values: "storage"'))
        size = storage_of(capacity)
        if size is not None and size <= 0:
            errors.append(FieldError("spec.capacity[storage]",
                                     f'Invalid value: "{capacity["storage"]}": must be greater than zero'))
    sources = volume_sources(pv)
    if not sources:
        errors.append(FieldError("spec", "Required value: must specify a volume type"))
    for extra in sources[1:]:
        errors.append(FieldError(f"spec.{extra}", "Forbidden: may not specify more than 1 volume type"))
    affinity = spec.get("nodeAffinity")
    if "local" in sources and not (isinstance(affinity, dict) and affinity.get("required")):
        errors.append(FieldError("spec.nodeAffinity", "Required value: Local volume requires node affinity"))
    return errors


def volume_update_errors(new: dict, old: dict) -> list[FieldError]:
    """ValidatePersistentVolumeUpdate: the source, volumeMode and (once set) node affinity are fixed."""
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errors = []
    if {s: new_spec.get(s) for s in volume_sources(new)} != {s: old_spec.get(s) for s in volume_sources(old)}:
        errors.append(FieldError("spec.persistentvolumesource",
                                 "Forbidden: spec.persistentvolumesource is immutable after creation"))
    if new_spec.get("volumeMode") != old_spec.get("volumeMode"):
        errors.append(FieldError("spec.volumeMode", f"Invalid value: \"{new_spec.get('volumeMode') or ''}\": "
                                                    "field is immutable"))
    if old_spec.get("nodeAffinity") is not None and new_spec.get("nodeAffinity") != old_spec.get("nodeAffinity"):
        errors.append(FieldError("nodeAffinity", 'Invalid value: "object": field is immutable'))
    return errors


def class_update_errors(new: dict, old: dict) -> list[FieldError]:
    """ValidateStorageClassUpdate: provisioner, parameters, reclaimPolicy, volumeBindingMode are fixed."""
    errors = []
    if new.get("parameters") != old.get("parameters"):
        errors.append(FieldError("parameters", "Forbidden: updates to parameters are forbidden."))
    if new.get("provisioner") != old.get("provisioner"):
        errors.append(FieldError("provisioner", "Forbidden: updates to provisioner are forbidden."))
    if new.get("reclaimPolicy") != old.get("reclaimPolicy"):
        errors.append(FieldError("reclaimPolicy", "Forbidden: updates to reclaimPolicy are forbidden."))
    if new.get("volumeBindingMode") != old.get("volumeBindingMode"):
        errors.append(FieldError("volumeBindingMode", f'Invalid value: "{new.get("volumeBindingMode") or ""}": '
                                                      "field is immutable"))
    return errors


def _check_resize(name: str, new: dict, old: dict, lister: Lister) -> None:
    """PersistentVolumeClaimResize: a bound claim grows only when its class allows volume expansion."""
    old_size, new_size = claim_request(old), claim_request(new)
    if old_size is None or new_size is None or new_size <= old_size:
        return
    if ((old.get("status") or {}).get("phase")) != "Bound":
        raise Forbidden(f'persistentvolumeclaims "{name}" is forbidden: '
                        "Only bound persistent volume claims can be expanded")
    class_name = (old.get("spec") or {}).get("storageClassName") or ""
    classes = {sc["metadata"]["name"]: sc for sc in lister(STORAGE_CLASS)} if class_name else {}
    if class_name not in classes or classes[class_name].get("allowVolumeExpansion") is not True:
        raise Forbidden(f'persistentvolumeclaims "{name}" is forbidden: {RESIZE_FORBIDDEN}')


def _access_mode_errors(modes: object, *, required: str) -> list[FieldError]:
    if not modes:
        return [FieldError("spec.accessModes", "Required value" + (f": {required}" if required else ""))]
    if isinstance(modes, list) and "ReadWriteOncePod" in modes and len(modes) > 1:
        return [FieldError("spec.accessModes", "Forbidden: may not use ReadWriteOncePod with other access modes")]
    return []


def _same(old_spec: dict, new_spec: dict, key: str) -> None:
    """Make old_spec[key] what new_spec has (the change is allowed)."""
    if key in new_spec:
        old_spec[key] = new_spec[key]
    else:
        old_spec.pop(key, None)


def _go_map(values: dict) -> str:
    """A map as Go's %v prints it: `map[cpu:1 storage:1Gi]` (sorted keys)."""
    return '"map[' + " ".join(f"{k}:{values[k]}" for k in sorted(values)) + ']"'


PLUGIN = AdmissionPlugin(name=NAME, kinds=frozenset({PVC, PV, SC}), validate=validate)

__all__ = ["CLAIM_SPEC_IMMUTABLE", "NAME", "PLUGIN", "RESIZE_FORBIDDEN", "claim_errors", "claim_update_errors",
           "class_update_errors", "validate", "volume_errors", "volume_update_errors"]
