"""RBAC kinds' names are path segments as Kubernetes' ValidateRBACName checks them: `system:basic-user` is valid,
`/`, `%`, `.` and `..` are not."""

from __future__ import annotations

import pytest

from kctl.machinery.errors import Invalid


def _role(kind: str, name: str) -> dict:
    obj = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name}}
    if kind.endswith("Binding"):
        obj["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}
    if not kind.startswith("Cluster"):
        obj["metadata"]["namespace"] = "default"
    return obj


@pytest.mark.parametrize("kind", ["ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding"])
@pytest.mark.parametrize("name", ["system:basic-user", "system:controller:job-controller", "Upper_Case"])
def test_colons_and_more_are_valid(api, kind, name):
    """Names Kubernetes' default policy uses (with ':') are accepted for every RBAC kind."""
    assert api.create(_role(kind, name))["metadata"]["name"] == name


@pytest.mark.parametrize("name, problem", [
    ("a/b", "may not contain '/'"),
    ("a%b", "may not contain '%'"),
    ("..", "may not be '..'"),
], ids=["slash", "percent", "dot-dot"])
def test_path_segment_rules(api, name, problem):
    """A name that cannot be a URL path segment is refused with Kubernetes' message."""
    with pytest.raises(Invalid) as caught:
        api.create(_role("ClusterRole", name))
    assert f'metadata.name: Invalid value: "{name}": {problem}' in caught.value.message


def test_other_kinds_keep_subdomain_names(api):
    """A ConfigMap's name is still a DNS subdomain: ':' is refused."""
    with pytest.raises(Invalid, match="RFC 1123 subdomain"):
        api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a:b", "namespace": "default"}})
