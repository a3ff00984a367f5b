"""The rbac-bootstrap controller writes the default policy when the controller manager starts; with
clusterrole-aggregation beside it, view/edit/admin get their rules, as a fresh Kubernetes cluster has them."""

from __future__ import annotations

from lifecycle_harness import running, wait_for

from kctl.controllers.clusterroleaggregation import ClusterRoleAggregationController
from kctl.controllers.rbacbootstrap import RBACBootstrapController
from kctl.machinery.errors import NotFound


def _rules(api, name: str) -> list:
    try:
        return api.get(api.resource("clusterroles.rbac.authorization.k8s.io"), name).get("rules") or []
    except NotFound:
        return []


def test_default_policy_is_written_and_aggregated_at_start(api):
    """A fresh store gets cluster-admin and its binding, and view with the view rules, without any user action."""
    with running(api, [RBACBootstrapController(), ClusterRoleAggregationController()]):
        wait_for(lambda: _rules(api, "view") and _rules(api, "admin"), what="the aggregated default roles")
        # the bindings are written after the roles: the aggregator may fill the roles before they exist
        wait_for(lambda: api.find(api.resource("clusterrolebindings.rbac.authorization.k8s.io"), "cluster-admin"),
                 what="the default bindings")
        binding = api.get(api.resource("clusterrolebindings.rbac.authorization.k8s.io"), "cluster-admin")
        assert binding["subjects"][0]["name"] == "system:masters"
        assert _rules(api, "cluster-admin")[0] == {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}
