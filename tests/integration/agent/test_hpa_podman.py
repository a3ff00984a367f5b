"""Autoscaling on a real Podman: a CPU-burning pod scales its Deployment up, and down once the load stops.

A `kctl daemon` runs on the session's private Podman with shortened windows
(`--metric-resolution 2 --horizontal-pod-autoscaler-sync-period 2
--horizontal-pod-autoscaler-downscale-stabilization 10`). A Deployment of 1 busybox pod with
requests.cpu 100m spins a shell loop while /tmp/burn exists in its container (the image has no /tmp: made);
`kctl autoscale deployment web --min 1 --max 3 --cpu-percent 50` must scale it above 1 within
UP seconds. Then `kctl exec` removes /tmp/burn in every pod (a new pod starts burning too), and
the Deployment must be back at 1 replica within DOWN seconds. The `runtime` fixture removes
every kctl-labelled pod and container afterwards.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Iterator

import pytest

from .conftest import Daemon, _node_ready, wait_for

pytestmark = pytest.mark.integration

IMAGE = "localhost/busybox:demo"
UP = 40.0    # the brief's ~30 s, with room for a loaded 2-core machine
DOWN = 45.0  # 10 s of stabilization, a sync, the ReplicaSet's deletions


@pytest.fixture
def hpa_daemon(podman_service, runtime, store_file: Path, api, tmp_path: Path) -> Iterator[Daemon]:
    """`kctl daemon` with 2 s metrics and HPA syncs and a 10 s scale-down window; its node is Ready."""
    proc = Daemon(store=store_file, url=podman_service.url, log=tmp_path / "daemon.log",
                  extra=("--metric-resolution", "2", "--horizontal-pod-autoscaler-sync-period", "2",
                         "--horizontal-pod-autoscaler-downscale-stabilization", "10"))
    proc.start()
    try:
        wait_for(lambda: _node_ready(api), what="node it-node Ready", daemon=proc)
        yield proc
    finally:
        proc.stop()


def _deployment() -> bytes:
    loop = "mkdir -p /tmp && touch /tmp/burn; while [ -e /tmp/burn ]; do :; done; exec sleep 3600"
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                                "template": {"metadata": {"labels": {"app": "web"}},
                                             "spec": {"terminationGracePeriodSeconds": 0, "containers": [
                                                 {"name": "burn", "image": IMAGE, "imagePullPolicy": "Never",
                                                  "command": ["sh", "-c", loop],
                                                  "resources": {"requests": {"cpu": "100m"}}}]}}}}).encode()


def test_hpa_scales_up_under_load_and_back_down(hpa_daemon: Daemon, kctl, api) -> None:
    """Load above 50% of requests scales the Deployment above 1; without load it returns to 1."""
    applied = kctl("apply", "-f", "-", input=_deployment())
    assert applied.returncode == 0, applied.stderr
    made = kctl("autoscale", "deployment", "web", "--min", "1", "--max", "3", "--cpu-percent", "50")
    assert made.returncode == 0, made.stderr
    deployments = api.resource("deployments")
    seen: list[str] = []

    def replicas() -> int:
        row = kctl("get", "hpa", "web", "--no-headers").stdout.decode().strip()
        seen[:] = [row]
        return int(api.get(deployments, "web", namespace="default")["spec"]["replicas"])

    started = time.monotonic()
    wait_for(lambda: replicas() > 1, what="the HPA to scale web above 1", timeout=UP, daemon=hpa_daemon,
             detail=lambda: seen)
    print(f"scaled up after {time.monotonic() - started:.1f} s: {seen[0]}")

    def stop_load() -> bool:
        pods, _ = api.list(api.resource("pods"), namespace="default")
        for pod in pods:
            if (pod["metadata"].get("labels") or {}).get("app") == "web" \
                    and (pod.get("status") or {}).get("phase") == "Running":
                kctl("exec", pod["metadata"]["name"], "--", "rm", "-f", "/tmp/burn", timeout=30)
        return replicas() == 1

    started = time.monotonic()
    wait_for(stop_load, what="the HPA to scale web back to 1", timeout=DOWN, daemon=hpa_daemon, detail=lambda: seen)
    print(f"scaled down after {time.monotonic() - started:.1f} s: {seen[0]}")
    described = kctl("describe", "hpa", "web").stdout.decode()
    assert "SuccessfulRescale" in described and "New size: 1; reason: All metrics below target" in described
    assert "Traceback" not in hpa_daemon.log_text()
