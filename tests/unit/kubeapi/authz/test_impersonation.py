"""Impersonate-* headers as kube-apiserver's impersonation filter: each thing asked for needs the verb
`impersonate`, the new user gets Kubernetes' groups, refusals are 403 with Kubernetes' text."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict

from kctl.kubeapi.authn import UserInfo
from kctl.kubeapi.authz import Authorizer
from kctl.kubeapi.authz.impersonation import ImpersonationError, check, has_headers
from kctl.machinery.errors import Forbidden

from test_rbac import Policy, binding, role, rule

ADMIN = UserInfo("admin", ("system:masters", "system:authenticated"))
ALICE = UserInfo("alice", ("system:authenticated",))
POLICY = Policy(
    role("impersonator", rule(["impersonate"], [""], ["users", "groups"]),
         rule(["impersonate"], [""], ["serviceaccounts"])),
    role("bob-only", rule(["impersonate"], [""], ["users"], names=["bob"])),
    binding("alice", "ClusterRole", "bob-only", ("User", "alice")),
    binding("carol", "ClusterRole", "impersonator", ("User", "carol")),
)


def _authorizer() -> Authorizer:
    authorizer = Authorizer(None, policy=POLICY)
    return authorizer


def _headers(*pairs: tuple[str, str]) -> CIMultiDict:
    return CIMultiDict(pairs)


@pytest.mark.parametrize("headers, expected", [
    (_headers(("Impersonate-User", "bob")), UserInfo("bob", ("system:authenticated",))),
    (_headers(("Impersonate-User", "bob"), ("Impersonate-Group", "devs"), ("Impersonate-Group", "ops")),
     UserInfo("bob", ("devs", "ops", "system:authenticated"))),
    (_headers(("Impersonate-User", "system:serviceaccount:ci:builder")),
     UserInfo("system:serviceaccount:ci:builder",
              ("system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"))),
    (_headers(("Impersonate-User", "system:anonymous")),
     UserInfo("system:anonymous", ("system:unauthenticated",))),
    (_headers(("Impersonate-User", "bob"), ("Impersonate-Uid", "42"), ("Impersonate-Extra-Scopes", "a"),
              ("Impersonate-Extra-Scopes", "b")),
     UserInfo("bob", ("system:authenticated",), uid="42", extra={"scopes": ("a", "b")})),
], ids=["user", "groups", "service-account", "anonymous", "uid-and-extra"])
def test_admin_impersonates(headers, expected):
    """system:masters may impersonate anyone; the impersonated user gets kube-apiserver's groups."""
    assert check(headers, ADMIN, _authorizer()) == expected


@pytest.mark.parametrize("user, headers, message", [
    (ALICE, _headers(("Impersonate-User", "carol")),
     'users "carol" is forbidden: User "alice" cannot impersonate resource "users" in API group "" '
     'at the cluster scope'),
    (ALICE, _headers(("Impersonate-User", "bob"), ("Impersonate-Group", "system:masters")),
     'groups "system:masters" is forbidden: User "alice" cannot impersonate resource "groups" in API group "" '
     'at the cluster scope'),
    (UserInfo("carol"), _headers(("Impersonate-User", "bob"), ("Impersonate-Uid", "7")),
     'uids.authentication.k8s.io "7" is forbidden: User "carol" cannot impersonate resource "uids" in API group '
     '"authentication.k8s.io" at the cluster scope'),
    (ALICE, _headers(("Impersonate-User", "system:serviceaccount:ci:builder")),
     'serviceaccounts "builder" is forbidden: User "alice" cannot impersonate resource "serviceaccounts" in API '
     'group "" in the namespace "ci"'),
], ids=["other-user", "group", "uid", "service-account"])
def test_refused_impersonation(user, headers, message):
    """Each user, group, uid and extra is checked; a refusal names it in Kubernetes' 403 text."""
    with pytest.raises(Forbidden) as caught:
        check(headers, user, _authorizer())
    assert caught.value.message == message


def test_allowed_by_resource_name():
    """A rule with resourceNames lets alice impersonate bob only."""
    assert check(_headers(("Impersonate-User", "bob")), ALICE, _authorizer()).name == "bob"


def test_no_headers_and_groups_without_user():
    """No headers: the user as authenticated. Groups without a user: refused as kube-apiserver refuses it."""
    assert not has_headers(_headers(("Authorization", "Bearer x")))
    assert check(_headers(), ALICE, _authorizer()) is ALICE
    with pytest.raises(ImpersonationError, match="requested group devs without impersonating a user"):
        check(_headers(("Impersonate-Group", "devs")), ADMIN, _authorizer())
