"""Resource metrics from a real Podman: a CPU-burning pod shows in `kctl top pod`, and stats work over SSH.

A `kctl daemon --metric-resolution 2` runs on the session's private Podman; a busybox pod
spinning a shell loop must show more than 100m CPU in `kctl top pod` within DEADLINE
seconds (two samples, 2 s apart, after the container starts), and its node in `kctl top
node`. The runtime's container_stats and host_stats are also read over the private sshd
(the tunnel and the SSH master's `cat /proc/...`), as a remote node's agent reads them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Iterator

import pytest

from kctl.runtime.interface import LABEL_CONTAINER, LABEL_MANAGED, ContainerSpec, PodSandboxSpec
from kctl.runtime.podman import PodmanRuntime

from .conftest import NODE, Daemon, _node_ready, wait_for

pytestmark = pytest.mark.integration

IMAGE = "localhost/busybox:demo"
DEADLINE = 30.0  # the brief's ~20 s, with room for a loaded 2-core machine


@pytest.fixture
def metrics_daemon(podman_service, runtime, store_file: Path, api, tmp_path: Path) -> Iterator[Daemon]:
    """`kctl daemon --metric-resolution 2` on the private Podman; its node is Ready when the test starts."""
    proc = Daemon(store=store_file, url=podman_service.url, log=tmp_path / "daemon.log",
                  extra=("--metric-resolution", "2"))
    proc.start()
    try:
        wait_for(lambda: _node_ready(api), what="node it-node Ready", daemon=proc)
        yield proc
    finally:
        proc.stop()


def _burner() -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "burner", "labels": {"app": "burn"}},
                       "spec": {"terminationGracePeriodSeconds": 0, "containers": [
                           {"name": "loop", "image": IMAGE, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "while :; do :; done"]}]}}).encode()


def _millicores(line: str) -> int:
    return int(line.split()[1].rstrip("m"))


def test_burning_pod_shows_in_kctl_top(metrics_daemon: Daemon, kctl) -> None:
    """A busy loop's pod shows > 100m in `kctl top pod` (and by label), its node in `kctl top node`."""
    applied = kctl("apply", "-f", "-", input=_burner())
    assert applied.returncode == 0, applied.stderr
    seen: list[str] = []

    def busy() -> bool:
        result = kctl("top", "pod", "-l", "app=burn", "--no-headers")
        seen[:] = [result.stdout.decode().strip() or result.stderr.decode().strip()]
        return result.returncode == 0 and _millicores(seen[0]) > 100

    started = time.monotonic()
    wait_for(busy, what="`kctl top pod` to show the burner above 100m", timeout=DEADLINE, daemon=metrics_daemon,
             detail=lambda: seen)
    print(f"the burner showed {seen[0].split()[1]} after {time.monotonic() - started:.1f} s")
    top = kctl("top", "pod", "--containers")
    lines = top.stdout.decode().splitlines()
    assert lines[0].split() == ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert lines[1].split()[:2] == ["burner", "loop"] and lines[1].split()[3].endswith("Mi")
    nodes = kctl("top", "node", "--no-headers")
    assert nodes.returncode == 0, nodes.stderr
    name, cpu, cpu_percent, memory, memory_percent = nodes.stdout.decode().split()
    assert name == NODE and cpu.endswith("m") and cpu_percent.endswith("%") and memory.endswith("Mi")
    assert "Traceback" not in metrics_daemon.log_text()


def test_stats_over_ssh(runtime: PodmanRuntime, podman_service, sshd) -> None:
    """container_stats and host_stats answer through the SSH tunnel as on the local socket."""
    sandbox = runtime.create_pod(PodSandboxSpec(name="stats-ssh", labels={LABEL_MANAGED: "true"}))
    cid = runtime.create_container(sandbox.id, ContainerSpec(
        name="stats-ssh-c", image=IMAGE, command=None, entrypoint=["sleep", "600"],
        labels={LABEL_MANAGED: "true", LABEL_CONTAINER: "c"}))
    runtime.start_container(cid)
    remote = PodmanRuntime(sshd.podman_url(podman_service.socket), identity=sshd.identity,
                           known_hosts=sshd.known_hosts)
    try:
        (sample,) = [s for s in remote.container_stats({LABEL_MANAGED: "true"}) if s.id == cid]
        assert sample.memory_bytes > 0 and sample.cpu_nanos >= 0 and abs(sample.timestamp - time.time()) < 60
        assert sample.labels[LABEL_CONTAINER] == "c"
        first = remote.host_stats()
        time.sleep(0.5)
        second = remote.host_stats()
        assert second.cpu_nanos >= first.cpu_nanos > 0 and second.memory_used_bytes > 0
    finally:
        remote.close()
