"""RBAC evaluation as Kubernetes' RBACAuthorizer: rule matching, binding subjects, role references, reasons, and
the 403 text (cases after plugin/pkg/auth/authorizer/rbac/rbac_test.go and pkg/registry/rbac/validation)."""

from __future__ import annotations

import pytest

from kctl.kubeapi.authn import UserInfo
from kctl.kubeapi.authz import Attributes, Authorizer, forbidden_message
from kctl.kubeapi.authz.rbac import RBAC, rule_allows

ALICE = UserInfo("alice", ("devs", "system:authenticated"))


def rule(verbs, groups=("",), resources=(), names=(), urls=()) -> dict:
    out: dict = {"verbs": list(verbs)}
    if urls:
        out["nonResourceURLs"] = list(urls)
    else:
        out["apiGroups"], out["resources"] = list(groups), list(resources)
    if names:
        out["resourceNames"] = list(names)
    return out


def res(verb, resource, *, group="", sub="", name="", ns="a", user=ALICE) -> Attributes:
    return Attributes(user=user, verb=verb, namespace=ns, api_group=group, api_version="v1", resource=resource,
                      subresource=sub, name=name)


def path(verb, url, *, user=ALICE) -> Attributes:
    return Attributes(user=user, verb=verb, path=url, resource_request=False)


@pytest.mark.parametrize("the_rule, attrs, allowed", [
    (rule(["get"], [""], ["pods"]), res("get", "pods"), True),
    (rule(["get"], [""], ["pods"]), res("list", "pods"), False),
    (rule(["*"], [""], ["pods"]), res("deletecollection", "pods"), True),
    (rule(["get"], ["apps"], ["pods"]), res("get", "pods"), False),
    (rule(["get"], ["*"], ["deployments"]), res("get", "deployments", group="apps"), True),
    (rule(["get"], [""], ["*"]), res("get", "secrets"), True),
    (rule(["get"], [""], ["pods"]), res("get", "pods", sub="log"), False),
    (rule(["get"], [""], ["pods/log"]), res("get", "pods", sub="log"), True),
    (rule(["get"], [""], ["pods/log"]), res("get", "pods"), False),
    (rule(["get"], ["apps"], ["*/scale"]), res("get", "deployments", group="apps", sub="scale"), True),
    (rule(["get"], ["apps"], ["*/scale"]), res("get", "deployments", group="apps"), False),
    (rule(["get"], ["apps"], ["*/status"]), res("get", "deployments", group="apps", sub="scale"), False),
    (rule(["get"], [""], ["*"]), res("get", "pods", sub="exec"), True),
    (rule(["get"], [""], ["pods"], names=["web"]), res("get", "pods", name="web"), True),
    (rule(["get"], [""], ["pods"], names=["web"]), res("get", "pods", name="db"), False),
    (rule(["list"], [""], ["pods"], names=["web"]), res("list", "pods"), False),
    (rule(["create"], [""], ["pods"], names=["web"]), res("create", "pods"), False),
    (rule(["get"], urls=["/healthz"]), path("get", "/healthz"), True),
    (rule(["get"], urls=["/healthz"]), path("get", "/healthz/etcd"), False),
    (rule(["get"], urls=["/apis/*"]), path("get", "/apis/apps/v1"), True),
    (rule(["get"], urls=["/apis*"]), path("get", "/apis"), True),
    (rule(["get"], urls=["*"]), path("get", "/anything"), True),
    (rule(["get"], urls=["/version"]), path("post", "/version"), False),
    (rule(["get"], [""], ["pods"]), path("get", "/pods"), False),
    (rule(["get"], urls=["*"]), res("get", "pods"), False),
], ids=["exact", "other-verb", "star-verb", "other-group", "star-group", "star-resource", "subresource-not-parent",
        "subresource-exact", "subresource-only", "star-subresource", "star-subresource-needs-one",
        "star-other-subresource", "star-covers-subresources", "name-allowed", "name-other", "names-no-list",
        "names-no-create", "url-exact", "url-no-prefix", "url-star-suffix", "url-prefix-star", "url-star",
        "url-other-verb", "resource-rule-not-path", "path-rule-not-resource"])
def test_rule_allows(the_rule, attrs, allowed):
    """Verbs, API groups, resources (`*`, `res/sub`, `*/sub`), resourceNames and nonResourceURLs match as RuleAllows."""
    assert rule_allows(attrs, the_rule) is allowed


class Policy:
    """A PolicySource of fixed objects."""

    def __init__(self, *objs: dict) -> None:
        self.objs = objs

    def _of(self, kind):
        return [o for o in self.objs if o["kind"] == kind]

    def cluster_role_bindings(self):
        return self._of("ClusterRoleBinding")

    def role_bindings(self, namespace):
        return [o for o in self._of("RoleBinding") if o["metadata"]["namespace"] == namespace]

    def cluster_role(self, name):
        return next((o for o in self._of("ClusterRole") if o["metadata"]["name"] == name), None)

    def role(self, namespace, name):
        return next((o for o in self._of("Role") if o["metadata"] == {"name": name, "namespace": namespace}), None)


def role(name, *rules, ns=None) -> dict:
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {"kind": "Role" if ns else "ClusterRole", "metadata": meta, "rules": list(rules)}


def binding(name, ref_kind, ref_name, *subjects, ns=None) -> dict:
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {"kind": "RoleBinding" if ns else "ClusterRoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": ref_kind, "name": ref_name},
            "subjects": [dict(zip(("kind", "name", "namespace"), s)) for s in subjects]}


POLICY = Policy(
    role("pod-reader", rule(["get", "list", "watch"], [""], ["pods"])),
    role("node-admin", rule(["*"], [""], ["nodes"])),
    role("health", rule(["get"], urls=["/healthz", "/apis/*"])),
    role("cm-writer", rule(["create", "update"], [""], ["configmaps"]), ns="a"),
    role("cm-writer", rule(["delete"], [""], ["configmaps"]), ns="b"),
    binding("readers", "ClusterRole", "pod-reader", ("Group", "devs")),
    binding("nodes", "ClusterRole", "node-admin", ("User", "bob")),
    binding("health", "ClusterRole", "health", ("Group", "system:authenticated")),
    binding("cm", "Role", "cm-writer", ("User", "alice"), ns="a"),
    binding("cm", "Role", "cm-writer", ("User", "carol"), ns="b"),
    binding("sa-read", "ClusterRole", "node-admin", ("ServiceAccount", "builder"), ns="ci"),
    binding("sa-other", "ClusterRole", "node-admin", ("ServiceAccount", "deployer", "tools"), ns="ci"),
    binding("missing", "Role", "nope", ("User", "dave"), ns="a"),
    binding("missing-cr", "ClusterRole", "gone", ("User", "dave")),
)
BOB = UserInfo("bob", ("system:authenticated",))
CAROL = UserInfo("carol", ("system:authenticated",))
BUILDER = UserInfo("system:serviceaccount:ci:builder", ("system:serviceaccounts",))
DEPLOYER = UserInfo("system:serviceaccount:tools:deployer", ())
CI_DEPLOYER = UserInfo("system:serviceaccount:ci:deployer", ())
DAVE = UserInfo("dave", ())


@pytest.mark.parametrize("attrs, allowed", [
    (res("list", "pods", ns="anything"), True),
    (res("list", "pods", ns=""), True),
    (res("delete", "pods"), False),
    (res("create", "configmaps", ns="a"), True),
    (res("create", "configmaps", ns="b"), False),
    (res("create", "configmaps", ns=""), False),
    (res("delete", "configmaps", ns="b", user=CAROL), True),
    (res("create", "configmaps", ns="b", user=CAROL), False),
    (res("delete", "nodes", ns="", user=BOB), True),
    (res("list", "pods", user=BOB), False),
    (path("get", "/healthz"), True),
    (path("get", "/apis/apps"), True),
    (path("get", "/api"), False),
    (res("get", "nodes", ns="ci", user=BUILDER), True),
    (res("get", "nodes", ns="", user=BUILDER), False),
    (res("get", "nodes", ns="ci", user=DEPLOYER), True),
    (res("get", "nodes", ns="ci", user=CI_DEPLOYER), False),
], ids=["group-cluster-binding", "group-cluster-scope", "verb-not-bound", "role-in-its-namespace",
        "role-other-namespace", "rolebinding-not-cluster-scope", "same-role-name-other-namespace",
        "other-namespace-role-rules", "user-cluster-binding", "user-not-in-group", "path-by-group",
        "path-by-prefix", "path-not-listed", "sa-defaults-to-binding-namespace", "rolebinding-needs-namespace",
        "sa-explicit-namespace", "sa-explicit-namespace-only"])
def test_bindings_apply_as_kubernetes(attrs, allowed):
    """ClusterRoleBindings everywhere, RoleBindings in their namespace; User, Group, ServiceAccount subjects."""
    assert RBAC(POLICY).authorize(attrs)[0] is allowed


def test_allowed_reason_names_the_binding():
    """An allowed request's reason names the binding, role and subject as kube-apiserver's describers do."""
    assert RBAC(POLICY).authorize(res("create", "configmaps", ns="a")) == (
        True, 'RBAC: allowed by RoleBinding "cm/a" of Role "cm-writer" to User "alice"')
    assert RBAC(POLICY).authorize(res("get", "pods")) == (
        True, 'RBAC: allowed by ClusterRoleBinding "readers" of ClusterRole "pod-reader" to Group "devs"')
    assert RBAC(POLICY).authorize(res("get", "nodes", ns="ci", user=BUILDER))[1] == (
        'RBAC: allowed by RoleBinding "sa-read/ci" of ClusterRole "node-admin" to ServiceAccount "builder/ci"')


def test_missing_roles_give_no_rules_and_an_evaluation_error():
    """A binding to a Role or ClusterRole that does not exist grants nothing; the denial's reason says why."""
    allowed, reason = RBAC(POLICY).authorize(res("get", "pods", ns="a", user=DAVE))
    assert not allowed
    assert reason == ('RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, '
                      'role.rbac.authorization.k8s.io "nope" not found]')
    assert RBAC(POLICY).authorize(res("get", "pods", ns="", user=DAVE)) == (
        False, 'RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found')
    assert RBAC(POLICY).authorize(res("get", "pods", ns="x", user=BOB)) == (False, "")


def test_system_masters_is_always_allowed():
    """The privileged group needs no rule, as kube-apiserver's."""
    authorizer = Authorizer(None, policy=Policy())
    admin = UserInfo("kctl-admin", ("system:masters",))
    assert authorizer.authorize(res("delete", "nodes", ns="", user=admin)) == (True, "")
    assert authorizer.authorize(path("post", "/anything", user=admin))[0]
    assert not authorizer.authorize(res("get", "pods"))[0]
    review = authorizer.rules_for(admin, "a")
    assert review.resource_rules[0] == {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
    assert review.non_resource_rules[0] == {"verbs": ["*"], "nonResourceURLs": ["*"]}


def test_rules_for_lists_cluster_and_namespace_rules():
    """The rules review holds the rules of every binding that applies, split into resource and path rules."""
    authorizer = Authorizer(None, policy=POLICY)
    review = authorizer.rules_for(ALICE, "a")
    assert review.resource_rules == (
        {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]},
        {"verbs": ["create", "update"], "apiGroups": [""], "resources": ["configmaps"]})
    assert review.non_resource_rules == ({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]},)
    assert review.errors == ()
    assert authorizer.rules_for(DAVE, "a").errors == ('clusterrole.rbac.authorization.k8s.io "gone" not found',
                                                      'role.rbac.authorization.k8s.io "nope" not found')


@pytest.mark.parametrize("attrs, message", [
    (res("list", "pods", ns="other"),
     'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "other"'),
    (res("get", "pods", name="web"),
     'pods "web" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "a"'),
    (res("create", "deployments", group="apps", ns=""),
     'deployments.apps is forbidden: User "alice" cannot create resource "deployments" in API group "apps" '
     'at the cluster scope'),
    (res("get", "pods", sub="log", name="web"),
     'pods "web" is forbidden: User "alice" cannot get resource "pods/log" in API group "" in the namespace "a"'),
    (path("get", "/foo"), 'forbidden: User "alice" cannot get path "/foo"'),
    (path("get", "/a<b>&c", user=UserInfo("x")), 'forbidden: User "x" cannot get path "/a&lt;b&gt;&amp;c"'),
], ids=["list", "named", "cluster-scope-group", "subresource", "path", "path-escaped"])
def test_forbidden_message_is_kubernetes_text(attrs, message):
    """The 403 message is kube-apiserver's: NewForbidden around forbiddenMessage."""
    assert forbidden_message(attrs) == message


def test_forbidden_message_appends_a_reason():
    """A non-empty authorizer reason follows the text after ': '."""
    expected = 'forbidden: User "alice" cannot get path "/x": RBAC: boom'
    assert forbidden_message(path("get", "/x"), "RBAC: boom") == expected
