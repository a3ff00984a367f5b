"""A Node reached over SSH: the same pod life as on a local socket, with nothing read from local disk.

The "remote" host is this machine's private Podman reached through a private sshd
(tests/integration/conftest.py): the agent talks to it only through the ssh:// URL, so
volumes, probes (run inside the container for remote hosts), logs and exec go the way
they would to another machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Daemon, wait_for
from .test_daemon_pods import IMAGE, condition, container, get_pod

pytestmark = pytest.mark.integration
REMOTE = "remote-node"


def test_pod_on_a_node_reached_over_ssh(api, runtime, podman_service, sshd, store_file: Path, tmp_path: Path,
                                        kctl) -> None:
    """configMap and secret volumes, an httpGet readiness probe, logs and exec through ssh://."""
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": REMOTE, "annotations": {
        "kctl.io/podman-url": sshd.podman_url(podman_service.socket),
        "kctl.io/ssh-identity": sshd.identity, "kctl.io/ssh-known-hosts": sshd.known_hosts}}})
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "page", "namespace": "default"},
                "data": {"index.html": "far away\n"}})
    api.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "default"},
                "stringData": {"token": "s3cret-value"}})
    api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "far", "namespace": "default"},
                "spec": {"nodeName": REMOTE, "terminationGracePeriodSeconds": 1, "containers": [container(
                    "web", "cat /run/token/token; echo; exec httpd -f -p 8080 -h /www",
                    readinessProbe={"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
                    volumeMounts=[{"name": "page", "mountPath": "/www"},
                                  {"name": "token", "mountPath": "/run/token"}])],
                    "volumes": [{"name": "page", "configMap": {"name": "page"}},
                                {"name": "token", "secret": {"secretName": "token"}}]}})
    daemon = Daemon(store=store_file, url=podman_service.url, log=tmp_path / "daemon.log")
    daemon.start()
    try:
        ready = wait_for(lambda: condition(get_pod(api, "far"), "Ready") == "True" and get_pod(api, "far"),
                         what="pod far Ready over ssh", daemon=daemon)
        assert ready["status"]["phase"] == "Running"
        statuses = ready["status"]["containerStatuses"]
        assert statuses[0]["image"] == IMAGE and statuses[0]["ready"]
        assert kctl("logs", "far").stdout == b"s3cret-value\n"
        page = kctl("exec", "far", "--", "wget", "-q", "-O", "-", "http://127.0.0.1:8080/")
        assert (page.returncode, page.stdout) == (0, b"far away\n")
        api.patch(api.resource("configmaps"), "page", {"data": {"index.html": "moved\n"}}, namespace="default")
        wait_for(lambda: kctl("exec", "far", "--", "cat", "/www/index.html").stdout == b"moved\n",
                 what="the configMap update reaching the remote volume", daemon=daemon)
        node = api.get(api.resource("nodes"), REMOTE)
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
        api.delete(api.resource("pods"), "far", namespace="default")
        wait_for(lambda: get_pod(api, "far") is None, what="the remote pod deleted", daemon=daemon)
        assert runtime.list_pods({"io.kctl.pod.name": "far"}) == []
        assert "s3cret-value" not in daemon.log_text()
    finally:
        daemon.stop()
