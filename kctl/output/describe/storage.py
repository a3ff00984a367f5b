"""kubectl describe's layouts for storage: a PersistentVolume, a PersistentVolumeClaim (with the pods that use it,
`Used By:`) and a StorageClass, as kubectl's describePersistentVolume(Claim) and describeStorageClass print them.

Entries of the kind -> describer table in kctl.output.describe; the `describe` command
(kctl.cli.get) hands a claim's namespace's pods in `Context.pods`.
"""

from __future__ import annotations

from typing import Callable

from kctl.machinery.persistentvolumes import (access_modes_string, claim_class, is_default_class, pod_claim_names,
                                              volume_class)
from kctl.output.cells import age
from kctl.output.describe.context import Context
from kctl.output.describe.sections import write_annotations, write_events, write_labels
from kctl.output.describe.writer import PrefixWriter

__all__ = ["describe_persistent_volume", "describe_persistent_volume_claim", "describe_storage_class"]


def _finalizers(meta: dict) -> str:
    """Go's %v of a []string: `[a b]`."""
    return "[" + " ".join(str(f) for f in meta.get("finalizers") or ()) + "]"


def _status(obj: dict, ctx: Context) -> str:
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return f"Terminating (lasts {age(meta['deletionTimestamp'], ctx.now)})"
    return str((obj.get("status") or {}).get("phase") or "")


def _go_bool(value: object) -> str:
    return "true" if value is True else "false"


def _node_affinity(w: PrefixWriter, affinity: dict | None) -> None:
    """printVolumeNodeAffinity: `Node Affinity:`, `Required Terms:`, one `Term N:` per selector term."""
    w.write(0, "Node Affinity:\t")
    required = (affinity or {}).get("required")
    if not required:
        w.write(0, "<none>\n")
        return
    w.write(0, "\n")
    w.write(1, "Required Terms:\t")
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        w.write(0, "<none>\n")
        return
    w.write(0, "\n")
    for i, term in enumerate(terms):
        _requirements(w, 2, f"Term {i}", term.get("matchExpressions") or [], lambda r: str(r.get("operator", "")))


def _requirements(w: PrefixWriter, level: int, title: str, reqs: list, operator: Callable[[dict], str]) -> None:
    """`Term N:\tkey op [v1, v2]`, one requirement a line (printNodeSelectorTermsMultilineWithIndent)."""
    w.write(level, f"{title}:\t")
    if not reqs:
        w.write(0, "<none>\n")
        return
    for i, req in enumerate(reqs):
        if i:
            w.write(level, "\t")
        text = f"{req.get('key', '')} {operator(req).lower()}"
        if req.get("values"):
            text += " [" + ", ".join(str(v) for v in req["values"]) + "]"
        w.write(0, text + "\n")


def _source(w: PrefixWriter, spec: dict) -> None:
    """The volume source lines kubectl prints under `Source:` for the sources kctl serves."""
    if spec.get("hostPath") is not None:
        src = spec["hostPath"]
        w.write(2, "Type:\tHostPath (bare host directory volume)\n"
                   f"    Path:\t{src.get('path', '')}\n"
                   f"    HostPathType:\t{src.get('type') or '<none>'}\n")
    elif spec.get("local") is not None:
        w.write(2, "Type:\tLocalVolume (a persistent volume backed by local storage on a node)\n"
                   f"    Path:\t{spec['local'].get('path', '')}\n")
    elif spec.get("csi") is not None:
        csi = spec["csi"]
        w.write(2, "Type:\tCSI (a Container Storage Interface (CSI) volume source)\n"
                   f"    Driver:\t{csi.get('driver', '')}\n"
                   f"    FSType:\t{csi.get('fsType') or ''}\n"
                   f"    VolumeHandle:\t{csi.get('volumeHandle', '')}\n"
                   f"    ReadOnly:\t{_go_bool(csi.get('readOnly'))}\n")
        attributes = csi.get("volumeAttributes") or {}
        w.write(2, "VolumeAttributes:\t")
        if not attributes:
            w.write(0, "<none>\n")
        for i, key in enumerate(sorted(attributes)):  # kubectl's own spacing, LEVEL_2 on each write
            if i:
                w.write(2, "")
                w.write(2, "\t")
            w.write(2, f"{key}={attributes[key]}"[:140] + "\n")
    elif spec.get("nfs") is not None:
        nfs = spec["nfs"]
        w.write(2, "Type:\tNFS (an NFS mount that lasts the lifetime of a pod)\n"
                   f"    Server:\t{nfs.get('server', '')}\n"
                   f"    Path:\t{nfs.get('path', '')}\n"
                   f"    ReadOnly:\t{_go_bool(nfs.get('readOnly'))}\n")
    else:
        from kctl.machinery.persistentvolumes import volume_sources

        for name in volume_sources({"spec": spec}):
            w.write(2, f"Type:\t{name} (not served by kctl)\n")


def describe_persistent_volume(w: PrefixWriter, pv: dict, ctx: Context) -> None:
    """kubectl's describePersistentVolume."""
    meta, spec, status = pv.get("metadata") or {}, pv.get("spec") or {}, pv.get("status") or {}
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Finalizers:\t{_finalizers(meta)}\n")
    w.write(0, f"StorageClass:\t{volume_class(pv)}\n")
    if spec.get("volumeAttributesClassName") is not None:
        w.write(0, f"VolumeAttributesClass:\t{spec['volumeAttributesClassName']}\n")
    w.write(0, f"Status:\t{_status(pv, ctx)}\n")
    ref = spec.get("claimRef")
    w.write(0, f"Claim:\t{(ref.get('namespace') or '') + '/' + (ref.get('name') or '') if ref else ''}\n")
    w.write(0, f"Reclaim Policy:\t{spec.get('persistentVolumeReclaimPolicy') or ''}\n")
    w.write(0, f"Access Modes:\t{access_modes_string(spec.get('accessModes'))}\n")
    if spec.get("volumeMode"):
        w.write(0, f"VolumeMode:\t{spec['volumeMode']}\n")
    w.write(0, f"Capacity:\t{(spec.get('capacity') or {}).get('storage') or '0'}\n")
    _node_affinity(w, spec.get("nodeAffinity"))
    w.write(0, f"Message:\t{status.get('message') or ''}\n")
    w.write(0, "Source:\n")
    _source(w, spec)
    write_events(w, ctx.events, ctx.now)


def describe_persistent_volume_claim(w: PrefixWriter, pvc: dict, ctx: Context) -> None:
    """kubectl's describePersistentVolumeClaim, with `Used By:` (the pods of its namespace that name it)."""
    meta, spec, status = pvc.get("metadata") or {}, pvc.get("spec") or {}, pvc.get("status") or {}
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    w.write(0, f"StorageClass:\t{claim_class(pvc)}\n")
    w.write(0, f"Status:\t{_status(pvc, ctx)}\n")
    w.write(0, f"Volume:\t{spec.get('volumeName') or ''}\n")
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Finalizers:\t{_finalizers(meta)}\n")
    capacity = modes = ""
    if spec.get("volumeName"):
        modes = access_modes_string(status.get("accessModes"))
        capacity = str((status.get("capacity") or {}).get("storage") or "0")
    w.write(0, f"Capacity:\t{capacity}\n")
    w.write(0, f"Access Modes:\t{modes}\n")
    if spec.get("volumeMode"):
        w.write(0, f"VolumeMode:\t{spec['volumeMode']}\n")
    name = meta.get("name")
    users = sorted(p["metadata"]["name"] for p in ctx.pods or ()
                   if (p.get("metadata") or {}).get("namespace") == meta.get("namespace")
                   and name in pod_claim_names(p))
    w.write(0, "Used By:\t")
    if not users:
        w.write(0, "<none>\n")
    for i, user in enumerate(users):
        w.write(0, ("\t" if i else "") + f"{user}\n")
    conditions = status.get("conditions") or []
    if conditions:
        w.write(0, "Conditions:\n")
        w.write(1, "Type\tStatus\tLastProbeTime\tLastTransitionTime\tReason\tMessage\n")
        w.write(1, "----\t------\t-----------------\t------------------\t------\t-------\n")
        for c in conditions:
            w.write(1, f"{c.get('type', '')} \t{c.get('status', '')} \t{c.get('lastProbeTime') or ''} \t"
                       f"{c.get('lastTransitionTime') or ''} \t{c.get('reason') or ''} \t{c.get('message') or ''}\n")
    write_events(w, ctx.events, ctx.now)


def describe_storage_class(w: PrefixWriter, sc: dict, ctx: Context) -> None:
    """kubectl's describeStorageClass."""
    meta = sc.get("metadata") or {}
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"IsDefaultClass:\t{'Yes' if is_default_class(sc) else 'No'}\n")
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Provisioner:\t{sc.get('provisioner', '')}\n")
    write_labels(w, "Parameters", sc.get("parameters"))
    expansion = sc.get("allowVolumeExpansion")
    w.write(0, f"AllowVolumeExpansion:\t{'<unset>' if expansion is None else ('True' if expansion else 'False')}\n")
    options = sc.get("mountOptions") or []
    if not options:
        w.write(0, "MountOptions:\t<none>\n")
    else:
        w.write(0, "MountOptions:\n")
        for option in options:
            w.write(1, f"{option}\n")
    if sc.get("reclaimPolicy"):
        w.write(0, f"ReclaimPolicy:\t{sc['reclaimPolicy']}\n")
    if sc.get("volumeBindingMode"):
        w.write(0, f"VolumeBindingMode:\t{sc['volumeBindingMode']}\n")
    topologies = sc.get("allowedTopologies")
    if topologies is not None:
        w.write(0, "AllowedTopologies:\t")
        if not topologies:
            w.write(0, "<none>\n")
        else:
            w.write(0, "\n")
            for i, term in enumerate(topologies):
                _requirements(w, 1, f"Term {i}", term.get("matchLabelExpressions") or [], lambda r: "in")
    write_events(w, ctx.events, ctx.now)
