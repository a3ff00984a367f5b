"""Requests at a version a kind is served at by conversion (`/apis/autoscaling/v1/...horizontalpodautoscalers`).

kctl.kubeapi.resources calls it: a path at an extra version of a built-in kind
(kctl.machinery.conversion.EXTRA_VERSIONS) names the stored kind's ResourceType; the body a
client writes is converted to the stored version before the API sees it (`to_storage`), the
objects answered are converted back to the request's version (`convert_response`,
`convert_object` for watch events), and a patch is applied to the object as the client sees it
at its version (`patch_at_version`), as kube-apiserver does.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kctl.machinery import conversion
from kctl.machinery.errors import BadRequest, Conflict

if TYPE_CHECKING:
    from aiohttp import web

    from kctl.kubeapi.app import ServerContext
    from kctl.kubeapi.requestinfo import RequestInfo
    from kctl.machinery.resources import ResourceType

__all__ = ["convert_object", "convert_response", "is_converted", "patch_at_version", "request_api_version",
           "serves"]

#: how many times a patch at a converted version is tried against a newer object
PATCH_ATTEMPTS = 5


def serves(rt: ResourceType, version: str) -> bool:
    """Whether rt's kind is served at `version` (its stored version or one served by conversion)."""
    return version == rt.version or (not rt.is_custom and version in conversion.extra_versions(rt.group_kind))


def request_api_version(rt: ResourceType, info: RequestInfo) -> str:
    """The apiVersion of the objects of a request (the path's group and version)."""
    return f"{rt.group}/{info.api_version}" if rt.group else info.api_version


def is_converted(rt: ResourceType, info: RequestInfo) -> bool:
    """Whether the request is at a version other than rt's stored one."""
    return bool(info.api_version) and info.api_version != rt.version


def convert_object(obj: Any, rt: ResourceType, api_version: str) -> Any:
    """One object of rt's kind, a list or a Table of them, at api_version (anything else unchanged: a Status)."""
    if not isinstance(obj, dict):
        return obj
    if obj.get("kind") == rt.kind and obj.get("apiVersion") == rt.api_version:
        return conversion.convert(obj, api_version)
    if obj.get("kind") == f"{rt.kind}List" and isinstance(obj.get("items"), list):
        return {**obj, "apiVersion": api_version,
                "items": [convert_object(item, rt, api_version) for item in obj["items"]]}
    if obj.get("kind") == "Table" and isinstance(obj.get("rows"), list):  # includeObject=Object: the row's object
        return {**obj, "rows": [{**row, "object": convert_object(row["object"], rt, api_version)}
                                if isinstance(row, dict) and "object" in row else row for row in obj["rows"]]}
    return obj


def convert_response(response: web.StreamResponse, rt: ResourceType, info: RequestInfo) -> web.StreamResponse:
    """A JSON answer with its objects at the request's version (a streamed one is left alone: watch converts)."""
    from aiohttp import web

    body = getattr(response, "body", None) if isinstance(response, web.Response) else None
    if not isinstance(body, (bytes, bytearray)) or response.content_type != "application/json":
        return response
    try:
        obj = json.loads(body)
    except ValueError:
        return response
    converted = convert_object(obj, rt, request_api_version(rt, info))
    if converted is not obj:
        response.body = json.dumps(converted, separators=(",", ":")).encode()
    return response


def patch_at_version(ctx: ServerContext, rt: ResourceType, info: RequestInfo, body: Any, patch_type: str, *,
                     subresource: str | None, dry_run: bool) -> dict:
    """A json, merge or strategic merge patch applied to the object at the request's version, written as an
    update pinned to the object patched (retried against a newer one unless the patch pins a resourceVersion);
    the stored object it wrote (blocking)."""
    from kctl.machinery import patch as patching

    namespace = info.namespace or None
    api_version = request_api_version(rt, info)
    pinned = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) and \
        isinstance(body.get("metadata"), dict) else None
    for attempt in range(PATCH_ATTEMPTS):
        current = ctx.api.get(rt, info.name, namespace=namespace)
        view = conversion.convert(current, api_version)
        if patch_type == "json":
            new = patching.json_patch(view, body)
        elif not isinstance(body, dict):
            raise BadRequest(f"a {'merge' if patch_type == 'merge' else 'strategic merge'} patch must be a JSON "
                             "object")
        elif patch_type == "merge":
            new = patching.merge_patch(view, body)
        else:
            new = patching.strategic_merge_patch(view, body, ctx.api.schema_of(rt))
        if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
            raise BadRequest("the patch removed metadata")
        if new.get("apiVersion") != api_version or new.get("kind") != rt.kind:
            raise BadRequest("the patch changes apiVersion or kind, which must stay as in the request")
        for key in ("name", "namespace"):
            if new["metadata"].get(key) != current["metadata"].get(key):
                raise BadRequest(f"the patch changes metadata.{key}, which must stay as in the request")
        new["metadata"]["resourceVersion"] = pinned or current["metadata"]["resourceVersion"]
        try:
            return ctx.api.update(new, namespace=namespace, subresource=subresource, dry_run=dry_run)
        except Conflict:
            if pinned or attempt == PATCH_ATTEMPTS - 1:
                raise
    raise Conflict(f'Operation cannot be fulfilled on {rt.group_resource} "{info.name}"')  # (not reached)
