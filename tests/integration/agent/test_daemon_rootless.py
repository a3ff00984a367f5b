"""A rootless Podman host, added over SSH as its own unprivileged user, runs kctl's pods end to end.

The host is a throw-away user of this machine running `podman system service` on
/run/user/UID/podman/podman.sock behind a private sshd (kctl.testing.rootless, made once
for the module and undone after it, also when a test fails). kctl adds it as it would a
real machine: `kctl node add --ssh USER@127.0.0.1:PORT --socket ...` and `kctl node trust`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from kctl.testing.rootless import RootlessHost

from .conftest import wait_for
from .test_daemon_pods import condition, container, container_status, fetch, free_port, get_pod

pytestmark = pytest.mark.integration
ROOTLESS = "rootless-node"
SELECTOR = {"podman": "rootless"}


@pytest.fixture(scope="module")
def rootless_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RootlessHost]:
    """A user of its own with rootless Podman (demo image built) and an sshd letting it in."""
    host = RootlessHost(tmp_path_factory.mktemp("rootless"), ssh_port=free_port())
    host.up()
    try:
        yield host
    finally:
        host.down()


@pytest.fixture
def rootless_node(rootless_host: RootlessHost, daemon, api, kctl) -> Iterator[RootlessHost]:
    """The host added with `kctl node add` + `kctl node trust --yes` to a running daemon, Ready."""
    added = kctl("node", "add", ROOTLESS, "--ssh", rootless_host.ssh, "--identity", rootless_host.identity,
                 "--socket", rootless_host.socket, "-l", "podman=rootless")
    assert added.returncode == 0, added.stderr
    assert b"is not known" in added.stderr
    trusted = kctl("node", "trust", ROOTLESS, "--yes")
    assert trusted.returncode == 0, trusted.stderr
    wait_for(lambda: condition(api.get(api.resource("nodes"), ROOTLESS), "Ready") == "True",
             what="the rootless node Ready", daemon=daemon)
    try:
        yield rootless_host
    finally:
        rootless_host.podman("pod", "rm", "--all", "--force")  # what a failed test left there


def _user_podman(host: RootlessHost, *args: str) -> list[dict]:
    """`podman ARGS --format json` as the user: its own view of its pods or containers."""
    result = host.podman(*args, "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout or "[]")


def test_pod_with_ports_env_configmap_limits_and_probe_runs_rootless(api, daemon, kctl, rootless_node) -> None:
    """Scheduled onto the rootless node: Ready via its probe, served on its host port, logs and exec as
    root of the user namespace, Podman's limits warning shown as an event; deleted, nothing is left."""
    port = free_port()
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "page", "namespace": "default"},
                "data": {"index.html": "rootless page\n"}})
    api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rl", "namespace": "default"}, "spec": {
        "nodeSelector": SELECTOR, "terminationGracePeriodSeconds": 1, "containers": [container(
            "web", 'echo "$GREETING"; id -u; exec httpd -f -p 8080 -h /www',
            env=[{"name": "GREETING", "value": "hello from a user namespace"}],
            ports=[{"containerPort": 8080, "hostPort": port}],
            resources={"limits": {"cpu": "500m", "memory": "64Mi"}},
            readinessProbe={"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
            volumeMounts=[{"name": "page", "mountPath": "/www"}])],
        "volumes": [{"name": "page", "configMap": {"name": "page"}}]}})
    ready = wait_for(lambda: condition(get_pod(api, "rl"), "Ready") == "True" and get_pod(api, "rl"),
                     what="pod rl Ready on the rootless node", daemon=daemon)
    assert ready["spec"]["nodeName"] == ROOTLESS and ready["status"]["phase"] == "Running"
    assert container_status(ready, "web")["ready"]
    assert fetch(port) == "rootless page\n"  # rootlessport, as the user, listens on this machine
    assert kctl("logs", "rl").stdout == b"hello from a user namespace\n0\n"
    uid = kctl("exec", "rl", "--", "id", "-u")
    assert (uid.returncode, uid.stdout) == (0, b"0\n")
    uid_map = kctl("exec", "rl", "--", "cat", "/proc/self/uid_map").stdout.split()
    assert uid_map[:3] == [b"0", str(rootless_node.uid).encode(), b"1"]  # root inside is the user outside
    warned = [e["message"] for e in _events(api, "rl") if e["reason"] == "RuntimeWarning"]
    assert _cgroup_v2() or warned == ["Podman: Resource limits are not supported and ignored on cgroups V1 rootless "
                                      "systems"]  # the limits are not enforced, and kctl says so
    node_row = next(line for line in kctl("get", "nodes", "-o", "wide").stdout.decode().splitlines()
                    if line.startswith(ROOTLESS))
    assert " Ready " in node_row and "127.0.0.1" in node_row and "podman://" in node_row, node_row
    assert [c["Names"] for c in _user_podman(rootless_node, "ps", "--all")]  # the user's Podman runs it
    api.delete(api.resource("pods"), "rl", namespace="default")
    wait_for(lambda: get_pod(api, "rl") is None, what="pod rl deleted", daemon=daemon)
    assert _user_podman(rootless_node, "ps", "--all") == [] and _user_podman(rootless_node, "pod", "ps") == []


def test_privileged_host_port_is_refused_with_podmans_reason(api, daemon, rootless_node) -> None:
    """A hostPort below net.ipv4.ip_unprivileged_port_start cannot be bound rootless: the pod waits, and
    its event says why and what to change."""
    start = int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text())
    if start == 0:
        pytest.skip("every port is unprivileged on this machine")
    api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "low", "namespace": "default"}, "spec": {
        "nodeSelector": SELECTOR, "terminationGracePeriodSeconds": 1, "containers": [container(
            "web", "exec httpd -f -p 8080", ports=[{"containerPort": 8080, "hostPort": start - 1}])]}})
    message = wait_for(lambda: next((e["message"] for e in _events(api, "low")
                                     if e["reason"] == "FailedCreatePodSandBox"), None),
                       what="FailedCreatePodSandBox for the privileged port", daemon=daemon)
    assert "ip_unprivileged_port_start" in message and f"privileged port {start - 1}" in message
    assert get_pod(api, "low")["status"]["phase"] == "Pending"
    api.delete(api.resource("pods"), "low", namespace="default")
    wait_for(lambda: get_pod(api, "low") is None, what="pod low deleted", daemon=daemon)
    assert _user_podman(rootless_node, "pod", "ps") == []


def _events(api, name: str) -> list[dict]:
    items, _ = api.list(api.resource("events"), namespace="default")
    return [e for e in items if (e.get("involvedObject") or {}).get("name") == name]


def _cgroup_v2() -> bool:
    return Path("/sys/fs/cgroup/cgroup.controllers").exists()
