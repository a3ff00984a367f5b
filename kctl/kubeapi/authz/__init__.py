"""Authorization of the HTTPS API's requests: who may do what, and Kubernetes' 403 text when they may not.

kctl.kubeapi.app builds one `Authorizer(api)` per server and, after authentication, asks
`authorize(Attributes(...))` for every request; a denial is answered 403 with `forbidden_message(attrs)`
(`pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "other"`).
The access reviews (kctl.kubeapi.authz.reviews) and `kctl auth can-i` (kctl.cli.auth) ask the same object.

As kube-apiserver's `--authorization-mode=RBAC` with its privileged group: members of `system:masters` may do
everything (no rule is read), everyone else gets what RBAC (kctl.kubeapi.authz.rbac) allows. Local SQLite
access is not authorized at all: root on the host is admin (docs/security.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from kctl.kubeapi.authz.rbac import RBAC, CachedPolicy, ListedPolicy

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.kubeapi.authn import UserInfo
    from kctl.kubeapi.authz.rbac import PolicySource, User

#: kube-apiserver's privileged group: always allowed
SYSTEM_MASTERS = "system:masters"
#: what a privileged user's rules review lists
_ALL_RESOURCES = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
_ALL_PATHS = {"verbs": ["*"], "nonResourceURLs": ["*"]}


@dataclass(frozen=True)
class Attributes:
    """One request as authorization sees it (Kubernetes' authorizer.Attributes)."""

    user: User
    verb: str
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""
    resource_request: bool = True


@dataclass(frozen=True)
class RulesReview:
    """What a user may do in a namespace: SelfSubjectRulesReview's status."""

    resource_rules: tuple[dict, ...]
    non_resource_rules: tuple[dict, ...]
    errors: tuple[str, ...] = ()


class Authorizer:
    """system:masters, then RBAC; the roles and bindings cached by informers (or listed once: cached=False)."""

    def __init__(self, api: API | None, *, cached: bool = True, policy: PolicySource | None = None) -> None:
        """`policy`: where roles and bindings come from (default: read through `api`, cached or listed)."""
        self.api = api
        if policy is None:
            if api is None:
                raise ValueError("an Authorizer needs an API or a policy source")
            policy = CachedPolicy(api) if cached else ListedPolicy(api)
        self.policy = policy
        self.rbac = RBAC(policy)

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason) for one request."""
        if SYSTEM_MASTERS in attrs.user.groups:
            return True, ""
        return self.rbac.authorize(attrs)

    def rules_for(self, user: User, namespace: str) -> RulesReview:
        """Every rule that applies to the user in the namespace, split as SelfSubjectRulesReview lists them."""
        resource: list[dict] = []
        non_resource: list[dict] = []
        if SYSTEM_MASTERS in user.groups:
            resource.append(dict(_ALL_RESOURCES))
            non_resource.append(dict(_ALL_PATHS))
        found = self.rbac.rules_for(user, namespace)
        for rule in found.rules:
            if rule.get("resources") or rule.get("apiGroups"):
                resource.append(_resource_rule(rule))
            if rule.get("nonResourceURLs"):
                non_resource.append({"verbs": list(rule.get("verbs") or []),
                                     "nonResourceURLs": list(rule.get("nonResourceURLs") or [])})
        return RulesReview(tuple(resource), tuple(non_resource), found.errors)

    def start(self) -> None:
        """Read the roles and bindings now (else the first request does)."""
        if isinstance(self.policy, CachedPolicy):
            self.policy.start()

    def stop(self) -> None:
        """Stop watching roles and bindings."""
        if isinstance(self.policy, CachedPolicy):
            self.policy.stop()


def impersonated_user(name: str, groups: Sequence[str] = (), *, uid: str = "",
                      extra: dict[str, tuple[str, ...]] | None = None) -> UserInfo:
    """The user a request made `--as NAME --as-group G` acts as, with the groups kube-apiserver's impersonation
    filter adds: a ServiceAccount's groups when none are given, and system:authenticated (system:unauthenticated
    for system:anonymous) unless one of the two is given."""
    from kctl.kubeapi.authn import UserInfo

    out = list(dict.fromkeys(groups))
    prefix = "system:serviceaccount:"
    if name.startswith(prefix) and not out and name.count(":") == 3:
        namespace = name[len(prefix):].split(":", 1)[0]
        out = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    if name == "system:anonymous":
        if "system:unauthenticated" not in out:
            out.append("system:unauthenticated")
    elif "system:authenticated" not in out and "system:unauthenticated" not in out:
        out.append("system:authenticated")
    return UserInfo(name=name, groups=tuple(out), uid=uid, extra=dict(extra or {}))


def _resource_rule(rule: dict) -> dict:
    out = {"verbs": list(rule.get("verbs") or []), "apiGroups": list(rule.get("apiGroups") or []),
           "resources": list(rule.get("resources") or [])}
    if rule.get("resourceNames"):
        out["resourceNames"] = list(rule["resourceNames"])
    return out


def denial_text(attrs: Attributes) -> str:
    """Kubernetes' forbiddenMessage: `User "alice" cannot list resource "pods" in API group "" in the
    namespace "a"` (`at the cluster scope` without a namespace; `cannot get path "/foo"` for a path)."""
    user = _q(attrs.user.name)
    if not attrs.resource_request:
        text = f"User {user} cannot {attrs.verb} path {_q(attrs.path)}"
    else:
        resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        where = f"in the namespace {_q(attrs.namespace)}" if attrs.namespace else "at the cluster scope"
        text = f"User {user} cannot {attrs.verb} resource {_q(resource)} in API group {_q(attrs.api_group)} {where}"
    return _sanitize(text)


def _q(text: str) -> str:
    """Go's %q of a string (JSON's quoting: the same for every name Kubernetes allows)."""
    return json.dumps(text, ensure_ascii=False)


def _sanitize(text: str) -> str:
    """kube-apiserver escapes &, < and > in the text (it may be shown in HTML)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def forbidden_message(attrs: Attributes, reason: str = "") -> str:
    """The message of a 403 Status as kube-apiserver writes it (apierrors.NewForbidden around the text):
    `pods "web" is forbidden: User ...`, `forbidden: User "x" cannot get path "/foo"`; a non-empty
    authorizer reason follows after ": "."""
    text = denial_text(attrs)
    if reason:
        text = f"{text}: {reason}"
    if not attrs.resource_request or not attrs.resource:
        return f"forbidden: {text}"
    group_resource = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    if attrs.name:
        return f"{group_resource} {_q(attrs.name)} is forbidden: {text}"
    return f"{group_resource} is forbidden: {text}"


def forbidden_details(attrs: Attributes) -> dict:
    """The Status details of that 403 (Kubernetes puts the resource in `kind`)."""
    details = {"group": attrs.api_group, "kind": attrs.resource}
    if attrs.name:
        details["name"] = attrs.name
    return {k: v for k, v in details.items() if v}


__all__ = ["Attributes", "Authorizer", "RulesReview", "SYSTEM_MASTERS", "denial_text", "forbidden_details",
           "forbidden_message", "impersonated_user"]
