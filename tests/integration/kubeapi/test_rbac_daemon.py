"""RBAC on a real `kctl daemon --listen`: the daemon writes and aggregates the default roles itself; a user bound to
`view` in one namespace reads there and is refused writes and other namespaces with Kubernetes' 403 text, as the
real kubectl prints it; `kubectl auth can-i` answers for that user."""

from __future__ import annotations

import json
import os
import subprocess

from .conftest import KUBECTL, wait_for


def _view_has_rules(daemon) -> bool:
    result = daemon.kubectl("get", "clusterrole", "view", "-o", "json", timeout=30)
    return result.returncode == 0 and any("pods" in r.get("resources", [])
                                          for r in json.loads(result.stdout).get("rules") or [])


def test_view_user_in_one_namespace(kube_daemon, tmp_path):
    """Default policy + aggregation by the daemon; alice (client certificate) bound to view in rbac-a."""
    wait_for(lambda: _view_has_rules(kube_daemon), what="the aggregated ClusterRole view", daemon=kube_daemon)
    for ns in ("rbac-a", "rbac-b"):
        made = kube_daemon.kubectl("create", "namespace", ns)
        assert made.returncode == 0, made.stderr
    bound = kube_daemon.kubectl("create", "rolebinding", "alice-view", "--clusterrole=view", "--user=alice",
                                "-n", "rbac-a")
    assert bound.returncode == 0, bound.stderr
    config = kube_daemon.kctl("config", "kubeconfig", "--server", kube_daemon.url, "--user", "alice")
    assert config.returncode == 0, config.stderr
    kubeconfig = tmp_path / "alice.kubeconfig"
    kubeconfig.write_text(config.stdout)
    kubeconfig.chmod(0o600)
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}

    def alice(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                              timeout=60, env=env)

    wait_for(lambda: alice("get", "pods", "-n", "rbac-a").returncode == 0, what="alice reads rbac-a",
             daemon=kube_daemon)
    assert alice("get", "pods", "-n", "rbac-a").stderr == "No resources found in rbac-a namespace.\n"
    other = alice("get", "pods", "-n", "rbac-b")
    assert (other.returncode, other.stderr) == (1, 'Error from server (Forbidden): pods is forbidden: User "alice" '
                                                   'cannot list resource "pods" in API group "" in the namespace '
                                                   '"rbac-b"\n')
    write = alice("create", "deployment", "web", "--image=localhost/busybox:demo", "-n", "rbac-a")
    assert write.returncode == 1
    assert write.stderr == ('error: failed to create deployment: deployments.apps is forbidden: User "alice" cannot '
                            'create resource "deployments" in API group "apps" in the namespace "rbac-a"\n')
    assert alice("auth", "can-i", "list", "pods", "-n", "rbac-a").stdout == "yes\n"
    assert alice("auth", "can-i", "delete", "pods", "-n", "rbac-a").stdout == "no\n"
    assert kube_daemon.kctl("auth", "can-i", "watch", "deployments", "-n", "rbac-a", "--as", "alice").stdout == \
        "yes\n"
