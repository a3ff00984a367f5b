"""The Authorizer reads roles and bindings through the API: cached by informers (a change is seen within a second)
or listed once (the CLI); it never reads the store per request."""

from __future__ import annotations

import time

from kctl.kubeapi.authn import UserInfo
from kctl.kubeapi.authz import Attributes, Authorizer

ALICE = UserInfo("alice", ("system:authenticated",))
GET_PODS = Attributes(user=ALICE, verb="get", namespace="a", api_version="v1", resource="pods")


def _grant(api) -> None:
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "reader", "namespace": "a"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "alice-reads", "namespace": "a"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})


def _eventually(fn, *, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(0.02)
    return fn()


def test_cached_authorizer_follows_changes(api):
    """A binding made, its role's rules changed and the binding deleted each change the answer promptly."""
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
    authorizer = Authorizer(api)
    try:
        assert authorizer.authorize(GET_PODS) == (False, "")
        _grant(api)
        assert _eventually(lambda: authorizer.authorize(GET_PODS)[0]), "a new binding is seen"
        rt = api.resource("roles.rbac.authorization.k8s.io")
        api.patch(rt, "reader", {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]},
                  patch_type="merge", namespace="a")
        assert _eventually(lambda: not authorizer.authorize(GET_PODS)[0]), "a role's new rules are seen"
        api.delete(api.resource("rolebindings.rbac.authorization.k8s.io"), "alice-reads", namespace="a")
        listing = Attributes(user=ALICE, verb="list", namespace="a", api_version="v1", resource="pods")
        assert _eventually(lambda: not authorizer.authorize(listing)[0]), "a deleted binding is seen"
    finally:
        authorizer.stop()


def test_cached_authorizer_lists_once(api, monkeypatch):
    """Requests after the first are answered from the cache: the API's list is not called again."""
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
    _grant(api)
    authorizer = Authorizer(api)
    try:
        assert authorizer.authorize(GET_PODS)[0]
        calls: list[object] = []
        real = api.list
        monkeypatch.setattr(api, "list", lambda *a, **k: calls.append(a) or real(*a, **k))
        for _ in range(50):
            assert authorizer.authorize(GET_PODS)[0]
        assert calls == []
    finally:
        authorizer.stop()


def test_listed_authorizer_reads_the_store_as_it_is(api):
    """cached=False (the CLI's one answer) lists the roles and bindings when asked."""
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
    _grant(api)
    assert Authorizer(api, cached=False).authorize(GET_PODS)[0]
