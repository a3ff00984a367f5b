"""The access reviews answer as kube-apiserver's: SelfSubjectAccessReview, SubjectAccessReview,
LocalSubjectAccessReview, SelfSubjectRulesReview and SelfSubjectReview, with Kubernetes' validation errors."""

from __future__ import annotations

import pytest

from kctl.apiserver import bootstrappolicy
from kctl.kubeapi.authn import UserInfo
from kctl.kubeapi.authz import Authorizer
from kctl.kubeapi.authz.reviews import review
from kctl.machinery.errors import BadRequest, Invalid

ALICE = UserInfo("alice", ("system:authenticated",), uid="u-1", extra={"scopes": ("a", "b")})


@pytest.fixture
def authorizer(api):
    """An Authorizer over a store with the default policy and alice bound to `view` in namespace a."""
    bootstrappolicy.ensure(api)
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "alice-view", "namespace": "a"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "system:aggregate-to-view"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
    return Authorizer(api, cached=False)


def _ssar(verb, resource, namespace="a", **extra) -> dict:
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace, **extra}}}


@pytest.mark.parametrize("body, allowed", [
    (_ssar("list", "pods"), True),
    (_ssar("get", "pods", subresource="log", name="web"), True),
    (_ssar("create", "pods"), False),
    (_ssar("list", "pods", namespace="b"), False),
    (_ssar("get", "deployments", group="apps"), True),
    (_ssar("list", "secrets"), False),
    ({"spec": {"nonResourceAttributes": {"verb": "get", "path": "/version"}}}, True),
    ({"spec": {"nonResourceAttributes": {"verb": "get", "path": "/metrics"}}}, False),
], ids=["list-pods", "pod-logs", "create-refused", "other-namespace", "deployments", "no-secrets", "path",
        "other-path"])
def test_self_subject_access_review(authorizer, body, allowed):
    """SelfSubjectAccessReview answers for the requester, with the allowing binding as the reason."""
    answer = review("selfsubjectaccessreviews", body, user=ALICE, authorizer=authorizer)
    assert answer["kind"] == "SelfSubjectAccessReview"
    assert answer["apiVersion"] == "authorization.k8s.io/v1"
    assert answer["status"]["allowed"] is allowed
    assert answer["spec"] == body["spec"]
    if allowed and "resourceAttributes" in body["spec"]:
        assert answer["status"]["reason"].startswith("RBAC: allowed by RoleBinding \"alice-view/a\"")


def test_subject_access_review_asks_about_another_user(authorizer):
    """SubjectAccessReview evaluates spec.user/groups exactly (no group is added)."""
    body = {"spec": {"user": "alice", "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "a"}}}
    assert review("subjectaccessreviews", body, user=UserInfo("admin", ("system:masters",)),
                  authorizer=authorizer)["status"]["allowed"] is True
    body["spec"]["user"] = "bob"
    assert review("subjectaccessreviews", body, user=ALICE, authorizer=authorizer)["status"] == {"allowed": False}
    body["spec"]["groups"] = ["system:masters"]
    assert review("subjectaccessreviews", body, user=ALICE, authorizer=authorizer)["status"]["allowed"] is True


@pytest.mark.parametrize("resource, body, namespace, error, message", [
    ("selfsubjectaccessreviews", {"spec": {}}, "", Invalid,
     'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: '
     'exactly one of nonResourceAttributes or resourceAttributes must be specified'),
    ("selfsubjectaccessreviews", {"spec": {"resourceAttributes": {}, "nonResourceAttributes": {}}}, "", Invalid,
     'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.nonResourceAttributes: Invalid value: '
     'cannot be specified in combination with resourceAttributes'),
    ("subjectaccessreviews", {"spec": {"resourceAttributes": {"verb": "get"}}}, "", Invalid,
     'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at least one of '
     'user or group must be specified'),
    ("localsubjectaccessreviews", {"spec": {"user": "x", "resourceAttributes": {"namespace": "b"}}}, "a",
     BadRequest, "spec.resourceAttributes.namespace must match namespace: a"),
    ("selfsubjectrulesreviews", {"spec": {}}, "", BadRequest, "no namespace on request"),
    ("selfsubjectaccessreviews", ["not", "an", "object"], "", BadRequest,
     "the body of a SelfSubjectAccessReview must be a JSON object"),
], ids=["neither", "both", "sar-no-user", "local-namespace-mismatch", "rules-no-namespace", "not-object"])
def test_bad_reviews_are_refused_as_kubernetes(authorizer, resource, body, namespace, error, message):
    """Invalid specs give Kubernetes' field errors; a local review of another namespace is a BadRequest."""
    with pytest.raises(error) as caught:
        review(resource, body, user=ALICE, authorizer=authorizer, namespace=namespace)
    assert caught.value.message == message


def test_local_subject_access_review_in_its_namespace(authorizer):
    """LocalSubjectAccessReview answers in the request's namespace and says so in its metadata."""
    body = {"spec": {"user": "alice", "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "a"}}}
    answer = review("localsubjectaccessreviews", body, user=ALICE, authorizer=authorizer, namespace="a")
    assert answer["metadata"]["namespace"] == "a" and answer["status"]["allowed"] is True


def test_self_subject_rules_review_lists_the_rules(authorizer):
    """The rules review lists cluster-wide rules (basic-user, discovery) and the namespace's (view)."""
    answer = review("selfsubjectrulesreviews", {"spec": {"namespace": "a"}}, user=ALICE, authorizer=authorizer)
    status = answer["status"]
    assert status["incomplete"] is False
    assert {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]} in status["resourceRules"]
    assert any("pods" in r["resources"] and r["verbs"] == ["get", "list", "watch"] for r in status["resourceRules"])
    assert {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"]} \
        in status["nonResourceRules"]
    other = review("selfsubjectrulesreviews", {"spec": {"namespace": "b"}}, user=ALICE, authorizer=authorizer)
    assert not any("pods" in r["resources"] for r in other["status"]["resourceRules"])


def test_self_subject_review_says_who_asks(authorizer):
    """SelfSubjectReview (kubectl auth whoami) returns the requester's userInfo."""
    answer = review("selfsubjectreviews", {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                    user=ALICE, authorizer=authorizer)
    assert answer["apiVersion"] == "authentication.k8s.io/v1"
    assert answer["status"]["userInfo"] == {"username": "alice", "uid": "u-1", "groups": ["system:authenticated"],
                                            "extra": {"scopes": ["a", "b"]}}
