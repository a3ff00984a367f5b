"""kctl on several hosts reached over SSH, end to end, on the test bed (tests/e2e/conftest.py).

Hosts h1-h3 are network namespaces with their own sshd and Podman; the daemon reaches
them only through `kctl node add`'s ssh:// URLs with host keys checked. Verified: spread
and DaemonSets over the hosts (and a host added later), logs and exec on a remote pod, a
host cut off (NotReady, tainted, its pods replaced elsewhere, no duplicates once it is
back), a changed host key refused until trusted, an image copied from the control host,
and a host in node mode. Each test works in a namespace of its own, deleted after it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import uuid

import pytest
from podman import PodmanClient

from integration.agent.test_node_mode import KCTL, NodeModeDaemon
from integration.conftest import BUILD_DEMO_IMAGE
from kctl.runtime.interface import LABEL_POD_NAME

from .conftest import GRACE, HOSTS, TOLERATION, Cluster, wait_for

pytestmark = pytest.mark.e2e

IMAGE = "localhost/busybox:demo"
SLEEP = "trap 'exit 0' TERM; sleep 3600 & wait"  # stops at once on SIGTERM
UNREACHABLE = "node.kubernetes.io/unreachable"


def container(*, image: str = IMAGE, script: str = SLEEP, pull: str = "IfNotPresent") -> dict:
    return {"name": "app", "image": image, "imagePullPolicy": pull, "command": ["sh", "-c", script]}


def deployment(name: str, namespace: str, replicas: int, *, spread: bool = False) -> dict:
    spec: dict = {"terminationGracePeriodSeconds": 1, "containers": [container()]}
    if spread:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": name}}}]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def daemonset(name: str, namespace: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [container()]}}}}


def pod(name: str, namespace: str, node: str, **container_fields: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": [container(**container_fields)]}}


def nodes_of(pods: list[dict]) -> list[str]:
    return sorted(p["spec"]["nodeName"] for p in pods)


def test_deployment_spreads_one_pod_per_host(cluster: Cluster, namespace: str) -> None:
    """Topology spread (maxSkew 1 per hostname): one Running pod per host, its container in that host's Podman."""
    cluster.apply(deployment("spread", namespace, 3, spread=True))
    cluster.wait(lambda: len(cluster.running(namespace)) == 3, what="3 pods Running",
                 detail=lambda: nodes_of(cluster.pods(namespace)))
    pods = cluster.running(namespace)
    assert nodes_of(pods) == list(HOSTS)
    for p in pods:
        on_host = cluster.containers(cluster.bed.host(p["spec"]["nodeName"]), namespace)
        assert [(c.labels[LABEL_POD_NAME], c.state) for c in on_host] == [(p["metadata"]["name"], "running")]


def test_daemonset_on_every_host_and_on_a_host_added_later(cluster: Cluster, namespace: str) -> None:
    """A DaemonSet runs one pod per host; a host added with `kctl node add` gets one too."""
    cluster.apply(daemonset("agent", namespace))
    cluster.wait(lambda: nodes_of(cluster.running(namespace)) == list(HOSTS), what="a DaemonSet pod on h1-h3",
                 detail=lambda: nodes_of(cluster.pods(namespace)))
    host = cluster.bed.add()
    try:
        cluster.add_node(host.name)
        cluster.wait(lambda: nodes_of(cluster.running(namespace)) == sorted([*HOSTS, host.name]),
                     what=f"a DaemonSet pod on the new host {host.name}",
                     detail=lambda: nodes_of(cluster.pods(namespace)))
        assert [c.state for c in cluster.containers(host, namespace)] == ["running"]
        deleted = cluster.kctl("delete", "daemonset", "agent", "-n", namespace, "--wait", "--timeout", "120")
        assert deleted.returncode == 0, deleted.stderr.decode()
        cluster.wait(lambda: not cluster.pods(namespace), what="the DaemonSet's pods gone")
        removed = cluster.kctl("node", "remove", host.name, "--timeout", "2m", timeout=150)
        assert removed.returncode == 0, removed.stderr.decode()
    finally:
        if cluster.ready(host.name):  # the test failed before removing it
            cluster.kctl("node", "remove", host.name, "--force")


def test_logs_and_exec_on_a_remote_host(cluster: Cluster, namespace: str) -> None:
    """`kctl logs` and `kctl exec` (stdout, stdin, exit status) reach a pod on h2 over SSH."""
    cluster.apply(pod("talk", namespace, "h2", script=f"echo hello from h2; {SLEEP}"))
    cluster.wait(lambda: cluster.running(namespace), what="pod talk Running on h2")
    logs = cluster.kctl("logs", "talk", "-n", namespace)
    assert (logs.returncode, logs.stdout) == (0, b"hello from h2\n"), logs.stderr.decode()
    hi = cluster.kctl("exec", "talk", "-n", namespace, "--", "echo", "hi")
    assert (hi.returncode, hi.stdout) == (0, b"hi\n"), hi.stderr.decode()
    echoed = cluster.kctl("exec", "talk", "-n", namespace, "-i", "--", "sh", "-c", "cat; exit 3",
                          input=b"through ssh\n")
    assert (echoed.returncode, echoed.stdout) == (3, b"through ssh\n"), echoed.stderr.decode()


def test_host_cut_off_pods_replaced_and_no_duplicates_after(cluster: Cluster, namespace: str) -> None:
    """Cut: Unknown + unreachable NoExecute taint, pods replaced elsewhere; healed: Ready, evicted containers gone."""
    cluster.apply(deployment("failover", namespace, 3))
    cluster.wait(lambda: len(cluster.running(namespace)) == 3, what="3 pods Running")
    victim = cluster.running(namespace)[0]["spec"]["nodeName"]
    evicted = {p["metadata"]["name"] for p in cluster.running(namespace) if p["spec"]["nodeName"] == victim}
    host = cluster.bed.host(victim)
    cluster.bed.cut(victim)
    try:
        cluster.wait(lambda: cluster.ready(victim) == "Unknown", what=f"node {victim} Ready=Unknown",
                     timeout=GRACE + 20)
        cluster.wait(lambda: (UNREACHABLE, "NoExecute") in _taints(cluster, victim),
                     what=f"node {victim} tainted {UNREACHABLE}:NoExecute", timeout=20,
                     detail=lambda: _taints(cluster, victim))

        def replaced() -> bool:
            running = cluster.running(namespace)
            return len(running) == 3 and victim not in nodes_of(running)

        cluster.wait(replaced, what=f"3 pods Running away from {victim}", timeout=GRACE + TOLERATION + 30,
                     detail=lambda: [(p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("phase"))
                                     for p in cluster.pods(namespace)])
    finally:
        cluster.bed.heal(victim)
    cluster.wait(lambda: cluster.ready(victim) == "True", what=f"node {victim} Ready again after the heal")
    cluster.wait(lambda: not {c.labels[LABEL_POD_NAME] for c in cluster.containers(host, namespace)} & evicted,
                 what=f"the evicted pods' containers gone from {victim}", timeout=30)
    cluster.wait(lambda: not {p["metadata"]["name"] for p in cluster.pods(namespace)} & evicted,
                 what="the evicted pod objects gone")
    everywhere = [c for h in cluster.bed.hosts for c in cluster.containers(h, namespace)]
    assert sorted(c.labels[LABEL_POD_NAME] for c in everywhere if c.state == "running") == sorted(
        p["metadata"]["name"] for p in cluster.running(namespace))
    assert len(everywhere) == 3


def test_changed_host_key_refused_until_trusted(cluster: Cluster) -> None:
    """A host with a new key: the agent refuses it, `node trust` shows old and new, trusting makes it Ready."""
    victim = "h3"
    old = cluster.bed.host_key(victim)
    seen = len(cluster.daemon.log_text())
    new = cluster.bed.rekey(victim)
    cluster.wait(lambda: "Host key verification failed" in cluster.daemon.log_text()[seen:],
                 what=f"the daemon refusing {victim}'s new key")
    cluster.wait(lambda: cluster.ready(victim) not in ("True", ""), what=f"node {victim} not Ready")
    shown = cluster.kctl("node", "trust", victim)  # stdin is not a terminal: nothing recorded without --yes
    out = shown.stdout.decode()
    assert shown.returncode != 0 and "has CHANGED" in out, out + shown.stderr.decode()
    assert new.fingerprint in out and old.fingerprint in out
    assert cluster.ready(victim) != "True"
    trusted = cluster.kctl("node", "trust", victim, "--yes")
    assert trusted.returncode == 0, trusted.stderr.decode()
    cluster.wait(lambda: cluster.ready(victim) == "True", what=f"node {victim} Ready with its new key trusted")


def test_image_only_on_the_control_host_reaches_a_remote_pod(cluster: Cluster, namespace: str,
                                                             podman_service) -> None:
    """A pod on h1 whose image only the control host's Podman holds runs; the copy is an ImageCopied event."""
    image = f"localhost/kctl-e2e-copy:{uuid.uuid4().hex[:10]}"
    built = subprocess.run([str(BUILD_DEMO_IMAGE), "--url", podman_service.url], capture_output=True, timeout=120,
                           env={**os.environ, "IMAGE": image, "CONTAINERS_CONF": podman_service.conf})
    assert built.returncode == 0, built.stderr.decode()
    h1 = cluster.bed.host("h1")
    try:
        assert not _has_image(h1.url, image)
        cluster.apply(pod("copied", namespace, "h1", image=image, pull="IfNotPresent"))
        cluster.wait(lambda: cluster.running(namespace), what="pod copied Running on h1")
        copied = cluster.events(namespace, "ImageCopied")
        assert [e["message"].startswith(f'Copied image "{image}" from control host in ') for e in copied] == [True]
        assert _has_image(h1.url, image)
        deleted = cluster.kctl("delete", "pod", "copied", "-n", namespace, "--wait", "--timeout", "60")
        assert deleted.returncode == 0, deleted.stderr.decode()
    finally:
        for url in (h1.url, podman_service.url):
            _remove_image(url, image)


def test_node_mode_host_runs_its_pods(cluster: Cluster, namespace: str, tmp_path) -> None:
    """`kctl daemon --node hN --server ssh://...` inside a bed host: the control plane over SSH, Podman local."""
    address, port = cluster.bed.serve_control()
    host = cluster.bed.add()
    env = {k: v for k, v in os.environ.items() if k not in ("KCTL_STORE", "KCTL_SERVER")}
    env.update({"KCTL_SSH_IDENTITY": cluster.bed.identity, "KCTL_KNOWN_HOSTS": cluster.bed.known_hosts,
                "KCTL_REMOTE_COMMAND": f"env PYTHONDONTWRITEBYTECODE=1 {KCTL}"})
    node_daemon = NodeModeDaemon(store=cluster.store, url=host.url, log=tmp_path / "node.log", env=env,
                                 server=f"ssh://root@{address}:{port}{cluster.store}", node=host.name,
                                 prefix=tuple(host.nsenter()))
    node_daemon.start()
    try:
        wait_for(lambda: cluster.ready(host.name) == "True", what=f"node {host.name} Ready (heartbeats over ssh)",
                 daemon=node_daemon, timeout=90)
        node = cluster.api.get(cluster.api.resource("nodes"), host.name)
        assert node["metadata"]["annotations"]["kctl.io/agent"] == "node"
        cluster.apply(pod("local", namespace, host.name))
        wait_for(lambda: cluster.running(namespace), what=f"pod local Running on {host.name}", daemon=node_daemon)
        assert [(c.labels[LABEL_POD_NAME], c.state) for c in cluster.containers(host, namespace)] == [
            ("local", "running")]
        assert f"node {host.name}: agent started" in node_daemon.log_text()
        assert f"node {host.name}: agent started" not in cluster.daemon.log_text()
        deleted = cluster.kctl("delete", "pod", "local", "-n", namespace, "--wait", "--timeout", "60")
        assert deleted.returncode == 0, deleted.stderr.decode()
        assert cluster.containers(host, namespace) == []
        assert node_daemon.kill(signal.SIGTERM) == 0
    finally:
        node_daemon.stop()
        cluster.kctl("delete", "node", host.name, "--ignore-not-found")


def _taints(cluster: Cluster, node: str) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"])
            for t in cluster.api.get(cluster.api.resource("nodes"), node)["spec"].get("taints") or ()}


def _has_image(url: str, image: str) -> bool:
    with PodmanClient(base_url=url, timeout=60) as client:
        return client.images.exists(image)


def _remove_image(url: str, image: str) -> None:
    """Untag image (the demo image may share its layers and id: never forced)."""
    with contextlib.suppress(Exception), PodmanClient(base_url=url, timeout=60) as client:
        if client.images.exists(image):
            client.images.remove(image)
