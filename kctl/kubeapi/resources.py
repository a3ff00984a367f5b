"""The resource verbs of the HTTPS API: get, list, watch, create, update, patch, delete, deletecollection.

kctl.kubeapi.app dispatches every resource request here but the streaming subresources and the
access reviews. Paths are `/api/v1/...` and `/apis/GROUP/VERSION/...` for every kind of the API's
registry (CustomResourceDefinitions' kinds as soon as they are stored); each verb becomes one call
of kctl's API (kctl.apiserver.contract) on the server's worker pool, made as the request's user.
Subresources: `status` (get, update, patch), `scale` (autoscaling/v1 Scale of Deployments,
ReplicaSets and StatefulSets: kctl.client.scale), `pods/eviction` and `pods/binding` (create).

Answers are JSON (a client asking for protobuf first gets JSON, which kubectl accepts), a
meta.k8s.io/v1 Table when the Accept header asks for one (kctl.kubeapi.table), and errors are
Status objects (kctl.kubeapi.status). Watches are kctl.kubeapi.watch's.
"""

from __future__ import annotations

import copy
import json
import re
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kctl.kubeapi import params, status
from kctl.kubeapi.requestinfo import RequestInfo
from kctl.machinery.errors import APIError, BadRequest, Conflict, Invalid, NotFound

if TYPE_CHECKING:
    from kctl.kubeapi.app import ServerContext
    from kctl.machinery.resources import ResourceType

#: PATCH Content-Type -> kctl's patch type
PATCH_TYPES = {"application/json-patch+json": "json", "application/merge-patch+json": "merge",
               "application/strategic-merge-patch+json": "strategic"}
APPLY_PATCH = "application/apply-patch+yaml"
#: seconds a read with a resourceVersion newer than the store's waits for it (kube-apiserver: 3 s)
FUTURE_RV_WAIT = 3.0
_PATH_PART = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


class PathNotFound(APIError):
    """A resource path no kind answers to."""

    reason, code = "NotFound", 404

    def __init__(self) -> None:
        super().__init__("the server could not find the requested resource")


class MethodNotAllowed(APIError):
    """A verb the path does not support."""

    reason, code = "MethodNotAllowed", 405


class UnsupportedMediaType(APIError):
    """A body in a format the verb does not take."""

    reason, code = "UnsupportedMediaType", 415


# -- the kind a path names --------------------------------------------------------------------

def resource_type(api: Any, info: RequestInfo) -> ResourceType:
    """The kind of a resource path (group, version, plural); PathNotFound when none answers."""
    from kctl.kubeapi.versions import serves

    for rt in api.registry:  # (a version served by conversion, autoscaling/v1's HPA, names the stored kind)
        if rt.group == info.api_group and rt.plural == info.resource and serves(rt, info.api_version):
            if info.namespace and not rt.namespaced and info.resource != "namespaces":
                raise PathNotFound()
            return rt
    raise PathNotFound()


def _details(rt: ResourceType, name: str = "") -> dict:
    return {"name": name, "group": rt.group, "kind": rt.plural}


def _error(exc: APIError, rt: ResourceType | None, info: RequestInfo) -> web.Response:
    if rt is None or isinstance(exc, PathNotFound):
        return status.error_response(exc, name=None if isinstance(exc, PathNotFound) else (info.name or None))
    if isinstance(exc, Invalid) or status.names_an_object(exc.message):  # (maybe another object: a namespace)
        return status.error_response(exc)
    return status.error_response(exc, name=info.name or None, group=rt.group or None, kind=rt.plural)


# -- entry ------------------------------------------------------------------------------------

async def handle(request: web.Request, ctx: ServerContext, info: RequestInfo, user: Any) -> web.StreamResponse:
    """Answer one resource request (see the module docstring)."""
    rt = None
    try:
        rt = await ctx.run(resource_type, ctx.api, info)
        response = await _verb(request, ctx, info, rt)
        if info.api_version != rt.version:  # objects back at the request's version (kctl.kubeapi.versions)
            from kctl.kubeapi import versions

            response = versions.convert_response(response, rt, info)
        return response
    except APIError as exc:
        return _error(exc, rt, info)


async def _verb(request: web.Request, ctx: ServerContext, info: RequestInfo, rt: ResourceType) -> web.StreamResponse:
    sub = info.subresource
    if info.verb in ("update", "patch") and not info.name:
        raise MethodNotAllowed(f"the server does not allow this method on the requested resource ({request.method})")
    if sub == "":
        if info.verb == "get":
            return await get(request, ctx, info, rt)
        if info.verb == "list":
            return await list_(request, ctx, info, rt)
        if info.verb == "watch":
            from kctl.kubeapi import watch

            return await watch.handle(request, ctx, info, rt)
        if info.verb == "create":
            return await create(request, ctx, info, rt)
        if info.verb == "update":
            return await update(request, ctx, info, rt)
        if info.verb == "patch":
            return await patch(request, ctx, info, rt)
        if info.verb == "delete":
            return await delete(request, ctx, info, rt)
        if info.verb == "deletecollection":
            return await delete_collection(request, ctx, info, rt)
    elif sub == "status" and rt.has_status:
        if info.verb == "get":
            return await get(request, ctx, info, rt)
        if info.verb == "update":
            return await update(request, ctx, info, rt, subresource="status")
        if info.verb == "patch":
            return await patch(request, ctx, info, rt, subresource="status")
    elif sub == "scale":
        from kctl.client.scale import is_scalable

        if is_scalable(rt):
            return await scale(request, ctx, info, rt)
    elif sub == "eviction" and rt.group_kind == "Pod" and info.verb == "create":
        return await evict(request, ctx, info, rt)
    elif sub == "binding" and rt.group_kind == "Pod" and info.verb == "create":
        return await bind(request, ctx, info, rt)
    if sub and not _known_subresource(rt, sub):
        raise PathNotFound()
    raise MethodNotAllowed(f"the server does not allow this method on the requested resource ({request.method})")


def _known_subresource(rt: ResourceType, sub: str) -> bool:
    from kctl.client.scale import is_scalable

    return (sub == "status" and rt.has_status) or (sub == "scale" and is_scalable(rt)) \
        or (rt.group_kind == "Pod" and sub in ("eviction", "binding"))


def request_namespace(rt: ResourceType, info: RequestInfo) -> str | None:
    """The namespace of a request on rt: None (every namespace) for a namespaced list without one."""
    if not rt.namespaced:
        return ""
    return info.namespace or None


# -- reads ------------------------------------------------------------------------------------

def wants_table(request: web.Request) -> bool:
    """Whether the Accept header asks for a meta.k8s.io Table (`application/json;as=Table;v=v1;g=meta.k8s.io`)."""
    for media_range in request.headers.get("Accept", "").split(","):
        fields = {}
        for part in media_range.split(";")[1:]:
            key, _, value = part.strip().partition("=")
            fields[key.strip()] = value.strip()
        if fields.get("as") == "Table" and fields.get("g", "meta.k8s.io") == "meta.k8s.io":
            return True
    return False


def table_module() -> Any:
    try:
        from kctl.kubeapi import table
    except ImportError:
        return None
    return table if hasattr(table, "to_table") else None


def include_object(request: web.Request) -> str:
    """The Table's includeObject: None, Metadata (the default) or Object."""
    value = request.query.get("includeObject") or "Metadata"
    if value not in ("None", "Metadata", "Object"):
        raise BadRequest(f'includeObject: Unsupported value: "{value}": supported values: "Metadata", "None", '
                         '"Object"')
    return value


def table_of(request: web.Request, rt: ResourceType, objs: list[dict], list_meta: dict) -> dict | None:
    """The Table of objs when the request asks for one and kctl.kubeapi.table can make it, else None (blocking:
    a custom kind's columns are looked up)."""
    if not wants_table(request):
        return None
    table = table_module()
    if table is None:
        return None
    from kctl.kubeapi.app import CTX_KEY

    columns = table.printer_columns(request.app[CTX_KEY].api, rt) if rt.is_custom else None  # a CRD's columns
    return table.to_table(rt, objs, list_meta=list_meta, include_object=include_object(request), columns=columns)


async def wait_for_revision(ctx: ServerContext, revision: int) -> None:
    """Wait until the store has reached `revision` (a read NotOlderThan it); Timeout after FUTURE_RV_WAIT."""
    import asyncio

    from kctl.machinery.errors import Timeout

    loop = asyncio.get_running_loop()
    deadline = loop.time() + FUTURE_RV_WAIT
    while await ctx.run(ctx.api.revision) < revision:
        if loop.time() >= deadline:
            exc = Timeout(f"Too large resource version: {revision}, current: {await ctx.run(ctx.api.revision)}")
            raise exc
        await asyncio.sleep(0.05)


async def get(request: web.Request, ctx: ServerContext, info: RequestInfo, rt: ResourceType) -> web.Response:
    """GET one object (or its status)."""
    if not info.name:
        raise PathNotFound()
    rv = request.query.get("resourceVersion") or ""
    if rv.isdigit() and int(rv) > 0:
        await wait_for_revision(ctx, int(rv))
    if rt.namespaced and not info.namespace:
        raise PathNotFound()
    obj = await ctx.run(ctx.api.get, rt, info.name, namespace=request_namespace(rt, info) or "")
    table = await ctx.run(table_of, request, rt, [obj], {"resourceVersion": obj["metadata"].get(
        "resourceVersion", "")}) if wants_table(request) else None
    return status.json_response(table if table is not None else obj)


def object_key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def list_items(ctx: ServerContext, rt: ResourceType, info: RequestInfo,
               opts: params.ListOptions) -> tuple[list[dict], int]:
    """The objects a list selects (sorted by namespace and name) and the list's revision (blocking)."""
    items, revision = ctx.api.list(rt, namespace=request_namespace(rt, info), label_selector=opts.label_selector,
                                   field_selector=opts.field_selector)
    return sorted(items, key=object_key), revision


async def list_(request: web.Request, ctx: ServerContext, info: RequestInfo, rt: ResourceType) -> web.Response:
    """GET a collection: selectors, limit/continue, resourceVersion(Match), Table."""
    opts = params.list_options(request.query, kind=rt.kind)
    if opts.resource_version and opts.resource_version != "0" and opts.resource_version_match != "Exact":
        await wait_for_revision(ctx, int(opts.resource_version))
    items, revision = await ctx.run(list_items, ctx, rt, info, opts)
    if opts.resource_version_match == "Exact" and int(opts.resource_version) != revision:
        from kctl.machinery.errors import Gone

        raise Gone(f"too old resource version: {opts.resource_version} ({revision})")
    meta: dict = {"resourceVersion": str(revision)}
    if opts.continue_key is not None:
        items = [o for o in items if object_key(o) > opts.continue_key]
        meta["resourceVersion"] = str(opts.continue_revision)
        revision = opts.continue_revision or revision
    if opts.limit and len(items) > opts.limit:
        rest = len(items) - opts.limit
        items = items[:opts.limit]
        meta["continue"] = params.encode_continue(revision, object_key(items[-1]))
        meta["remainingItemCount"] = rest
    table = await ctx.run(table_of, request, rt, items, meta) if wants_table(request) else None
    if table is not None:
        return status.json_response(table)
    return status.json_response({"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta,
                                 "items": items})


# -- bodies -----------------------------------------------------------------------------------

async def read_body(request: web.Request) -> Any:
    """The request's body as JSON (or YAML or protobuf, by Content-Type: kctl.kubeapi.protobuf); BadRequest when it
    cannot be read."""
    ctype = request.content_type or "application/json"
    raw = await request.read()
    if not raw:
        raise BadRequest("the request has no body")
    if "protobuf" in ctype:  # kubectl's typed clients (create namespace, drain's evictions) send protobuf
        from kctl.kubeapi import protobuf

        return protobuf.decode(raw)
    if "yaml" in ctype:
        import yaml

        try:
            return yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise BadRequest(f"the body is not valid YAML: {str(exc).splitlines()[0]}") from None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from None


def _check_object(body: Any, rt: ResourceType, info: RequestInfo) -> dict:
    """The body as an object of rt for the request's namespace (and name); BadRequest otherwise."""
    if not isinstance(body, dict):
        raise BadRequest(f"the body must be a {rt.kind} object")
    obj = dict(body)
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    expected = f"{rt.group}/{info.api_version}" if rt.group and info.api_version else rt.api_version
    if not api_version:
        obj["apiVersion"] = expected
    elif api_version != expected:
        raise BadRequest(f"the API version in the data ({api_version}) does not match the expected API version "
                         f"({expected})")
    if not kind:
        obj["kind"] = rt.kind
    elif kind != rt.kind:
        raise BadRequest(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise BadRequest("metadata must be an object")
    meta = obj["metadata"] = dict(meta)
    if rt.namespaced:
        given = meta.get("namespace")
        if given and info.namespace and given != info.namespace:
            raise BadRequest("the namespace of the provided object does not match the namespace sent on the request")
        if info.namespace:
            meta["namespace"] = info.namespace
    if expected != rt.api_version:  # at a version served by conversion: the stored version from here on
        from kctl.machinery.conversion import to_storage

        obj = to_storage(obj, rt)
    return obj


def _split_path(path: str) -> list[str | int]:
    return [int(index) if index else key for index, key in _PATH_PART.findall(path)]


def _drop(obj: Any, path: list[str | int]) -> None:
    for part in path[:-1]:
        try:
            obj = obj[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(obj, dict):
        obj.pop(path[-1], None)


def unknown_fields(obj: dict, rt: ResourceType) -> list[str]:
    """The paths of the fields obj's schema does not know (kctl's admission refuses them)."""
    from kctl.admission.validation.schema import schema_errors

    return [e.path for e in schema_errors(obj, rt) if e.message.startswith("unknown field")]


def prepare_fields(obj: dict, rt: ResourceType, validation: str) -> tuple[dict, list[str]]:
    """Strict: obj unchanged (an unknown field is refused); Warn/Ignore: obj without its unknown fields, and
    (Warn) a warning for each, as Kubernetes' fieldValidation."""
    if validation == "Strict":
        return obj, []
    found = unknown_fields(obj, rt)
    if not found:
        return obj, []
    obj = copy.deepcopy(obj)
    for path in found:
        _drop(obj, _split_path(path))
    return obj, ([f'unknown field "{path}"' for path in found] if validation == "Warn" else [])


def strict_error(exc: APIError) -> APIError:
    """An Invalid that only names unknown fields becomes Kubernetes' strict decoding BadRequest."""
    if isinstance(exc, Invalid) and exc.causes and all(c.message.startswith("unknown field") for c in exc.causes):
        return BadRequest("strict decoding error: " + ", ".join(f'unknown field "{c.path}"' for c in exc.causes))
    return exc


def _warn(messages: list[str]) -> None:
    from kctl.kubeapi import admissionwarnings

    for message in messages:
        admissionwarnings.add(message)


# -- writes -----------------------------------------------------------------------------------

async def create(request: web.Request, ctx: ServerContext, info: RequestInfo, rt: ResourceType) -> web.Response:
    """POST a new object (201 Created)."""
    opts = params.write_options(request.query)
    obj = _check_object(await read_body(request), rt, info)
    obj, warnings = prepare_fields(obj, rt, opts.field_validation)
    _warn(warnings)
    try:
        created = await ctx.run(ctx.api.create, obj, namespace=info.namespace or None, dry_run=opts.dry_run)
    except APIError as exc:
        raise strict_error(exc) from None
    return status.json_response(created, status=201)


async def update(request: web.Request, ctx: ServerContext, info: RequestInfo, rt: ResourceType, *,
                 subresource: str | None = None) -> web.Response:
    """PUT an object (or its status) over the stored one; a resourceVersion in it is a precondition."""
    opts = params.write_options(request.query)
    obj = _check_object(await read_body(request), rt, info)
    name = obj["metadata"].get("name")
    if name and name != info.name:
        raise BadRequest(f"the name of the object ({name}) does not match the name on the URL ({info.name})")
    obj["metadata"]["name"] = info.name
    obj, warnings = prepare_fields(obj, rt, opts.field_validation)
    _warn(warnings)
    try:
        updated = await ctx.run(ctx.api.update, obj, namespace=info.namespace or None, subresource=subresource,
                                dry_run=opts.dry_run)
    except APIError as exc:
        raise strict_error(exc) from None
    return status.json_response(updated)


async def patch(request: web.Request, ctx: ServerContext, info: RequestInfo, rt: ResourceType, *,
                subresource: str | None = None) -> web.Response:
    """PATCH an object (or its status): json, merge and strategic merge patches, and server-side apply."""
    opts = params.write_options(request.query)
    ctype = request.content_type
    if ctype == APPLY_PATCH:
        return await apply_patch(request, ctx, info, rt, opts, subresource=subresource)
    patch_type = PATCH_TYPES.get(ctype)
    if patch_type is None or (patch_type == "strategic" and rt.is_custom):
        accepted = ", ".join(t for t, p in PATCH_TYPES.items() if p != "strategic" or not rt.is_custom)
        raise UnsupportedMediaType(f"the body of the request was in an unknown format - accepted media types "
                                   f"include: {accepted}, {APPLY_PATCH}")
    body = await read_body(request)
    if info.api_version != rt.version:  # the patch applies to the object at the request's version
        from kctl.kubeapi import versions

        return status.json_response(await ctx.run(versions.patch_at_version, ctx, rt, info, body, patch_type,
                                                  subresource=subresource, dry_run=opts.dry_run))
    try:
        patched = await ctx.run(ctx.api.patch, rt, info.name, body, patch_type=patch_type,
                                namespace=info.namespace or None, subresource=subresource, dry_run=opts.dry_run)
    except APIError as exc:
        exc = strict_error(exc)
        if opts.field_validation == "Strict" or not (isinstance(exc, BadRequest) and "strict decoding" in exc.message):
            raise exc from None
        patched = await ctx.run(patch_without_unknown_fields, ctx, rt, info, body, patch_type, opts,
                                subresource=subresource)
    return status.json_response(patched)


#: how many times a patch whose unknown fields were dropped is tried against a newer object
PATCH_ATTEMPTS = 5


def patch_without_unknown_fields(ctx: ServerContext, rt: ResourceType, info: RequestInfo, body: Any, patch_type: str,
                                 opts: params.WriteOptions, *, subresource: str | None = None) -> dict:
    """fieldValidation Warn/Ignore for a patch that adds unknown fields: the patched object without them (a
    Warning each for Warn), written as an update pinned to the object patched (blocking)."""
    from kctl.machinery import patch as patching

    namespace = info.namespace or None
    for attempt in range(PATCH_ATTEMPTS):
        current = ctx.api.get(rt, info.name, namespace=namespace)
        if patch_type == "json":
            new = patching.json_patch(current, body)
        elif not isinstance(body, dict):
            raise BadRequest(f"a {'merge' if patch_type == 'merge' else 'strategic merge'} patch must be a JSON "
                             "object")
        elif patch_type == "merge":
            new = patching.merge_patch(current, body)
        else:
            new = patching.strategic_merge_patch(current, body, ctx.api.schema_of(rt))
        new, warnings = prepare_fields(new, rt, opts.field_validation)
        if not isinstance(new.get("metadata"), dict):
            raise BadRequest("the patch removed metadata")
        pinned = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        new["metadata"]["resourceVersion"] = pinned or current["metadata"]["resourceVersion"]
        try:
            updated = ctx.api.update(new, namespace=namespace, subresource=subresource, dry_run=opts.dry_run)
        except Conflict:
            if pinned or attempt == PATCH_ATTEMPTS - 1:
                raise
            continue
        _warn(warnings)
        return updated
    raise Conflict(f'Operation cannot be fulfilled on {rt.group_resource} "{info.name}"')  # (not reached)


async def apply_patch(request: web.Request, ctx: ServerContext, info: RequestInfo, rt: ResourceType,
                      opts: params.WriteOptions, *, subresource: str | None = None) -> web.Response:
    """Server-side apply (application/apply-patch+yaml): the API's apply_server_side, where it has one."""
    apply_server_side = getattr(ctx.api, "apply_server_side", None)
    if apply_server_side is None:
        raise UnsupportedMediaType("server-side apply is not supported by this server yet: use client-side "
                                   "apply (kubectl apply without --server-side)")
    body = _check_object(await read_body(request), rt, info)
    name = body["metadata"].get("name")
    if name and name != info.name:
        raise BadRequest(f"the name of the object ({name}) does not match the name on the URL ({info.name})")
    body["metadata"]["name"] = info.name
    if not opts.field_manager:
        raise BadRequest("PATCH requests with an apply patch require a fieldManager")
    body, warnings = prepare_fields(body, rt, opts.field_validation)
    _warn(warnings)
    kwargs: dict = {"namespace": info.namespace or None, "field_manager": opts.field_manager,
                    "force": opts.force, "dry_run": opts.dry_run}
    if subresource:
        raise BadRequest(f"server-side apply of the {subresource} subresource is not supported: apply the object")
    existed = await ctx.run(ctx.api.find, rt, info.name, namespace=info.namespace or None)
    try:
        result = await ctx.run(apply_server_side, rt, info.name, body, **kwargs)
    except APIError as exc:
        raise strict_error(exc) from None
    obj = getattr(result, "obj", result)
    _warn(list(getattr(result, "warnings", None) or []))
    return status.json_response(obj, status=200 if existed is not None else 201)  # 201: the apply created it


async def delete(request: web.Request, ctx: ServerContext, info: RequestInfo, rt: ResourceType) -> web.Response:
    """DELETE an object: the object while its deletion is pending (finalizers, a pod's grace), else a Status."""
    body = await _optional_body(request)
    opts = params.delete_options(request.query, body)
    obj = await ctx.run(delete_one, ctx, rt, info.name, info.namespace or None, opts)
    if opts.dry_run:
        return status.json_response(obj)
    still = await ctx.run(ctx.api.find, rt, info.name, namespace=info.namespace or None)
    if still is not None and still["metadata"].get("uid") == obj["metadata"].get("uid"):
        return status.json_response(still)
    details = _details(rt, info.name)
    details["uid"] = obj["metadata"].get("uid", "")
    return status.json_response(status.success(details=details))


def delete_one(ctx: ServerContext, rt: ResourceType, name: str, namespace: str | None,
               opts: params.DeleteOptions) -> dict:
    """One delete with its preconditions (uid, resourceVersion), blocking."""
    if opts.uid is not None:
        current = ctx.api.get(rt, name, namespace=namespace)
        if current["metadata"].get("uid") != opts.uid:
            raise Conflict(f'Operation cannot be fulfilled on {rt.group_resource} "{name}": Precondition failed: '
                           f'UID in precondition: {opts.uid}, UID in object meta: {current["metadata"].get("uid")}')
    if opts.resource_version is not None:
        current = ctx.api.get(rt, name, namespace=namespace)
        found = current["metadata"].get("resourceVersion")
        if found != opts.resource_version:
            raise Conflict(f'Operation cannot be fulfilled on {rt.group_resource} "{name}": Precondition failed: '
                           f'ResourceVersion in precondition: {opts.resource_version}, ResourceVersion in object '
                           f'meta: {found}')
    return ctx.api.delete(rt, name, namespace=namespace, propagation=opts.propagation,
                          grace_period=opts.grace_period, resource_version=opts.resource_version,
                          dry_run=opts.dry_run)


async def _optional_body(request: web.Request) -> Any:
    if not request.can_read_body:
        return None
    raw = await request.read()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise BadRequest(f"the body is not a valid DeleteOptions object: {exc}") from None


async def delete_collection(request: web.Request, ctx: ServerContext, info: RequestInfo,
                            rt: ResourceType) -> web.Response:
    """DELETE a collection (selectors as a list's): the list of what was deleted."""
    body = await _optional_body(request)
    opts = params.delete_options(request.query, body)
    selection = params.list_options(request.query, kind=rt.kind)

    def run() -> tuple[list[dict], int]:
        items, revision = list_items(ctx, rt, info, selection)
        done = []
        for obj in items:
            meta = obj["metadata"]
            try:
                done.append(ctx.api.delete(rt, meta["name"], namespace=meta.get("namespace") or None,
                                           propagation=opts.propagation, grace_period=opts.grace_period,
                                           dry_run=opts.dry_run))
            except NotFound:
                continue
        return done, revision

    deleted, revision = await ctx.run(run)
    return status.json_response({"kind": f"{rt.kind}List", "apiVersion": rt.api_version,
                                 "metadata": {"resourceVersion": str(revision)}, "items": deleted})


# -- subresources -----------------------------------------------------------------------------

async def scale(request: web.Request, ctx: ServerContext, info: RequestInfo, rt: ResourceType) -> web.Response:
    """deployments|replicasets|statefulsets/scale: get, update and patch an autoscaling/v1 Scale."""
    from kctl.client import scale as scaling

    namespace = info.namespace or None
    if info.verb == "get":
        return status.json_response(await ctx.run(scaling.get_scale, ctx.api, rt, info.name, namespace=namespace))
    opts = params.write_options(request.query)
    if info.verb == "update":
        body = await read_body(request)
        if not isinstance(body, dict) or body.get("kind", "Scale") != "Scale":
            raise BadRequest("the body must be an autoscaling/v1 Scale object")
        meta = dict(body.get("metadata") or {})
        if meta.get("name") and meta["name"] != info.name:
            raise BadRequest(f"the name of the object ({meta['name']}) does not match the name on the URL "
                             f"({info.name})")
        meta.update(name=info.name, namespace=info.namespace)
        body = {**body, "metadata": meta}
        return status.json_response(await ctx.run(scaling.update_scale, ctx.api, rt, body, dry_run=opts.dry_run))
    if info.verb == "patch":
        patch_type = PATCH_TYPES.get(request.content_type)
        if patch_type is None:
            raise UnsupportedMediaType("the body of the request was in an unknown format - accepted media types "
                                       "include: " + ", ".join(PATCH_TYPES))
        body = await read_body(request)

        def run() -> dict:
            from kctl.machinery import patch as patching

            current = scaling.get_scale(ctx.api, rt, info.name, namespace=namespace)
            if patch_type == "json":
                new = patching.json_patch(current, body)
            elif not isinstance(body, dict):
                raise BadRequest("a merge patch must be a JSON object")
            else:
                new = patching.merge_patch(current, body)
            new.setdefault("metadata", {}).update(name=info.name, namespace=info.namespace)
            pinned = isinstance(body, dict) and (body.get("metadata") or {}).get("resourceVersion")
            if not pinned:  # as Kubernetes: a patch without a resourceVersion applies to the current object
                new["metadata"].pop("resourceVersion", None)
            return scaling.update_scale(ctx.api, rt, new, dry_run=opts.dry_run)

        return status.json_response(await ctx.run(run))
    raise MethodNotAllowed(f"the server does not allow this method on the requested resource ({request.method})")


async def evict(request: web.Request, ctx: ServerContext, info: RequestInfo, rt: ResourceType) -> web.Response:
    """POST pods/NAME/eviction (policy/v1 Eviction): the pod goes unless a PodDisruptionBudget forbids it."""
    body = await read_body(request)
    if not isinstance(body, dict) or body.get("kind", "Eviction") != "Eviction":
        raise BadRequest("the body must be a policy/v1 Eviction object")
    name = (body.get("metadata") or {}).get("name")
    if name and name != info.name:
        raise BadRequest(f"name in URL does not match name in Eviction object ({info.name} != {name})")
    options = params.delete_options(request.query, body.get("deleteOptions") or None)
    result = await ctx.run(ctx.api.evict, info.namespace or None, info.name, grace_period=options.grace_period,
                           dry_run=options.dry_run)
    return status.json_response(result if isinstance(result, dict) and result.get("kind") == "Status"
                                else status.success(code=201), status=201)


async def bind(request: web.Request, ctx: ServerContext, info: RequestInfo, rt: ResourceType) -> web.Response:
    """POST pods/NAME/binding (v1 Binding): put the pod on the node its target names."""
    body = await read_body(request)
    if not isinstance(body, dict) or body.get("kind", "Binding") != "Binding":
        raise BadRequest("the body must be a v1 Binding object")
    target = body.get("target") or {}
    node = target.get("name") if isinstance(target, dict) else None
    if not node:
        raise Invalid(f'Binding "{info.name}"', "target.name: Required value")
    uid = (body.get("metadata") or {}).get("uid") or None
    await ctx.run(ctx.api.bind, info.namespace or "default", info.name, node, uid=uid)
    return status.json_response(status.success(code=201), status=201)


__all__ = ["handle", "read_body", "resource_type", "wants_table"]
