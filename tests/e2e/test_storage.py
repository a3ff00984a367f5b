"""Persistent volumes on the test bed (tests/e2e/conftest.py): a claim's pod runs where its volume is.

A Deployment (1 replica, Recreate) mounts a claim of the default class `local`: the
scheduler names the pod's node on the claim, the volume is made there (a Podman named
volume on that host), and the pod is bound there. When that host is cut off, the
replacement pod cannot go anywhere else: it stays Pending and the scheduler says why
("volume node affinity conflict"); when the host heals, the pod runs there again, with
the data it wrote. The cut is kept short (the node-lifecycle timings of the suite's
daemon: grace 6 s, toleration 4 s), so the test runs with the rest of the suite.
"""

from __future__ import annotations

import contextlib

import pytest

from kctl.machinery.errors import NotFound
from kctl.runtime.podman import PodmanRuntime

from .conftest import GRACE, TOLERATION, Cluster

pytestmark = pytest.mark.e2e

IMAGE = "localhost/busybox:demo"
SCRIPT = "[ -f /data/first ] || hostname > /data/first; trap 'exit 0' TERM; sleep 3600 & wait"
CONFLICT = "node(s) had volume node affinity conflict"


def claim(namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}}}


def deployment(namespace: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "db", "namespace": namespace},
            "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "db", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
                                         "command": ["sh", "-c", SCRIPT],
                                         "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                         "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}}}


def _volume(cluster: Cluster, namespace: str) -> dict | None:
    """The claim's PV once the claim is Bound."""
    pvc = cluster.api.get(cluster.api.resource("persistentvolumeclaims"), "data", namespace=namespace)
    if (pvc.get("status") or {}).get("phase") != "Bound":
        return None
    try:
        return cluster.api.get(cluster.api.resource("persistentvolumes"), pvc["spec"]["volumeName"])
    except NotFound:
        return None


def _pending_message(cluster: Cluster, namespace: str) -> str:
    """The PodScheduled=False message of the namespace's unbound, not terminating pod ("" if none)."""
    for pod in cluster.pods(namespace):
        if pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            continue
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return condition.get("message", "")
    return ""


def test_claim_pins_its_pod_to_the_volumes_host_across_a_cut(cluster: Cluster, namespace: str) -> None:
    """Bound to the volume's host; cut: the replacement waits (volume node affinity conflict); healed: runs there."""
    cluster.apply(claim(namespace), deployment(namespace))
    cluster.wait(lambda: len(cluster.running(namespace)) == 1, what="the db pod Running")
    pv = cluster.wait(lambda: _volume(cluster, namespace), what="claim data Bound")
    (first,) = cluster.running(namespace)
    holder = first["spec"]["nodeName"]
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == [holder]
    host = cluster.bed.host(holder)
    with contextlib.closing(PodmanRuntime(host.url)) as runtime:
        assert runtime.list_volumes({"io.kctl.pv": pv["metadata"]["name"]}) == [pv["spec"]["csi"]["volumeHandle"]]

    cluster.bed.cut(holder)
    try:
        cluster.wait(lambda: cluster.ready(holder) == "Unknown", what=f"node {holder} Ready=Unknown",
                     timeout=GRACE + 20)
        message = cluster.wait(lambda: _pending_message(cluster, namespace), timeout=TOLERATION + 40,
                               what="the replacement pod Pending with a scheduling failure",
                               detail=lambda: [(p["metadata"]["name"], p["spec"].get("nodeName"))
                                               for p in cluster.pods(namespace)])
        assert f"2 {CONFLICT}" in message, message
        # the Event is recorded after the pod's condition (the recorder writes in the background)
        cluster.wait(lambda: any(CONFLICT in e["message"] for e in cluster.events(namespace, "FailedScheduling")),
                     what="a FailedScheduling event naming the volume node affinity conflict", timeout=30)
        assert not any(p["spec"].get("nodeName") not in (None, holder) for p in cluster.pods(namespace))
    finally:
        cluster.bed.heal(holder)
    cluster.wait(lambda: cluster.ready(holder) == "True", what=f"node {holder} Ready again after the heal")
    cluster.wait(lambda: [p["spec"]["nodeName"] for p in cluster.running(namespace)] == [holder]
                 and cluster.running(namespace)[0]["metadata"]["uid"] != first["metadata"]["uid"],
                 what=f"the replacement pod Running on {holder}", timeout=120,
                 detail=lambda: [(p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("phase"))
                                 for p in cluster.pods(namespace)])
    (second,) = cluster.running(namespace)
    read = cluster.exec(second["metadata"]["name"], namespace, "cat", "/data/first")
    assert read.returncode == 0, read.stderr.decode()
    assert read.stdout.decode().strip() == first["metadata"]["name"]  # written by the first pod, kept
