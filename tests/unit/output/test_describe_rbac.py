"""kubectl describe's layouts of Role/ClusterRole (the PolicyRule table, broken down, merged and sorted as
kubectl's) and RoleBinding/ClusterRoleBinding (role and subjects)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import builtin_registry
from kctl.output.describe import describe
from kctl.output.describe.rbac import rule_rows

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("rules, rows", [
    ([{"apiGroups": [""], "resources": ["pods"], "verbs": ["watch", "get", "list"]}],
     [["pods", "[]", "[]", "[get list watch]"]]),
    ([{"apiGroups": ["", "apps"], "resources": ["deployments", "pods/log"], "verbs": ["get"]}],
     [["deployments", "[]", "[]", "[get]"], ["pods/log", "[]", "[]", "[get]"],
      ["deployments.apps", "[]", "[]", "[get]"], ["pods.apps/log", "[]", "[]", "[get]"]]),
    ([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
      {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete", "get"]}],
     [["pods", "[]", "[]", "[get delete]"]]),
    ([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a", "b"], "verbs": ["get"]}],
     [["configmaps", "[]", "[a]", "[get]"], ["configmaps", "[]", "[b]", "[get]"]]),
    ([{"nonResourceURLs": ["/version", "/healthz"], "verbs": ["get"]}],
     [["", "[/healthz]", "[]", "[get]"], ["", "[/version]", "[]", "[get]"]]),
    ([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}], [["*.*", "[]", "[]", "[*]"]]),
], ids=["sorted-verbs", "per-group-and-resource", "merged-verbs", "per-name", "per-url", "everything"])
def test_rule_rows(rules, rows):
    """BreakdownRule, CompactRules and the PolicyRule.String() order, as kubectl prints rules."""
    assert rule_rows(rules) == rows


def test_describe_cluster_role():
    """Name, labels, annotations, then the PolicyRule table indented one level."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "pod-reader", "labels": {"team": "a"}},
            "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]}
    rt = builtin_registry().for_object(role)
    assert describe(role, rt, [], now=NOW) == (
        "Name:         pod-reader\n"
        "Labels:       team=a\n"
        "Annotations:  <none>\n"
        "PolicyRule:\n"
        "  Resources  Non-Resource URLs  Resource Names  Verbs\n"
        "  ---------  -----------------  --------------  -----\n"
        "  pods/log   []                 []              [get list]\n"
        "  pods       []                 []              [get list]\n")


def test_describe_role_binding():
    """The role (Kind, Name) and a Kind/Name/Namespace row per subject."""
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "read-pods", "namespace": "a"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
               "subjects": [{"kind": "User", "name": "jane"},
                            {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"}]}
    rt = builtin_registry().for_object(binding)
    assert describe(binding, rt, [], now=NOW) == (
        "Name:         read-pods\n"
        "Labels:       <none>\n"
        "Annotations:  <none>\n"
        "Role:\n"
        "  Kind:  Role\n"
        "  Name:  pod-reader\n"
        "Subjects:\n"
        "  Kind            Name     Namespace\n"
        "  ----            ----     ---------\n"
        "  User            jane     \n"
        "  ServiceAccount  builder  ci\n")
