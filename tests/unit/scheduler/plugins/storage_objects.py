"""Builders of the storage objects the volume plugin tests use: claims, volumes, classes, pods with claims."""

from __future__ import annotations

from plugin_harness import make_pod

HOSTNAME = "kubernetes.io/hostname"


def claim(name: str, *, namespace: str = "default", class_name: str | None = "local", volume_name: str = "",
          access: tuple[str, ...] = ("ReadWriteOnce",), storage: str = "1Gi", annotations: dict | None = None,
          deleting: bool = False, selector: dict | None = None) -> dict:
    """A PersistentVolumeClaim (bound when volume_name is given)."""
    spec: dict = {"accessModes": list(access), "resources": {"requests": {"storage": storage}}}
    if class_name is not None:
        spec["storageClassName"] = class_name
    if volume_name:
        spec["volumeName"] = volume_name
    if selector is not None:
        spec["selector"] = selector
    meta: dict = {"name": name, "namespace": namespace, "uid": f"uid-claim-{name}", "resourceVersion": "1",
                  "annotations": dict(annotations or {})}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec,
            "status": {"phase": "Bound" if volume_name else "Pending"}}


def volume(name: str, *, node: str | None = None, class_name: str = "local", storage: str = "1Gi",
           access: tuple[str, ...] = ("ReadWriteOnce",), claim_ref: dict | None = None, phase: str = "Available",
           labels: dict | None = None) -> dict:
    """A PersistentVolume, pinned to `node` by a kubernetes.io/hostname node affinity when given."""
    spec: dict = {"capacity": {"storage": storage}, "accessModes": list(access), "storageClassName": class_name,
                  "persistentVolumeReclaimPolicy": "Delete", "hostPath": {"path": f"/srv/{name}"}}
    if node is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}
    if claim_ref is not None:
        spec["claimRef"] = claim_ref
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "uid": f"uid-pv-{name}", "labels": dict(labels or {})},
            "spec": spec, "status": {"phase": phase}}


def storage_class(name: str = "local", *, provisioner: str = "kctl.io/local-volume",
                  mode: str = "WaitForFirstConsumer", allowed_topologies: list | None = None) -> dict:
    """A StorageClass."""
    obj: dict = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                 "provisioner": provisioner, "reclaimPolicy": "Delete", "volumeBindingMode": mode}
    if allowed_topologies is not None:
        obj["allowedTopologies"] = allowed_topologies
    return obj


def pod_with_claims(name: str, *claims: str, node_name: str | None = None, namespace: str = "default") -> dict:
    """A pod mounting each named claim as a persistentVolumeClaim volume."""
    pod = make_pod(name, node_name=node_name, namespace=namespace)
    pod["spec"]["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                              for i, c in enumerate(claims)]
    return pod
