"""User impersonation (`kubectl --as USER --as-group G`): the Impersonate-* headers, as kube-apiserver's filter.

kctl.kubeapi.app calls `apply(request, ctx, user)` after authentication and before authorization. Without
Impersonate-* headers the user is returned as it is. With them, the authenticated user must be allowed the
verb `impersonate` on each thing asked for (checked with the server's Authorizer, kctl.kubeapi.authz):
`users` NAME (or `serviceaccounts` NAME in namespace NS for `system:serviceaccount:NS:NAME`), `groups` G,
`uids` (authentication.k8s.io) UID, `userextras/KEY` (authentication.k8s.io) VALUE; the request then acts
as the impersonated user, with the groups kube-apiserver adds (`impersonated_user`). A refusal is 403 with
Kubernetes' text (`users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group ""
at the cluster scope`); groups, uid or extra without a user is refused as kube-apiserver refuses it.
"""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, Any

from kctl.machinery.errors import APIError, Forbidden

if TYPE_CHECKING:
    from kctl.kubeapi.authn import UserInfo
    from kctl.kubeapi.authz import Attributes, Authorizer

USER = "Impersonate-User"
GROUP = "Impersonate-Group"
UID = "Impersonate-Uid"
EXTRA_PREFIX = "Impersonate-Extra-"
AUTHENTICATION = "authentication.k8s.io"
SA_PREFIX = "system:serviceaccount:"


class ImpersonationError(APIError):
    """Groups, uid or extra asked for without a user (kube-apiserver answers 500 InternalError)."""

    reason, code, exit_code = "InternalError", 500, 1


def requested(headers: Any) -> tuple[str, list[str], str, dict[str, list[str]]]:
    """(user, groups, uid, extra) asked for by the headers (a multi-dict: `getall`)."""
    user = headers.get(USER, "") or ""
    groups = list(headers.getall(GROUP, [])) if hasattr(headers, "getall") else (
        [headers[GROUP]] if GROUP in headers else [])
    uid = headers.get(UID, "") or ""
    extra: dict[str, list[str]] = {}
    for name in headers.keys():
        if name.lower().startswith(EXTRA_PREFIX.lower()):
            key = urllib.parse.unquote(name[len(EXTRA_PREFIX):]).lower()
            values = headers.getall(name, []) if hasattr(headers, "getall") else [headers[name]]
            extra.setdefault(key, []).extend(v for v in values if v not in extra.get(key, []))
    return user, groups, uid, extra


def check(headers: Any, user: UserInfo, authorizer: Authorizer | None) -> UserInfo:
    """The user the request acts as (see the module docstring); Forbidden when one thing may not be impersonated
    (no authorizer: everything is allowed)."""
    from kctl.kubeapi.authz import Attributes, forbidden_message, impersonated_user

    name, groups, uid, extra = requested(headers)
    if not name:
        if groups or uid or extra:
            raise ImpersonationError(f"requested {_describe(groups, uid, extra)} without impersonating a user")
        return user

    def allow(attrs: Attributes) -> None:
        if authorizer is None:
            return
        allowed, reason = authorizer.authorize(attrs)
        if not allowed:
            raise Forbidden(forbidden_message(attrs, reason))

    def attrs(resource: str, value: str, *, group: str = "", namespace: str = "", sub: str = "") -> Attributes:
        return Attributes(user=user, verb="impersonate", namespace=namespace, api_group=group, resource=resource,
                          subresource=sub, name=value)

    if name.startswith(SA_PREFIX) and name.count(":") == 3:
        namespace, sa_name = name[len(SA_PREFIX):].split(":", 1)
        allow(attrs("serviceaccounts", sa_name, namespace=namespace))
    else:
        allow(attrs("users", name))
    for group in groups:
        allow(attrs("groups", group))
    if uid:
        allow(attrs("uids", uid, group=AUTHENTICATION))
    for key, values in extra.items():
        for value in values:
            allow(attrs("userextras", value, group=AUTHENTICATION, sub=key))
    return impersonated_user(name, groups, uid=uid, extra={k: tuple(v) for k, v in extra.items()})


def _describe(groups: list[str], uid: str, extra: dict[str, list[str]]) -> str:
    parts = [f"group {g}" for g in groups] + ([f"uid {uid}"] if uid else []) + [f"extra {k}" for k in extra]
    return ", ".join(parts)


def has_headers(headers: Any) -> bool:
    """Whether a request asks to impersonate anyone (cheap: no thread hop for ordinary requests)."""
    return any(name.lower().startswith("impersonate-") for name in headers.keys())


async def apply(request: Any, ctx: Any, user: UserInfo) -> UserInfo:
    """The user a request acts as: `user`, or the one its Impersonate-* headers name (Forbidden if not allowed)."""
    if not has_headers(request.headers):
        return user
    return await ctx.run(check, request.headers, user, ctx.authorizer)


__all__ = ["ImpersonationError", "apply", "check", "has_headers", "requested"]
