"""`kctl auth can-i` and `kctl auth whoami` answer with the HTTPS API's authorizer over the store's roles and
bindings, in kubectl's words: yes/no and exit status, the --list table, the whoami rows."""

from __future__ import annotations

import json
import re

import pytest

from kctl.apiserver import bootstrappolicy


@pytest.fixture
def policy(server):
    """The default policy, namespace a, alice bound to `view` there (aggregated by hand: no daemon runs)."""
    from kctl.controllers.clusterroleaggregation import aggregated_rules

    bootstrappolicy.ensure(server)
    rt = server.resource("clusterroles.rbac.authorization.k8s.io")
    roles, _ = server.list(rt)
    for name in ("view", "edit", "admin"):
        role = server.get(rt, name)
        role["rules"] = aggregated_rules(role, roles)
        server.update(role)
        roles, _ = server.list(rt)
    for ns in ("a", "ci"):
        server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    server.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "alice-view", "namespace": "a"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
    server.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "builder-edit", "namespace": "ci"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                   "subjects": [{"kind": "ServiceAccount", "name": "builder"}]})
    server.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "broken", "namespace": "a"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "missing"},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "zed"}]})


@pytest.mark.parametrize("args, out, code", [
    (["list", "pods"], "yes\n", 0),
    (["delete", "nodes", "-A"], "yes\n", 0),
    (["list", "pods", "-n", "a", "--as", "alice"], "yes\n", 0),
    (["get", "deployments.apps/web", "-n", "a", "--as", "alice"], "yes\n", 0),
    (["get", "pods", "--subresource", "log", "-n", "a", "--as", "alice"], "yes\n", 0),
    (["create", "pods", "-n", "a", "--as", "alice"], "no\n", 1),
    (["get", "secrets", "-n", "a", "--as", "alice"], "no\n", 1),
    (["list", "pods", "-n", "b", "--as", "alice"], "no\n", 1),
    (["list", "pods", "--as", "alice"], "no\n", 1),
    (["get", "/version", "--as", "alice"], "yes\n", 0),
    (["get", "/metrics", "--as", "alice"], "no\n", 1),
    (["create", "secrets", "-n", "ci", "--as", "system:serviceaccount:ci:builder"], "yes\n", 0),
    (["create", "secrets", "-n", "a", "--as", "system:serviceaccount:ci:builder"], "no\n", 1),
    (["delete", "nodes", "--as", "bob", "--as-group", "system:masters"], "yes\n", 0),
    (["get", "pods", "-n", "a", "--as", "zed"],
     'no - RBAC: role.rbac.authorization.k8s.io "missing" not found\n', 1),
    (["list", "pods", "-n", "b", "--as", "alice", "-q"], "", 1),
], ids=["local-admin", "local-admin-cluster", "view-list", "view-named", "view-subresource", "view-no-create",
        "view-no-secrets", "other-namespace", "default-namespace", "discovery-path", "unlisted-path", "sa-edit",
        "sa-elsewhere", "as-group-masters", "missing-role-reason", "quiet"])
def test_can_i(kctl, policy, args, out, code):
    """yes/no and exit 0/1 as kubectl prints them, for the local admin and impersonated users."""
    result = kctl("auth", "can-i", *args)
    assert (result.out, result.code) == (out, code), result.err


@pytest.mark.parametrize("args, message", [
    (["get"], "error: you must specify two arguments: verb resource or verb resource/resourceName.\n"),
    (["--list", "get"], "error: list option must be specified with no arguments\n"),
    (["get", "pods", "--as-group", "devs"],
     "error: requesting uid, groups or user-extra for tester without impersonating a user\n"),
], ids=["one-argument", "list-with-verb", "group-without-user"])
def test_can_i_usage_errors(kctl, monkeypatch, args, message):
    """Usage errors are kubectl's one line, exit 1."""
    monkeypatch.setenv("USER", "tester")
    monkeypatch.setenv("LOGNAME", "tester")
    result = kctl("auth", "can-i", *args)
    assert (result.err, result.code) == (message, 1)


def test_can_i_unknown_resource_warns(kctl, policy):
    """An unknown type is asked about as written, with kubectl's warning."""
    result = kctl("auth", "can-i", "get", "widgets.example.com", "--as", "alice", "-n", "a")
    assert result.code == 1 and result.out == "no\n"
    assert "Warning: the server doesn't have a resource type 'widgets.example.com'" in result.err


def test_can_i_list_prints_kubectls_table(kctl, policy):
    """--list breaks rules down per resource, merges verbs and sorts as kubectl does."""
    result = kctl("auth", "can-i", "--list", "-n", "a", "--as", "alice")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert re.split(r"\s{3,}", lines[0]) == ["Resources", "Non-Resource URLs", "Resource Names", "Verbs"]
    rows = {cells[0]: cells[1:] for cells in (re.split(r"\s{3,}", line) for line in lines[1:])}
    assert rows["selfsubjectaccessreviews.authorization.k8s.io"] == ["[]", "[]", "[create]"]
    assert rows["pods"] == ["[]", "[]", "[get list watch]"]
    assert rows["deployments.apps/scale"] == ["[]", "[]", "[get list watch]"]
    assert "secrets" not in rows
    assert ["", "[/healthz]", "[]", "[get]"] in [re.split(r"\s{3,}", line) for line in lines]
    assert lines[1].startswith("selfsubjectreviews.authentication.k8s.io"), "[create] sorts before [get]"
    bare = kctl("auth", "can-i", "--list", "-n", "a", "--as", "alice", "--no-headers").out.splitlines()
    assert [re.split(r"\s{3,}", line) for line in bare] == [re.split(r"\s{3,}", line) for line in lines[1:]]


def test_can_i_list_warns_when_incomplete(kctl, policy):
    """A binding to a missing role makes the list incomplete, said on stderr as kubectl does."""
    result = kctl("auth", "can-i", "--list", "-n", "a", "--as", "zed")
    assert result.code == 0
    assert 'Warning: the list may be incomplete: role.rbac.authorization.k8s.io "missing" not found' in result.err


def test_whoami(kctl, monkeypatch):
    """whoami prints the local admin, or the impersonated user with its groups; -o json a SelfSubjectReview."""
    monkeypatch.setenv("USER", "tester")
    monkeypatch.setenv("LOGNAME", "tester")
    result = kctl("auth", "whoami")
    assert result.out == "ATTRIBUTE   VALUE\nUsername    tester\nGroups      [system:masters system:authenticated]\n"
    result = kctl("auth", "whoami", "--as", "system:serviceaccount:ci:builder", "-o", "json")
    review = json.loads(result.out)
    assert review["kind"] == "SelfSubjectReview" and review["apiVersion"] == "authentication.k8s.io/v1"
    assert review["status"]["userInfo"] == {
        "username": "system:serviceaccount:ci:builder",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"]}
