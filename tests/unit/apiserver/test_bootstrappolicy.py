"""The default RBAC policy: written when missing, completed when auto-updated, left alone when a user owns it,
and writing it twice changes nothing."""

from __future__ import annotations

import pytest

from kctl.apiserver import bootstrappolicy

CR = "clusterroles.rbac.authorization.k8s.io"
CRB = "clusterrolebindings.rbac.authorization.k8s.io"


def test_ensure_creates_the_defaults_once(api):
    """A fresh store gets every default role and binding; a second run writes nothing."""
    written = bootstrappolicy.ensure(api)
    assert "ClusterRole/cluster-admin" in written and "ClusterRoleBinding/system:public-info-viewer" in written
    assert len(written) == len(bootstrappolicy.policy())
    revision = api.revision()
    assert bootstrappolicy.ensure(api) == []
    assert api.revision() == revision


@pytest.mark.parametrize("name, aggregates_from, label", [
    ("admin", "admin", None),
    ("edit", "edit", "admin"),
    ("view", "view", "edit"),
], ids=["admin", "edit", "view"])
def test_user_facing_roles_aggregate_as_kubernetes(api, name, aggregates_from, label):
    """admin/edit/view carry Kubernetes' aggregationRule and aggregate-to labels (view into edit into admin)."""
    bootstrappolicy.ensure(api)
    role = api.get(api.resource(CR), name)
    selector = role["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]
    assert selector == {f"rbac.authorization.k8s.io/aggregate-to-{aggregates_from}": "true"}
    labels = role["metadata"]["labels"]
    if label:
        assert labels[f"rbac.authorization.k8s.io/aggregate-to-{label}"] == "true"
    assert role["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] == "true"


@pytest.mark.parametrize("binding, role, groups", [
    ("cluster-admin", "cluster-admin", ["system:masters"]),
    ("system:basic-user", "system:basic-user", ["system:authenticated"]),
    ("system:discovery", "system:discovery", ["system:authenticated"]),
    ("system:public-info-viewer", "system:public-info-viewer", ["system:authenticated", "system:unauthenticated"]),
], ids=["cluster-admin", "basic-user", "discovery", "public-info-viewer"])
def test_default_bindings(api, binding, role, groups):
    """Each default binding refers to its ClusterRole and binds Kubernetes' groups."""
    bootstrappolicy.ensure(api)
    obj = api.get(api.resource(CRB), binding)
    assert obj["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
    assert [s["name"] for s in obj["subjects"]] == groups


def test_autoupdate_roles_get_missing_rules_and_subjects_back(api):
    """A default role or binding that lost a rule or subject gets it back; what a user added stays."""
    bootstrappolicy.ensure(api)
    rt = api.resource(CR)
    role = api.get(rt, "system:basic-user")
    role["rules"] = [{"apiGroups": ["example.com"], "resources": ["things"], "verbs": ["get"]}]
    api.update(role)
    binding = api.get(api.resource(CRB), "system:public-info-viewer")
    binding["subjects"] = binding["subjects"][:1]
    api.update(binding)
    assert bootstrappolicy.ensure(api) == ["ClusterRole/system:basic-user",
                                           "ClusterRoleBinding/system:public-info-viewer"]
    rules = api.get(rt, "system:basic-user")["rules"]
    assert rules[0]["apiGroups"] == ["example.com"] and len(rules) == 3
    assert len(api.get(api.resource(CRB), "system:public-info-viewer")["subjects"]) == 2


def test_roles_a_user_owns_are_left_alone(api):
    """autoupdate "false" (or no annotation) makes the object the user's: it is not changed."""
    bootstrappolicy.ensure(api)
    rt = api.resource(CR)
    role = api.get(rt, "system:discovery")
    role["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] = "false"
    role["rules"] = [{"nonResourceURLs": ["/version"], "verbs": ["get"]}]
    api.update(role)
    assert bootstrappolicy.ensure(api) == []
    assert api.get(rt, "system:discovery")["rules"] == [{"nonResourceURLs": ["/version"], "verbs": ["get"]}]


def test_deleted_defaults_are_remade(api):
    """A deleted default role is created again by the next run (the next control-plane start)."""
    bootstrappolicy.ensure(api)
    api.delete(api.resource(CR), "view")
    assert bootstrappolicy.ensure(api) == ["ClusterRole/view"]
