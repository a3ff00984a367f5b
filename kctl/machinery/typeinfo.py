"""What both API forms derive from a ResourceType alone: an object's namespace, a kind's merge schema.

Plain functions, no server state: kctl.apiserver.server.APIServer and
kctl.apiserver.remote.RemoteAPIServer both answer `namespace_of` and `schema_of` (kctl.apiserver.contract)
with them, so the remote client computes exactly what the control host would.
"""

from __future__ import annotations

from kctl.machinery.errors import BadRequest, FieldError, Invalid
from kctl.machinery.resources import ResourceType


def namespace_of(rt: ResourceType, namespace: str | None, meta: dict | None = None) -> str:
    """The namespace an object lives in ("" for cluster-scoped kinds).

    `namespace` is the request's (-n), `meta` the object's metadata; BadRequest when they
    disagree, as kubectl says it; "default" when neither names one.
    """
    if not rt.namespaced:
        return ""
    own = (meta or {}).get("namespace")
    if own and namespace and own != namespace:
        raise BadRequest(f'the namespace from the provided object "{own}" does not match the namespace '
                         f'"{namespace}". You must pass \'--namespace={own}\' to perform this operation.')
    ns = own or namespace or "default"
    if not isinstance(ns, str):
        raise Invalid(rt.group_kind, FieldError("metadata.namespace", "must be a string"))
    return ns


def schema_of(rt: ResourceType) -> dict | None:
    """The schema strategic merge patch and apply use for rt; None for custom kinds (JSON merge)."""
    if rt.is_custom:
        return None  # custom resources use JSON merge semantics, as in Kubernetes
    from kctl.machinery import schemas

    return schemas.load(rt)


__all__ = ["namespace_of", "schema_of"]
