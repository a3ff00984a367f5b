"""A StatefulSet with a volumeClaimTemplate on real Podman: each pod keeps its own data.

The daemon fixture (conftest.py) runs the whole daemon (node agent, controllers,
scheduler) on the private Podman service. The set's 3 pods each write their name to
their claim's volume on first start (class `local`: a Podman named volume made on the
node); deleting every pod, or scaling to 1 and back to 3, brings pods of the same names
back that find their own data; deleting the set (claims whenDeleted: Delete, reclaim
Delete) leaves no Podman volume behind.
"""

from __future__ import annotations

import json

import pytest

from kctl.runtime.interface import LABEL_MANAGED

from .conftest import wait_for
from .test_daemon_pods import IMAGE

pytestmark = pytest.mark.integration

#: first start: write the pod's name to its volume ("new"); later starts find it ("kept")
SCRIPT = ('if [ -f /data/owner ]; then echo "kept: $(cat /data/owner)"; '
          'else hostname > /data/owner; echo "new: $(cat /data/owner)"; fi; exec sleep 3600')
NAMES = ["web-0", "web-1", "web-2"]


def statefulset(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": replicas, "serviceName": "web", "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": {"app": "web"}},
                     "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "app", "image": IMAGE, "imagePullPolicy": "Never",
                                         "command": ["sh", "-c", SCRIPT],
                                         "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                         "storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "16Mi"}}}}]}}


def pods(api) -> dict[str, dict]:
    items, _ = api.list(api.resource("pods"), namespace="default")
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


def ready(api, names: list[str]) -> bool:
    found = pods(api)
    if sorted(found) != names:
        return False
    return all(any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (p.get("status") or {}).get("conditions") or ()) for p in found.values())


def log_line(kctl, name: str) -> str:
    result = kctl("logs", name)
    return result.stdout.decode().strip() if result.returncode == 0 else ""


def pv_volumes(runtime) -> list[str]:
    return [v for v in runtime.list_volumes({LABEL_MANAGED: "true"}) if v.startswith("pvc-")]


def test_pods_keep_their_own_data(api, daemon, runtime, kctl) -> None:
    """Same names and own data after all pods are deleted and after 3 -> 1 -> 3; no volume left at the end."""
    applied = kctl("apply", "-f", "-", input=json.dumps(statefulset(3)).encode())
    assert applied.returncode == 0, applied.stderr
    wait_for(lambda: ready(api, NAMES), what="web-0..2 Ready", daemon=daemon, detail=lambda: sorted(pods(api)))
    wait_for(lambda: [log_line(kctl, n) for n in NAMES] == [f"new: {n}" for n in NAMES],
             what="each pod wrote its name", daemon=daemon)
    assert len(pv_volumes(runtime)) == 3
    uids = {n: p["metadata"]["uid"] for n, p in pods(api).items()}

    deleted = kctl("delete", "pods", "-l", "app=web", "--wait=false")
    assert deleted.returncode == 0, deleted.stderr
    wait_for(lambda: ready(api, NAMES) and all(pods(api)[n]["metadata"]["uid"] != uids[n] for n in NAMES),
             what="the pods back under the same names", daemon=daemon)
    wait_for(lambda: [log_line(kctl, n) for n in NAMES] == [f"kept: {n}" for n in NAMES],
             what="each pod found its own data", daemon=daemon, detail=lambda: [log_line(kctl, n) for n in NAMES])

    assert kctl("scale", "sts", "web", "--replicas", "1").returncode == 0
    wait_for(lambda: ready(api, ["web-0"]), what="scaled to 1", daemon=daemon)
    assert len(pv_volumes(runtime)) == 3, "scale-down keeps the claims and their volumes"
    assert kctl("scale", "sts", "web", "--replicas", "3").returncode == 0
    wait_for(lambda: ready(api, NAMES), what="scaled back to 3", daemon=daemon)
    wait_for(lambda: [log_line(kctl, n) for n in NAMES[1:]] == ["kept: web-1", "kept: web-2"],
             what="web-1 and web-2 found their data", daemon=daemon)

    assert kctl("delete", "sts", "web", "--wait=false").returncode == 0
    wait_for(lambda: not pods(api), what="the pods gone", daemon=daemon)
    wait_for(lambda: not api.list(api.resource("pvc"), namespace="default")[0], what="the claims gone",
             daemon=daemon, detail=lambda: [c["metadata"]["name"] for c in
                                            api.list(api.resource("pvc"), namespace="default")[0]])
    wait_for(lambda: not pv_volumes(runtime) and not api.list(api.resource("pv"))[0],
             what="no Podman volume and no PV left", daemon=daemon, detail=lambda: pv_volumes(runtime))
