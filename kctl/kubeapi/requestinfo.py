"""What an HTTP request asks of the API, as kube-apiserver's RequestInfoFactory reads a path.

kctl.kubeapi.app parses every request with `parse` before authorization (RBAC needs the verb,
group, resource, namespace and name) and dispatch (kctl.kubeapi.resources and the subresource
handlers read the same RequestInfo). Resource paths: `/api/v1/...` (the core group) and
`/apis/GROUP/VERSION/...`, then `[namespaces/NS/]RESOURCE[/NAME[/SUBRESOURCE...]]`; anything
else (`/version`, `/healthz`, `/api`, `/apis/apps`, `/openapi/v2`) is a non-resource request
whose verb is the HTTP method in lower case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

API_PREFIXES = frozenset({"api", "apis"})
GROUPLESS_PREFIXES = frozenset({"api"})
#: subresources of a namespace that its path names right after the namespace's name
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
#: path prefixes after the version that are verbs (kctl serves none but watch; RBAC still names them)
SPECIAL_VERBS = frozenset({"watch", "proxy", "redirect"})
#: HTTP method -> verb of a resource request (GET becomes list/watch without a name)
_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class RequestInfo:
    """A request as Kubernetes' authorizers and handlers see it."""

    resource_request: bool
    path: str
    verb: str
    api_prefix: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    parts: tuple[str, ...] = ()


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def parse(method: str, path: str, query: Mapping[str, str] | None = None) -> RequestInfo:
    """The RequestInfo of a request (method, URL path, query parameters), as RequestInfoFactory.NewRequestInfo."""
    query = query or {}
    method = method.upper()
    non_resource = RequestInfo(resource_request=False, path=path, verb=method.lower())
    parts = [p for p in path.strip("/").split("/")] if path.strip("/") else []
    if not parts or parts[0] not in API_PREFIXES:
        return non_resource
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix not in GROUPLESS_PREFIXES:
        if len(parts) < 2:  # /apis, /apis/GROUP: discovery
            return non_resource
        group, parts = parts[0], parts[1:]
    if len(parts) < 1:  # /api
        return non_resource
    version, parts = parts[0], parts[1:]
    verb = _VERBS.get(method, method.lower())
    if parts and parts[0] in SPECIAL_VERBS:  # /watch/... (deprecated), /proxy/..., /redirect/...
        if len(parts) < 2:
            return non_resource
        verb, parts = parts[0], parts[1:]
    namespace = ""
    if parts and parts[0] == "namespaces":
        if len(parts) > 1:
            namespace = parts[1]
            if len(parts) > 2 and parts[2] not in NAMESPACE_SUBRESOURCES:
                parts = parts[2:]
    if not parts:  # /api/v1: the group-version's resource list (discovery)
        return RequestInfo(resource_request=False, path=path, verb=method.lower(), api_prefix=prefix,
                           api_group=group, api_version=version)
    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    subresource = parts[2] if len(parts) >= 3 else ""
    if not name and verb == "get":
        verb = "watch" if _truthy(query.get("watch")) else "list"
    if verb in ("list", "watch"):  # a list of one name is authorized as for that name (Kubernetes 1.27+)
        selected = _selected_name(query.get("fieldSelector") or "")
        if selected:
            name = selected
    if not name and verb == "delete":
        verb = "deletecollection"
    return RequestInfo(resource_request=True, path=path, verb=verb, api_prefix=prefix, api_group=group,
                       api_version=version, namespace=namespace, resource=resource, subresource=subresource,
                       name=name, parts=tuple(parts))


def _selected_name(field_selector: str) -> str:
    """The name a field selector pins (`metadata.name=web` alone, or with other terms), else ""."""
    for term in field_selector.split(","):
        key, sep, value = term.partition("=")
        if sep and key.strip() == "metadata.name" and not key.endswith("!"):
            return value.lstrip("=").strip()
    return ""


__all__ = ["RequestInfo", "parse"]
