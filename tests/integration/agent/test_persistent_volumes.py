"""Persistent volumes end to end on real Podman: a claim of class `local` becomes a Podman named volume
on the pod's node, outlives the pod, and goes with the claim (reclaim Delete) or stays (Retain).

The daemon (conftest.py) runs the control plane (admission gives a claim the default class, the
PV controller provisions when the scheduler names the node) and the node agent (mounts, and
deletes released local volumes).
"""

from __future__ import annotations

import pytest

from kctl.machinery.errors import NotFound
from kctl.runtime.interface import LABEL_MANAGED

from .conftest import NODE, wait_for

pytestmark = pytest.mark.integration
IMAGE = "localhost/busybox:demo"
LABEL_PV = "io.kctl.pv"


def claim(name: str, *, class_name: str | None = None) -> dict:
    spec: dict = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}}
    if class_name is not None:
        spec["storageClassName"] = class_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def claim_pod(name: str, claim_name: str, script: str, *, restart: str = "Always") -> dict:
    """A pod (scheduled by the daemon: no nodeName) mounting the claim at /data."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"terminationGracePeriodSeconds": 1, "restartPolicy": restart,
                     "containers": [{"name": "app", "image": IMAGE, "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", script],
                                     "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]}}


def get(api, resource: str, name: str, namespace: str | None = "default") -> dict | None:
    try:
        return api.get(api.resource(resource), name, namespace=namespace)
    except NotFound:
        return None


def phase(obj: dict | None) -> str:
    return ((obj or {}).get("status") or {}).get("phase", "")


def bound_volume(api, claim_name: str) -> dict | None:
    """The PV of a Bound claim, once both sides say so."""
    pvc = get(api, "persistentvolumeclaims", claim_name)
    if phase(pvc) != "Bound":
        return None
    pv = get(api, "persistentvolumes", pvc["spec"]["volumeName"], None)
    return pv if phase(pv) == "Bound" else None


def running(api, name: str) -> bool:
    return phase(get(api, "pods", name)) == "Running"


def delete_pod(api, name: str, daemon) -> None:
    api.delete(api.resource("pods"), name, namespace="default")
    wait_for(lambda: get(api, "pods", name) is None, what=f"pod {name} gone", daemon=daemon)


def test_claim_volume_outlives_pods_and_follows_the_reclaim_policy(api, daemon, runtime) -> None:
    """Delete: the data survives the pod and is gone with the claim; Retain: the volume stays."""
    api.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "keep"},
                "provisioner": "kctl.io/local-volume", "reclaimPolicy": "Retain",
                "volumeBindingMode": "WaitForFirstConsumer"})
    api.create(claim("data"))  # no class: the default class `local` (reclaim Delete)
    api.create(claim("kept", class_name="keep"))
    assert get(api, "persistentvolumeclaims", "data")["spec"]["storageClassName"] == "local"
    api.create(claim_pod("writer", "data", "echo hello > /data/f && exec sleep 600"))
    api.create(claim_pod("keeper", "kept", "echo mine > /data/f && exec sleep 600"))

    pv = wait_for(lambda: bound_volume(api, "data"), what="claim data Bound", daemon=daemon)
    kept_pv = wait_for(lambda: bound_volume(api, "kept"), what="claim kept Bound", daemon=daemon)
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]}]}]
    handle = pv["spec"]["csi"]["volumeHandle"]
    kept_handle = kept_pv["spec"]["csi"]["volumeHandle"]
    wait_for(lambda: running(api, "writer") and running(api, "keeper"), what="writer and keeper Running",
             daemon=daemon)
    assert get(api, "pods", "writer")["spec"]["nodeName"] == NODE
    assert runtime.list_volumes({LABEL_PV: pv["metadata"]["name"]}) == [handle]

    # the pod goes, the data stays: a new pod using the claim reads it
    delete_pod(api, "writer", daemon)
    assert runtime.list_volumes({LABEL_PV: pv["metadata"]["name"]}) == [handle]
    api.create(claim_pod("reader", "data", "grep -qx hello /data/f", restart="Never"))
    wait_for(lambda: phase(get(api, "pods", "reader")) in ("Succeeded", "Failed"), what="reader finished",
             daemon=daemon)
    assert phase(get(api, "pods", "reader")) == "Succeeded"

    # the claims go: Delete removes PV and Podman volume; Retain keeps both (the PV Released)
    delete_pod(api, "reader", daemon)
    delete_pod(api, "keeper", daemon)
    api.delete(api.resource("persistentvolumeclaims"), "data", namespace="default")
    api.delete(api.resource("persistentvolumeclaims"), "kept", namespace="default")
    wait_for(lambda: get(api, "persistentvolumes", pv["metadata"]["name"], None) is None, what="PV deleted",
             daemon=daemon)
    assert handle not in runtime.list_volumes({LABEL_MANAGED: "true"})
    wait_for(lambda: phase(get(api, "persistentvolumes", kept_pv["metadata"]["name"], None)) == "Released",
             what="retained PV Released", daemon=daemon)
    assert runtime.list_volumes({LABEL_PV: kept_pv["metadata"]["name"]}) == [kept_handle]
