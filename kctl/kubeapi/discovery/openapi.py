"""OpenAPI of the HTTPS API: `/openapi/v2` and `/openapi/v3` (root and one document per group-version).

kctl.kubeapi.app's dispatch asks `handle(request, ctx)` for every non-resource path (None: not an
OpenAPI path). The documents are built from the catalog (kctl.kubeapi.discovery.catalog) and the schemas
(kctl.kubeapi.discovery.openapischemas: schemas/*.json for built-ins, a CRD's openAPIV3Schema for its
kinds), once per catalog, so a CRD created shows up at the next request.

What kubectl 1.32 reads from them: `kubectl explain` walks `/openapi/v3/apis/G/V`'s
`components.schemas` (the kind is the schema whose `x-kubernetes-group-version-kind` names it);
client-side `apply`/`edit`/`diff` compute a strategic merge patch from the same document's patch
extensions when the kind's PATCH operation accepts `application/strategic-merge-patch+json`
(custom kinds' do not: they get JSON merge patches, as from Kubernetes); and `--validate=strict`
leaves validation to the server when the PATCH operation lists the `fieldValidation` query
parameter. `/openapi/v2` is JSON, or gnostic's protobuf (kctl.kubeapi.discovery.openapiproto) for kubectl, which
fetches it only to validate on the client what the server cannot (a `kind: List` file) and for
`explain --output plaintext-openapiv2`; other media types get 406. The v3 root lists each group-version at
`/openapi/v3/<path>?hash=H` (H: the document's hash; such a URL is immutable and cached by
clients, an outdated hash redirects to the current one); every body has an ETag and is sent
gzip-compressed when the client accepts it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from typing import Any, Callable

from aiohttp import web

from kctl.kubeapi.discovery import openapiproto
from kctl.kubeapi.discovery import openapischemas as oas
from kctl.kubeapi.discovery.catalog import Catalog, ServedResource, catalog_for

__all__ = ["handle", "v2_document", "v3_document", "v3_root"]

JSON = "application/json"
_PATCH_TYPES = ("application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json",
                "application/strategic-merge-patch+json")
_RESPONSE_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
_PARAM_DOCS = {
    "allowWatchBookmarks": ("boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\"."),
    "continue": ("string", "The continue option should be set when retrieving more results from the server."),
    "dryRun": ("string", "When present, indicates that modifications should not be persisted. Valid values are: "
                         "- All: all dry run stages will be processed"),
    "fieldManager": ("string", "fieldManager is a name associated with the actor or entity that is making these "
                               "changes."),
    "fieldSelector": ("string", "A selector to restrict the list of returned objects by their fields."),
    "fieldValidation": ("string", "fieldValidation instructs the server on how to handle objects in the request "
                                  "(POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: "
                                  "Ignore, Warn, Strict."),
    "force": ("boolean", "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting "
                         "fields owned by other people."),
    "gracePeriodSeconds": ("integer", "The duration in seconds before the object should be deleted."),
    "labelSelector": ("string", "A selector to restrict the list of returned objects by their labels."),
    "limit": ("integer", "limit is a maximum number of responses to return for a list call."),
    "orphanDependents": ("boolean", "Deprecated: please use the PropagationPolicy."),
    "pretty": ("string", "If 'true', then the output is pretty printed."),
    "propagationPolicy": ("string", "Whether and how garbage collection will be performed: Orphan, Background, "
                                    "Foreground."),
    "resourceVersion": ("string", "resourceVersion sets a constraint on what resource versions a request may be "
                                  "served from."),
    "resourceVersionMatch": ("string", "resourceVersionMatch determines how resourceVersion is applied to list "
                                       "calls."),
    "sendInitialEvents": ("boolean", "`sendInitialEvents=true` may be set together with `watch=true`."),
    "timeoutSeconds": ("integer", "Timeout for the list/watch call."),
    "watch": ("boolean", "Watch for changes to the described resources and return them as a stream of add, "
                         "update, and remove notifications."),
}
_LIST_PARAMS = ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion",
                "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch")
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_DELETE_PARAMS = ("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy")
_COLLECTION_DELETE_PARAMS = ("continue", "dryRun", "fieldSelector", "gracePeriodSeconds", "labelSelector", "limit",
                             "orphanDependents", "propagationPolicy", "resourceVersion", "resourceVersionMatch",
                             "sendInitialEvents", "timeoutSeconds")


def _camel(group: str) -> str:
    """operationId's group-version word part: `Apps`, `RbacAuthorization`, `Core` for the core group."""
    if not group:
        return "Core"
    words = group.removesuffix(".k8s.io").replace("-", ".").split(".")
    return "".join(w[:1].upper() + w[1:] for w in words)


def _param(name: str, *, v3: bool, where: str = "query", required: bool = False, description: str = "") -> dict:
    kind, doc = _PARAM_DOCS.get(name, ("string", description))
    param: dict[str, Any] = {"name": name, "in": where, "description": description or doc}
    if required:
        param["required"] = True
    if v3:
        param["schema"] = {"type": kind, "uniqueItems": True}
    else:
        param.update({"type": kind, "uniqueItems": True})
    return param


def _schema_ref(name: str, *, v3: bool) -> dict:
    return {"$ref": ("#/components/schemas/" if v3 else "#/definitions/") + name}


def _responses(ref: str, *, v3: bool, codes: tuple[str, ...] = ("200",)) -> dict:
    out: dict[str, Any] = {}
    for code in codes:
        if v3:
            out[code] = {"description": "OK" if code == "200" else "Created" if code == "201" else "Accepted",
                         "content": {t: {"schema": _schema_ref(ref, v3=True)} for t in _RESPONSE_TYPES[:2]}}
        else:
            out[code] = {"description": "OK" if code == "200" else "Created" if code == "201" else "Accepted",
                         "schema": _schema_ref(ref, v3=False)}
    out["401"] = {"description": "Unauthorized"}
    return out


def _operation(*, v3: bool, op_id: str, action: str, description: str, gvk: dict, params: tuple[str, ...],
               response: str, codes: tuple[str, ...] = ("200",), body: str | None = None,
               body_types: tuple[str, ...] = ("*/*",), tag: str) -> dict:
    op: dict[str, Any] = {"description": description, "operationId": op_id, "tags": [tag],
                          "parameters": [_param(p, v3=v3) for p in params],
                          "responses": _responses(response, v3=v3, codes=codes),
                          "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk}
    if body is not None:
        if v3:
            op["requestBody"] = {"content": {t: {"schema": _schema_ref(body, v3=True)} for t in body_types},
                                 "required": True}
        else:
            op["parameters"].insert(0, {"name": "body", "in": "body", "required": True,
                                        "schema": _schema_ref(body, v3=False)})
            op["consumes"] = list(body_types)
    if not v3:
        op["produces"] = list(_RESPONSE_TYPES)
        op["schemes"] = ["https"]
    return op


def _paths(res: ServedResource, *, v3: bool) -> dict[str, dict]:
    """The REST paths of one resource (collection, item, status and scale), with their operations."""
    rt = res.rt
    if rt is None:
        return {}
    kind_def = oas.definition_name(rt.group, rt.version, rt.kind)
    list_def = kind_def + "List"
    gv = _camel(rt.group) + rt.version[:1].upper() + rt.version[1:]
    tag = f"{(rt.group or 'core').replace('.', '_')}_{rt.version}"
    gvk = {"group": rt.group, "kind": rt.kind, "version": rt.version}
    prefix = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    scope = "Namespaced" if rt.namespaced else ""
    collection = f"{prefix}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{prefix}/{rt.plural}"
    item = collection + "/{name}"
    verbs = set(res.verbs)
    path_params = [_param("name", v3=v3, where="path", required=True, description=f"name of the {rt.kind}")]
    if rt.namespaced:
        path_params.append(_param("namespace", v3=v3, where="path", required=True,
                                  description="object name and auth scope, such as for teams and projects"))
    common = [_param("pretty", v3=v3)]
    patch_types = _PATCH_TYPES if not rt.is_custom else tuple(t for t in _PATCH_TYPES if "strategic" not in t)
    paths: dict[str, dict] = {}

    coll: dict[str, Any] = {"parameters": path_params[1:] + common}
    if "list" in verbs:
        coll["get"] = _operation(v3=v3, op_id=f"list{gv}{scope}{rt.kind}", action="list", tag=tag, gvk=gvk,
                                 description=f"list or watch objects of kind {rt.kind}", params=_LIST_PARAMS,
                                 response=list_def)
    if "create" in verbs:
        coll["post"] = _operation(v3=v3, op_id=f"create{gv}{scope}{rt.kind}", action="post", tag=tag, gvk=gvk,
                                  description=f"create a {rt.kind}", params=_WRITE_PARAMS, response=kind_def,
                                  codes=("200", "201", "202"), body=kind_def)
    if "deletecollection" in verbs:
        coll["delete"] = _operation(v3=v3, op_id=f"deletecollection{gv}{scope}{rt.kind}", action="deletecollection",
                                    tag=tag, gvk=gvk, description=f"delete collection of {rt.kind}",
                                    params=_COLLECTION_DELETE_PARAMS, response=f"{oas.META}.Status",
                                    body=f"{oas.META}.DeleteOptions")
    if len(coll) > 1:
        paths[collection] = coll

    one: dict[str, Any] = {"parameters": path_params + common}
    if "get" in verbs:
        one["get"] = _operation(v3=v3, op_id=f"read{gv}{scope}{rt.kind}", action="get", tag=tag, gvk=gvk,
                                description=f"read the specified {rt.kind}", params=(), response=kind_def)
    if "update" in verbs:
        one["put"] = _operation(v3=v3, op_id=f"replace{gv}{scope}{rt.kind}", action="put", tag=tag, gvk=gvk,
                                description=f"replace the specified {rt.kind}", params=_WRITE_PARAMS,
                                response=kind_def, codes=("200", "201"), body=kind_def)
    if "patch" in verbs:
        one["patch"] = _operation(v3=v3, op_id=f"patch{gv}{scope}{rt.kind}", action="patch", tag=tag, gvk=gvk,
                                  description=f"partially update the specified {rt.kind}",
                                  params=_WRITE_PARAMS + ("force",), response=kind_def, codes=("200", "201"),
                                  body=f"{oas.META}.Patch", body_types=patch_types)
    if "delete" in verbs:
        one["delete"] = _operation(v3=v3, op_id=f"delete{gv}{scope}{rt.kind}", action="delete", tag=tag, gvk=gvk,
                                   description=f"delete a {rt.kind}", params=_DELETE_PARAMS,
                                   response=f"{oas.META}.Status", codes=("200", "202"),
                                   body=f"{oas.META}.DeleteOptions")
    if len(one) > 1:
        paths[item] = one

    if rt.namespaced and "list" in verbs:
        paths[f"{prefix}/{rt.plural}"] = {
            "parameters": common,
            "get": _operation(v3=v3, op_id=f"list{gv}{rt.kind}ForAllNamespaces", action="list", tag=tag, gvk=gvk,
                              description=f"list or watch objects of kind {rt.kind}", params=_LIST_PARAMS,
                              response=list_def)}

    for sub in res.subresources:
        if sub.name not in ("status", "scale"):
            continue
        response = kind_def if sub.name == "status" else "io.k8s.api.autoscaling.v1.Scale"
        sub_gvk = gvk if sub.name == "status" else {"group": "autoscaling", "kind": "Scale", "version": "v1"}
        word = sub.name.capitalize()
        paths[f"{item}/{sub.name}"] = {
            "parameters": path_params + common,
            "get": _operation(v3=v3, op_id=f"read{gv}{scope}{rt.kind}{word}", action="get", tag=tag, gvk=sub_gvk,
                              description=f"read {sub.name} of the specified {rt.kind}", params=(),
                              response=response),
            "put": _operation(v3=v3, op_id=f"replace{gv}{scope}{rt.kind}{word}", action="put", tag=tag,
                              gvk=sub_gvk, description=f"replace {sub.name} of the specified {rt.kind}",
                              params=_WRITE_PARAMS, response=response, codes=("200", "201"), body=response),
            "patch": _operation(v3=v3, op_id=f"patch{gv}{scope}{rt.kind}{word}", action="patch", tag=tag,
                                gvk=sub_gvk, description=f"partially update {sub.name} of the specified {rt.kind}",
                                params=_WRITE_PARAMS + ("force",), response=response, codes=("200", "201"),
                                body=f"{oas.META}.Patch", body_types=patch_types),
        }
    return paths


def _crd_schema(res: ServedResource) -> dict | None:
    for version in ((res.crd or {}).get("spec") or {}).get("versions") or ():
        if version.get("name") == res.version:
            return ((version.get("schema") or {}).get("openAPIV3Schema")) or None
    return None


def _definitions(catalog: Catalog, *, v3: bool) -> dict[str, dict]:
    """Every definition: the shared ones, each served kind's and its list's."""

    def build() -> dict[str, dict]:
        defs = dict(oas.builtin_definitions(v3))
        for res in catalog.resources:
            if res.rt is None:
                continue
            definition = oas.kind_definition(res.rt, v3=v3, crd_schema=_crd_schema(res))
            if definition is None:
                continue
            name = oas.definition_name(res.group, res.version, res.kind)
            defs[name] = definition
            defs[name + "List"] = oas.list_definition(res.rt, v3=v3)
        return defs

    return catalog.remember(("openapi-defs", v3), build)


def _info() -> dict:
    from kctl.kubeapi.discovery.version import git_version

    return {"title": "Kubernetes", "version": git_version()}


def v2_document(catalog: Catalog) -> dict:
    """The Swagger 2.0 document of everything served."""
    paths: dict[str, dict] = {}
    for res in catalog.resources:
        paths.update(_paths(res, v3=False))
    return {"swagger": "2.0", "info": _info(), "paths": dict(sorted(paths.items())),
            "definitions": _definitions(catalog, v3=False),
            "securityDefinitions": {"BearerToken": {"description": "Bearer Token authentication", "type": "apiKey",
                                                    "name": "authorization", "in": "header"}},
            "security": [{"BearerToken": []}]}


def _closure(defs: dict[str, dict], roots: set[str]) -> dict[str, dict]:
    """The named definitions and every definition they refer to, transitively."""
    wanted, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in wanted or name not in defs:
            continue
        wanted.add(name)
        todo.extend(oas.references(defs[name]) - wanted)
    return {name: defs[name] for name in sorted(wanted)}


def v3_document(catalog: Catalog, group: str, version: str) -> dict | None:
    """The OpenAPI 3.0 document of one group-version (None when nothing with a schema is served there)."""
    resources = [r for r in catalog.in_group_version(group, version) if r.rt is not None]
    if not resources:
        return None
    paths: dict[str, dict] = {}
    for res in resources:
        paths.update(_paths(res, v3=True))
    defs = _definitions(catalog, v3=True)
    roots = oas.references(paths) | {oas.definition_name(r.group, r.version, r.kind) for r in resources}
    return {"openapi": "3.0.0", "info": _info(), "paths": dict(sorted(paths.items())),
            "components": {"schemas": _closure(defs, roots),
                           "securitySchemes": {"BearerToken": {"type": "apiKey", "description": "Bearer Token "
                                                               "authentication", "name": "authorization",
                                                               "in": "header"}}}}


def _v3_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


class _Body:
    """A document's bytes, its gzip form and its hash (the ETag and v3's `?hash=`)."""

    def __init__(self, document: dict, *, encode: Callable[[dict], bytes] | None = None) -> None:
        self.data = encode(document) if encode is not None else json.dumps(document, separators=(",", ":")).encode()
        self.hash = hashlib.sha512(self.data).hexdigest().upper()
        self.etag = f'"{self.hash}"'
        self._gzip: bytes | None = None

    @property
    def gzipped(self) -> bytes:
        if self._gzip is None:
            self._gzip = gzip.compress(self.data, compresslevel=5)
        return self._gzip


def _v3_bodies(catalog: Catalog) -> dict[str, _Body]:
    """Every group-version's v3 document, by its path (`apis/apps/v1`)."""

    def build() -> dict[str, _Body]:
        bodies = {}
        for group, versions in catalog.groups:
            for version in versions:
                document = v3_document(catalog, group, version)
                if document is not None:
                    bodies[_v3_path(group, version)] = _Body(document)
        return bodies

    return catalog.remember(("openapi-v3",), build)


def v3_root(catalog: Catalog) -> dict:
    """/openapi/v3: each group-version's document path with its hash."""
    return {"paths": {path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={body.hash}"}
                      for path, body in _v3_bodies(catalog).items()}}


def _format(accept: str, *, protobuf: bool) -> str | None:
    """"json", "protobuf" (when offered) or None: the first media type of the Accept header kctl can answer."""
    if not accept.strip():
        return "json"
    for entry in accept.split(","):
        media = entry.split(";")[0].strip().lower()
        if media in ("application/json", "*/*", "application/*", "application/yaml"):
            return "json"
        if protobuf and media in openapiproto.ACCEPTED:
            return "protobuf"
    return None


def _respond(request: web.Request, body: _Body, *, cache: str, content_type: str = JSON) -> web.Response:
    headers = {"ETag": body.etag, "Cache-Control": cache, "Vary": "Accept, Accept-Encoding"}
    if request.headers.get("If-None-Match") == body.etag:
        return web.Response(status=304, headers=headers)
    headers["Content-Type"] = content_type
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        headers["Content-Encoding"] = "gzip"
        return web.Response(body=body.gzipped, headers=headers)
    return web.Response(body=body.data, headers=headers)


def _not_acceptable(accept: str) -> web.Response:
    from kctl.kubeapi import status

    return status.status_response(status.failure(406, f"only the following media types are accepted: {JSON}, "
                                                      f"{openapiproto.ACCEPTED[0]} (asked for: {accept})"))


async def handle(request: web.Request, ctx: Any) -> web.StreamResponse | None:
    """The OpenAPI document of the path, or None when the path is not an OpenAPI path."""
    path = request.path.rstrip("/")
    if request.method not in ("GET", "HEAD") or not (path == "/openapi/v2" or path.startswith("/openapi/v3")):
        return None
    accept = request.headers.get("Accept", "")
    wanted = _format(accept, protobuf=path == "/openapi/v2")
    if wanted is None:
        return _not_acceptable(accept)
    catalog = await catalog_for(ctx)
    if path == "/openapi/v2":
        if wanted == "protobuf":
            body = await ctx.run(catalog.remember, ("openapi-v2-protobuf",),
                                 lambda: _Body(v2_document(catalog), encode=openapiproto.encode))
            return _respond(request, body, cache="no-cache, private", content_type=openapiproto.CONTENT_TYPE)
        body = await ctx.run(catalog.remember, ("openapi-v2-body",), lambda: _Body(v2_document(catalog)))
        return _respond(request, body, cache="no-cache, private")
    bodies = await ctx.run(_v3_bodies, catalog)
    if path == "/openapi/v3":
        root = catalog.remember(("openapi-v3-root",), lambda: _Body(v3_root(catalog)))
        return _respond(request, root, cache="no-cache, private")
    body = bodies.get(path[len("/openapi/v3/"):])
    if body is None:
        from kctl.kubeapi import status

        return status.status_response(status.failure(404, "the server could not find the requested resource",
                                                     details={}))
    wanted = request.query.get("hash")
    if wanted is None:
        return _respond(request, body, cache="no-cache, private")
    if wanted != body.hash:
        raise web.HTTPMovedPermanently(location=f"{path}?hash={body.hash}")
    response = _respond(request, body, cache="public, immutable")
    response.headers["Expires"] = _a_year_from_now()
    return response


def _a_year_from_now() -> str:
    from email.utils import formatdate
    import time

    return formatdate(time.time() + 365 * 24 * 3600, usegmt=True)
