"""A StatefulSet pod whose local volume is on a lost host, on the test bed (tests/e2e/conftest.py).

`db-0` of a StatefulSet of 1 writes to its claim `data-db-0` (class `local`: a Podman
volume on the host the scheduler picked). When that host is cut off, the evicted `db-0`
stays Terminating and is not replaced (at most one pod per identity, as Kubernetes). The
recovery docs/storage.md describes is then followed: force-deleting the pod makes the set
create `db-0` again, which stays Pending ("volume node affinity conflict"); deleting the
claim gives it a new, empty one, provisioned where it runs, on another host. When the host
heals, its agent removes the released old volume. Short timings (grace 6 s, toleration
4 s) keep the module within the suite's budget.
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


def statefulset(namespace: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": namespace},
            "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "db", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
                                         "command": ["sh", "-c", SCRIPT],
                                         "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}}}]}}


def _claim(cluster: Cluster, namespace: str) -> dict | None:
    try:
        return cluster.api.get(cluster.api.resource("persistentvolumeclaims"), "data-db-0", namespace=namespace)
    except NotFound:
        return None


def _bound_volume(cluster: Cluster, namespace: str) -> dict | None:
    claim = _claim(cluster, namespace)
    if claim is None or (claim.get("status") or {}).get("phase") != "Bound":
        return None
    try:
        return cluster.api.get(cluster.api.resource("persistentvolumes"), claim["spec"]["volumeName"])
    except NotFound:
        return None


def _pod(cluster: Cluster, namespace: str) -> dict | None:
    return next((p for p in cluster.pods(namespace) if p["metadata"]["name"] == "db-0"), None)


def _pending_message(cluster: Cluster, namespace: str) -> str:
    pod = _pod(cluster, namespace)
    if pod is None or pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
        return ""
    return next((c.get("message", "") for c in (pod.get("status") or {}).get("conditions") or ()
                 if c.get("type") == "PodScheduled" and c.get("status") == "False"), "")


def _pv_exists(cluster: Cluster, name: str) -> bool:
    try:
        cluster.api.get(cluster.api.resource("persistentvolumes"), name)
        return True
    except NotFound:
        return False


def test_lost_host_recovery_by_giving_up_the_claim(cluster: Cluster, namespace: str) -> None:
    """Cut: db-0 Terminating, not replaced; forced: Pending with the conflict; claim deleted: runs elsewhere."""
    cluster.apply(statefulset(namespace))
    cluster.wait(lambda: len(cluster.running(namespace)) == 1, what="db-0 Running")
    old_pv = cluster.wait(lambda: _bound_volume(cluster, namespace), what="claim data-db-0 Bound")
    (first,) = cluster.running(namespace)
    holder = first["spec"]["nodeName"]
    assert cluster.exec("db-0", namespace, "sh", "-c", "echo old > /data/mark").returncode == 0

    cluster.bed.cut(holder)
    try:
        cluster.wait(lambda: cluster.ready(holder) == "Unknown", what=f"node {holder} Ready=Unknown",
                     timeout=GRACE + 20)
        cluster.wait(lambda: (_pod(cluster, namespace) or {}).get("metadata", {}).get("deletionTimestamp"),
                     what="db-0 evicted (Terminating)", timeout=TOLERATION + 40)
        assert [p["metadata"]["uid"] for p in cluster.pods(namespace)] == [first["metadata"]["uid"]], \
            "the set replaced a pod that may still run"
        forced = cluster.kctl("delete", "pod", "db-0", "-n", namespace, "--grace-period=0", "--force")
        assert forced.returncode == 0, forced.stderr.decode()
        message = cluster.wait(lambda: _pending_message(cluster, namespace), what="a new db-0 Pending",
                               detail=lambda: [(p["metadata"]["name"], p["spec"].get("nodeName"))
                                               for p in cluster.pods(namespace)])
        assert f"2 {CONFLICT}" in message, message
        dropped = cluster.kctl("delete", "pvc", "data-db-0", "-n", namespace, "--wait=false")
        assert dropped.returncode == 0, dropped.stderr.decode()

        def running_elsewhere() -> dict | None:
            pods = cluster.running(namespace)
            return pods[0] if len(pods) == 1 and pods[0]["spec"]["nodeName"] != holder else None
        second = cluster.wait(running_elsewhere, what="db-0 Running on another host", timeout=120,
                              detail=lambda: [(p["metadata"]["name"], p["spec"].get("nodeName"),
                                               p["status"].get("phase")) for p in cluster.pods(namespace)])
        new_pv = cluster.wait(lambda: _bound_volume(cluster, namespace), what="the new claim Bound")
        assert new_pv["metadata"]["name"] != old_pv["metadata"]["name"]
        terms = new_pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert terms[0]["matchExpressions"][0]["values"] == [second["spec"]["nodeName"]]
        assert cluster.exec("db-0", namespace, "cat", "/data/mark").returncode != 0, "the new volume is empty"
        assert cluster.exec("db-0", namespace, "cat", "/data/first").stdout.decode().strip() == "db-0"
    finally:
        cluster.bed.heal(holder)
    cluster.wait(lambda: cluster.ready(holder) == "True", what=f"node {holder} Ready again")
    cluster.wait(lambda: not _pv_exists(cluster, old_pv["metadata"]["name"]),
                 what="the released old PV deleted by its host's agent", timeout=120)
    with contextlib.closing(PodmanRuntime(cluster.bed.host(holder).url)) as runtime:
        assert runtime.list_volumes({"io.kctl.pv": old_pv["metadata"]["name"]}) == []
