"""RBAC through the HTTPS API with the real kubectl: a user bound to `view` in one namespace reads there, is refused
writes and other namespaces with Kubernetes' 403 text; `kubectl auth can-i` (also --list), `auth whoami` and
`--as` impersonation answer as against a real cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from kctl.apiserver import bootstrappolicy
from kctl.controllers.clusterroleaggregation import aggregated_rules

CR = "clusterroles.rbac.authorization.k8s.io"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def _aggregate(api) -> None:
    """What the clusterrole-aggregation controller does (no controllers run beside the in-process server)."""
    rt = api.resource(CR)
    for name in ("view", "edit", "admin"):
        roles, _ = api.list(rt)
        role = api.get(rt, name)
        role["rules"] = aggregated_rules(role, roles)
        api.update(role)


@pytest.fixture
def alice(kubeapi, tmp_path):
    """The default policy; namespaces a and b with a pod each; alice bound to view in a; her kubeconfig."""
    api = kubeapi.api
    bootstrappolicy.ensure(api)
    _aggregate(api)
    for ns in ("a", "b"):
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": ns},
                    "spec": {"containers": [{"name": "c", "image": "localhost/busybox:latest"}]}})
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "alice-view", "namespace": "a"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
    path = tmp_path / "alice.kubeconfig"
    path.write_text(kubeapi.pki.kubeconfig(server_url=kubeapi.url, user="alice", groups=["team"]))
    path.chmod(0o600)
    return path


def _run(kubeapi, kubeconfig, *args):
    """The real kubectl with another user's kubeconfig."""
    env = {**os.environ, "HOME": str(kubeconfig.parent), "KUBECONFIG": str(kubeconfig)}
    return subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                          timeout=60, env=env)


def test_view_user_reads_its_namespace_only(kubeapi, alice):
    """get in a works; create there and get in b are refused with kube-apiserver's 403 text."""
    got = _run(kubeapi, alice, "get", "pods", "-n", "a", "-o", "name")
    assert got.returncode == 0 and got.stdout == "pod/web\n", got.stderr
    denied = _run(kubeapi, alice, "get", "pods", "-n", "b")
    assert denied.returncode == 1
    assert denied.stderr == ('Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource '
                             '"pods" in API group "" in the namespace "b"\n')
    named = _run(kubeapi, alice, "get", "pod", "web", "-n", "b")
    assert named.stderr == ('Error from server (Forbidden): pods "web" is forbidden: User "alice" cannot get '
                            'resource "pods" in API group "" in the namespace "b"\n')
    created = _run(kubeapi, alice, "create", "configmap", "x", "-n", "a", "--from-literal=k=v")
    assert created.returncode == 1
    assert created.stderr == ('error: failed to create configmap: configmaps is forbidden: User "alice" cannot '
                              'create resource "configmaps" in API group "" in the namespace "a"\n')
    nodes = _run(kubeapi, alice, "get", "nodes")
    assert nodes.stderr == ('Error from server (Forbidden): nodes is forbidden: User "alice" cannot list resource '
                            '"nodes" in API group "" at the cluster scope\n')


@pytest.mark.parametrize("args, answer, code", [
    (["list", "pods", "-n", "a"], "yes", 0),
    (["get", "pods/web", "-n", "a"], "yes", 0),
    (["get", "pods", "--subresource", "log", "-n", "a"], "yes", 0),
    (["create", "pods", "-n", "a"], "no", 1),
    (["get", "secrets", "-n", "a"], "no", 1),
    (["list", "pods", "-n", "b"], "no", 1),
    (["create", "selfsubjectaccessreviews.authorization.k8s.io"], "yes", 0),
    (["get", "/version"], "yes", 0),
], ids=["list-a", "get-named", "logs", "create", "secrets", "other-namespace", "reviews", "path"])
def test_kubectl_auth_can_i(kubeapi, alice, args, answer, code):
    """SelfSubjectAccessReview answers kubectl auth can-i for the certificate's user."""
    result = _run(kubeapi, alice, "auth", "can-i", *args)
    assert (result.stdout.strip(), result.returncode) == (answer, code), result.stderr


def test_kubectl_auth_can_i_list_and_whoami(kubeapi, alice):
    """SelfSubjectRulesReview fills kubectl's --list table; SelfSubjectReview answers whoami."""
    listed = _run(kubeapi, alice, "auth", "can-i", "--list", "-n", "a")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert ["pods", "[]", "[]", "[get", "list", "watch]"] in rows
    assert ["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"] in rows
    assert not any(row and row[0] == "secrets" for row in rows)
    who = _run(kubeapi, alice, "auth", "whoami")
    assert who.returncode == 0, who.stderr
    assert who.stdout.split("\n")[1].split() == ["Username", "alice"]
    assert "[team system:authenticated]" in who.stdout


def test_admin_impersonates_with_as(kubeapi, alice):
    """The admin (system:masters) may impersonate: --as alice is refused what alice is refused."""
    result = kubeapi.kubectl("get", "pods", "-n", "b", "--as", "alice")
    assert result.returncode == 1
    assert 'User "alice" cannot list resource "pods" in API group "" in the namespace "b"' in result.stderr
    assert kubeapi.kubectl("auth", "can-i", "list", "pods", "-n", "a", "--as", "alice").stdout == "yes\n"
    refused = _run(kubeapi, alice, "get", "pods", "-n", "a", "--as", "bob")
    # discovery is refused first: kubectl prints "(Forbidden): unknown", as against Kubernetes
    assert refused.returncode == 1
    assert "Error from server (Forbidden)" in refused.stderr
    reply = kubeapi.request("GET", "/api/v1/namespaces/a/pods", user="alice", groups=(),
                            headers={"Impersonate-User": "bob"})
    assert reply.status == 403
    assert reply.json()["message"] == ('users "bob" is forbidden: User "alice" cannot impersonate resource "users" in '
                                       'API group "" at the cluster scope')


def test_sar_for_another_user(kubeapi, alice):
    """SubjectAccessReview over raw HTTPS: the admin asks about alice, 201 with status.allowed."""
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "alice", "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "a"}}}
    reply = kubeapi.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body)
    assert reply.status == 201
    assert reply.json()["status"]["allowed"] is True
    refused = kubeapi.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body,
                              user="alice", groups=())
    assert refused.status == 403
    assert refused.json()["message"] == (
        'subjectaccessreviews.authorization.k8s.io is forbidden: User "alice" cannot create resource '
        '"subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope')


def _kctl(kubeconfig, *args):
    """kctl's own CLI as an HTTPS client of the server (--kubeconfig)."""
    env = {**os.environ, "HOME": str(kubeconfig.parent)}
    env.pop("KCTL_STORE", None)
    return subprocess.run([sys.executable, "-m", "kctl", "--kubeconfig", str(kubeconfig), *args],
                          capture_output=True, text=True, timeout=60, env=env)


def test_kctl_auth_over_https_asks_the_server(kubeapi, alice):
    """kctl auth can-i/whoami with --kubeconfig answer for the kubeconfig's user, as the server decides."""
    assert _kctl(alice, "auth", "can-i", "list", "pods", "-n", "a").stdout == "yes\n"
    refused = _kctl(alice, "auth", "can-i", "list", "pods", "-n", "b")
    assert (refused.stdout, refused.returncode) == ("no\n", 1)
    listed = _kctl(alice, "auth", "can-i", "--list", "-n", "a")
    assert ["pods", "[]", "[]", "[get", "list", "watch]"] in [line.split() for line in listed.stdout.splitlines()]
    who = _kctl(alice, "auth", "whoami")
    assert who.stdout.splitlines()[1].split() == ["Username", "alice"], who.stderr
    admin = _kctl(kubeapi.kubeconfig, "auth", "can-i", "create", "pods", "-n", "a", "--as", "alice")
    assert (admin.stdout, admin.returncode) == ("no\n", 1), admin.stderr
    assert _kctl(kubeapi.kubeconfig, "auth", "can-i", "get", "pods", "-n", "a", "--as", "alice").stdout == "yes\n"


def test_kubectl_create_rolebinding_grants_access(kubeapi, alice):
    """kubectl create role/rolebinding (protobuf bodies) by the admin; alice's access follows within a second."""
    assert _run(kubeapi, alice, "get", "configmaps", "-n", "b").returncode == 1
    made = kubeapi.kubectl("create", "role", "cm-reader", "--verb=get,list", "--resource=configmaps", "-n", "b")
    assert made.returncode == 0, made.stderr
    bound = kubeapi.kubectl("create", "rolebinding", "alice-cm", "--role=cm-reader", "--user=alice", "-n", "b")
    assert bound.returncode == 0, bound.stderr
    deadline = time.monotonic() + 10
    while _run(kubeapi, alice, "get", "configmaps", "-n", "b").returncode != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    allowed = _run(kubeapi, alice, "get", "configmaps", "-n", "b")
    assert allowed.returncode == 0, allowed.stderr
    assert _run(kubeapi, alice, "get", "pods", "-n", "b").returncode == 1
