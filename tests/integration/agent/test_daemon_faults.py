"""Faults in `kctl daemon` on real Podman: the daemon killed with -9 in the middle of a rollout.

After the restart the rollout must converge with exact counts: the wanted number of
Pods, each with one Podman pod and one app container, none of the old version, no
duplicate and no orphan (nothing labelled by kctl whose Pod is gone), and every orphan
the restarted daemon removed reported once in its log.
"""

from __future__ import annotations

import collections
import json
import re
import signal

import pytest

from kctl.runtime.interface import LABEL_MANAGED, LABEL_POD_UID

from .conftest import wait_for
from .test_daemon_workloads import deployment

pytestmark = pytest.mark.integration

REPLICAS = 3


def test_sigkill_mid_rollout_converges_exactly(api, daemon, runtime, kctl) -> None:
    """kill -9 while a rolling update is half done: after the restart exactly the new pods run, once each."""
    kctl("apply", "-f", "-", input=json.dumps(deployment(REPLICAS, "exec sleep 3600")).encode())
    assert kctl("rollout", "status", "deployment/web", "--timeout", "90s").returncode == 0
    pods_rt, rs_rt = api.resource("pods"), api.resource("replicasets")

    def live_pods() -> list[dict]:
        return [p for p in api.list(pods_rt, namespace="default")[0] if not p["metadata"].get("deletionTimestamp")]

    def hashes() -> collections.Counter:
        return collections.Counter(p["metadata"]["labels"].get("pod-template-hash") for p in live_pods())

    old_hash = next(iter(hashes()))
    kctl("apply", "-f", "-", input=json.dumps(deployment(REPLICAS, "echo v2; exec sleep 3600")).encode())
    terminating = lambda: [p for p in api.list(pods_rt, namespace="default")[0]  # noqa: E731
                           if p["metadata"].get("deletionTimestamp")]
    wait_for(lambda: len(hashes()) == 2 and terminating(), daemon=daemon, timeout=90,
             what="the rollout half done: old and new pods live, an old one terminating")
    daemon.kill(signal.SIGKILL)
    mid = hashes()
    daemon.start()
    status = kctl("rollout", "status", "deployment/web", "--timeout", "120s")
    assert status.returncode == 0, status.stderr.decode()

    def converged() -> bool:
        pods = live_pods()
        uids = {p["metadata"]["uid"] for p in pods}
        sandboxes = runtime.list_pods({LABEL_MANAGED: "true"})
        apps = [c for c in runtime.list_containers({LABEL_MANAGED: "true"})
                if c.labels.get("io.kctl.container.name") == "app"]
        return (len(pods) == REPLICAS and {s.labels.get(LABEL_POD_UID) for s in sandboxes} == uids
                and len(sandboxes) == REPLICAS and len(apps) == REPLICAS
                and all(c.state == "running" for c in apps)
                and {c.labels.get(LABEL_POD_UID) for c in apps} == uids)

    wait_for(converged, what=f"exactly {REPLICAS} pods, Podman pods and app containers, all of live Pods",
             daemon=daemon, timeout=90,
             detail=lambda: (hashes(), [(s.name, s.labels.get(LABEL_POD_UID)) for s in
                                        runtime.list_pods({LABEL_MANAGED: "true"})]))
    assert old_hash not in hashes(), f"no pod of the old version is left (mid-rollout: {dict(mid)})"
    deploy = api.get(api.resource("deployments"), "web", namespace="default")
    counts = {k: deploy["status"].get(k) for k in ("replicas", "updatedReplicas", "readyReplicas",
                                                   "availableReplicas")}
    assert counts == dict.fromkeys(counts, REPLICAS)
    replicasets = api.list(rs_rt, namespace="default")[0]
    assert sorted(rs["spec"]["replicas"] for rs in replicasets) == [0, REPLICAS]
    removed = re.findall(r"removed (?:Podman pod|from Podman:) (\S+)", daemon.log_text())
    repeated = [name for name, n in collections.Counter(removed).items() if n > 1]
    assert repeated == [], "each orphan removal is reported once"
