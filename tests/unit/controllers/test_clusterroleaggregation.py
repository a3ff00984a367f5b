"""The clusterrole-aggregation controller fills admin/edit/view (and any aggregating ClusterRole) with the rules of
the ClusterRoles their selectors match, and follows labels and rules as they change."""

from __future__ import annotations

import pytest

from lifecycle_harness import running, wait_for

from kctl.apiserver import bootstrappolicy
from kctl.controllers.clusterroleaggregation import ClusterRoleAggregationController, aggregated_rules

CR = "clusterroles.rbac.authorization.k8s.io"
GET = ["get"]


def _role(name, rules, *, labels=None, selectors=None) -> dict:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels or {}}, "rules": rules}
    if selectors is not None:
        role["aggregationRule"] = {"clusterRoleSelectors": selectors}
    return role


def _rule(resource: str) -> dict:
    return {"apiGroups": [""], "resources": [resource], "verbs": GET}


@pytest.mark.parametrize("selectors, roles, expected", [
    ([{"matchLabels": {"x": "1"}}], [_role("b", [_rule("b")], labels={"x": "1"}), _role("a", [_rule("a")],
                                                                                        labels={"x": "1"})],
     [_rule("a"), _rule("b")]),
    ([{"matchLabels": {"x": "1"}}], [_role("a", [_rule("a")], labels={"x": "2"})], []),
    ([{"matchLabels": {"x": "1"}}, {"matchLabels": {"y": "1"}}],
     [_role("a", [_rule("a")], labels={"x": "1"}), _role("b", [_rule("b")], labels={"y": "1"})],
     [_rule("a"), _rule("b")]),
    ([{"matchLabels": {"y": "1"}}, {"matchLabels": {"x": "1"}}],
     [_role("a", [_rule("a")], labels={"x": "1"}), _role("b", [_rule("b")], labels={"y": "1"})],
     [_rule("b"), _rule("a")]),
    ([{"matchLabels": {"x": "1"}}], [_role("a", [_rule("a"), _rule("c")], labels={"x": "1"}),
                                     _role("b", [_rule("c")], labels={"x": "1"})], [_rule("a"), _rule("c")]),
    ([{"matchLabels": {"x": "1"}}], [_role("agg", [_rule("own")], labels={"x": "1"})], []),
    ([{"matchExpressions": [{"key": "x", "operator": "Exists"}]}], [_role("a", [_rule("a")], labels={"x": "9"})],
     [_rule("a")]),
], ids=["name-order", "no-match", "any-selector", "selector-order", "no-repeats", "not-itself", "expressions"])
def test_aggregated_rules(selectors, roles, expected):
    """The union of the selected roles' rules, selector by selector in name order, each rule once, not its own."""
    assert aggregated_rules(_role("agg", [], selectors=selectors), roles) == expected


def test_default_roles_are_aggregated_and_follow_changes(api):
    """view gets the view rules, edit view's and edit's, admin all; a labelled custom role joins and leaves."""
    bootstrappolicy.ensure(api)
    rt = api.resource(CR)

    def rules(name):
        return api.get(rt, name).get("rules") or []

    with running(api, [ClusterRoleAggregationController()]):
        wait_for(lambda: len(rules("admin")) > len(rules("edit")) > len(rules("view")) > 0, what="aggregation")
        assert any("pods/log" in r.get("resources", []) for r in rules("view"))
        assert not any("secrets" in r.get("resources", []) for r in rules("view")), "view never reads secrets"
        assert any("secrets" in r.get("resources", []) for r in rules("edit"))
        crontab = {"apiGroups": ["stable.example.com"], "resources": ["crontabs"], "verbs": GET}
        api.create(_role("crontab-view", [crontab], labels={"rbac.authorization.k8s.io/aggregate-to-view": "true"}))
        wait_for(lambda: crontab in rules("view") and crontab in rules("edit") and crontab in rules("admin"),
                 what="a custom role aggregated into view, edit and admin")
        custom = api.get(rt, "crontab-view")
        custom["metadata"]["labels"] = {}
        api.update(custom)
        wait_for(lambda: crontab not in rules("view") and crontab not in rules("admin"),
                 what="a role whose label went is taken out")
