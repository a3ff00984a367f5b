"""Controllers and scheduler in `kctl daemon`, on real Podman: a Deployment scaled, rolled, undone.

The daemon fixture (conftest.py) runs the whole daemon: node agent, controllers and
scheduler; the Deployment's pods are scheduled onto the test node and run on the private
Podman service.
"""

from __future__ import annotations

import json

import pytest

from kctl.runtime.interface import LABEL_MANAGED

from .conftest import wait_for
from .test_daemon_pods import IMAGE

pytestmark = pytest.mark.integration


def deployment(replicas: int, script: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "app", "image": IMAGE, "imagePullPolicy": "Never",
                                         "command": ["sh", "-c", script]}]}}}}


def running_apps(runtime) -> list[str]:
    """Pod names of the running app containers on Podman."""
    return sorted(c.labels.get("io.kctl.pod.name", "") for c in runtime.list_containers({LABEL_MANAGED: "true"})
                  if c.state == "running" and c.labels.get("io.kctl.container.name") == "app")


def test_deployment_scaled_rolled_and_undone(api, daemon, runtime, kctl) -> None:
    """Pods appear on Podman, follow scale, a rolling update and an undo; rollout status exits 0."""
    kctl("apply", "-f", "-", input=json.dumps(deployment(2, "exec sleep 3600")).encode())
    assert kctl("rollout", "status", "deployment/web", "--timeout", "60s").returncode == 0
    wait_for(lambda: len(running_apps(runtime)) == 2, what="2 containers running", daemon=daemon)
    assert kctl("scale", "deployment", "web", "--replicas", "3").returncode == 0
    wait_for(lambda: len(running_apps(runtime)) == 3, what="3 containers running", daemon=daemon)
    first = set(running_apps(runtime))
    kctl("apply", "-f", "-", input=json.dumps(deployment(3, "echo v2; exec sleep 3600")).encode())
    assert kctl("rollout", "status", "deployment/web", "--timeout", "90s").returncode == 0
    wait_for(lambda: len(running_apps(runtime)) == 3 and not first & set(running_apps(runtime)),
             what="3 new containers, the old ones gone", daemon=daemon)
    history = kctl("rollout", "history", "deployment/web").stdout.decode()
    assert "1 " in history and "2 " in history
    assert kctl("rollout", "undo", "deployment/web").returncode == 0
    assert kctl("rollout", "status", "deployment/web", "--timeout", "90s").returncode == 0
    deploy = api.get(api.resource("deployments"), "web", namespace="default")
    assert deploy["spec"]["template"]["spec"]["containers"][0]["command"] == ["sh", "-c", "exec sleep 3600"]
    assert deploy["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    wait_for(lambda: len(running_apps(runtime)) == 3, what="3 containers after the undo", daemon=daemon)


def test_crash_looping_rollout_halts_with_availability_kept(api, daemon, runtime, kctl) -> None:
    """A new version whose pods crash never replaces the ready old pods; rollout status reports the deadline."""
    kctl("apply", "-f", "-", input=json.dumps(deployment(2, "exec sleep 3600")).encode())
    assert kctl("rollout", "status", "deployment/web", "--timeout", "60s").returncode == 0
    bad = deployment(2, "exit 1")
    bad["spec"]["progressDeadlineSeconds"] = 5
    kctl("apply", "-f", "-", input=json.dumps(bad).encode())
    status = kctl("rollout", "status", "deployment/web", "--timeout", "60s")
    assert status.returncode == 1 and b"exceeded its progress deadline" in status.stderr
    deploy = api.get(api.resource("deployments"), "web", namespace="default")
    assert deploy["status"]["availableReplicas"] == 2
    assert len(running_apps(runtime)) >= 2
