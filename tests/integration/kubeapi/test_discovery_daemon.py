"""The real kubectl against a real `kctl daemon --listen` on Podman: api-resources, explain, and `get` printing what
`kctl get` prints (discovery, OpenAPI and Table of kctl.kubeapi)."""

from __future__ import annotations

import json
import re
import textwrap
import time

from .conftest import wait_for

DEPLOYMENT = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: tables
    spec:
      replicas: 1
      selector:
        matchLabels: {app: tables}
      template:
        metadata:
          labels: {app: tables}
        spec:
          terminationGracePeriodSeconds: 1
          containers:
          - name: main
            image: localhost/busybox:demo
            command: ["sleep", "3600"]
    """)
#: an age cell (`0s`, `5m3s`, `2d`) or a restart's `(5s ago)`: they tick between two commands
_AGE = re.compile(r"\b\d+[smhd](\d+[smh])?\b")


def _masked(text: str) -> list[list[str]]:
    return [_AGE.sub("<age>", line).split() for line in text.splitlines()]


def test_api_resources_and_explain(kube_daemon):
    """`kubectl api-resources` lists kctl's kinds with their short names; `kubectl explain` reads OpenAPI v3."""
    resources = kube_daemon.kubectl("api-resources", "-o", "wide")
    assert resources.returncode == 0, resources.stderr
    rows = {tuple(line.split()[:3]) for line in resources.stdout.splitlines()}
    assert ("pods", "po", "v1") in rows and ("deployments", "deploy", "apps/v1") in rows
    explained = kube_daemon.kubectl("explain", "deployment.spec.replicas")
    assert explained.returncode == 0, explained.stderr
    assert "FIELD: replicas <integer>" in explained.stdout.splitlines()


def test_get_through_https_prints_what_kctl_get_prints(kube_daemon):
    """With a Deployment running on Podman, `kubectl get pods,deploy,rs,nodes -o wide` equals `kctl get` of the
    same (ages masked)."""
    applied = kube_daemon.kubectl("apply", "-f", "-", input=DEPLOYMENT)
    assert applied.returncode == 0, applied.stderr

    def running() -> bool:
        out = kube_daemon.kubectl("get", "pods", "-l", "app=tables", "-o", "json")
        items = json.loads(out.stdout or "{}").get("items") or []
        return bool(items) and all((p.get("status") or {}).get("phase") == "Running" for p in items)

    wait_for(running, what="the tables pod Running", daemon=kube_daemon)
    try:
        for args in (("pods", "-A", "-o", "wide"), ("deployments", "-o", "wide"), ("replicasets",), ("nodes",)):
            # the pod's status may still change between the two commands (READY, a restart): compare again until
            # two reads made one after the other agree, for a few seconds
            deadline = time.monotonic() + 15
            while True:
                through_https = kube_daemon.kubectl("get", *args)
                assert through_https.returncode == 0, through_https.stderr
                local = kube_daemon.kctl("get", *args)
                assert local.returncode == 0, local.stderr
                if _masked(through_https.stdout) == _masked(local.stdout) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert _masked(through_https.stdout) == _masked(local.stdout), args
    finally:
        kube_daemon.kubectl("delete", "deployment", "tables", "--wait=false")
