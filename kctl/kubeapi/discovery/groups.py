"""API discovery of the HTTPS API: `/api`, `/api/v1`, `/apis`, `/apis/GROUP`, `/apis/GROUP/VERSION`.

kctl.kubeapi.app's dispatch asks `handle(request, ctx)` for every non-resource path (None: not a
discovery path). The documents come from the catalog (kctl.kubeapi.discovery.catalog: built-in kinds, the
stored CRDs' served versions, the virtual review kinds) and are the ones kube-apiserver serves:
APIVersions, APIGroupList, APIGroup, APIResourceList (subresources as their own `pods/log`
entries), and, when the client asks for it in `Accept` (kubectl 1.30+ and client-go do),
aggregated discovery `apidiscovery.k8s.io/v2` (or v2beta1) `APIGroupDiscoveryList` for `/api` and
`/apis`, answered with that Content-Type. Bodies are built once per catalog and carry an ETag
(a matching `If-None-Match` gets 304).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from aiohttp import web

from kctl.kubeapi.discovery.catalog import Catalog, ServedResource, catalog_for

__all__ = ["aggregated", "api_group", "api_group_list", "api_resource_list", "api_versions", "handle",
           "negotiate"]

JSON = "application/json"
#: aggregated discovery versions kctl serves, preferred first
AGGREGATED_VERSIONS = ("v2", "v2beta1")


def negotiate(accept: str) -> str | None:
    """The aggregated discovery version (v2, v2beta1) an Accept header asks for before plain JSON, or None."""
    for entry in accept.split(","):
        media, *params = (p.strip() for p in entry.split(";"))
        values = dict(p.split("=", 1) for p in params if "=" in p)
        if media in (JSON, "*/*", "application/*") and not values.get("as"):
            return None
        if media == JSON and values.get("g") == "apidiscovery.k8s.io" and values.get("as") == "APIGroupDiscoveryList" \
                and values.get("v") in AGGREGATED_VERSIONS:
            return values["v"]
    return None


def api_versions(server_address: str) -> dict:
    """/api in the legacy format: the core group's versions."""
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group(catalog: Catalog, group: str) -> dict:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in catalog.versions(group)]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def api_group_list(catalog: Catalog) -> dict:
    """/apis in the legacy format: every named group."""
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group(catalog, group) for group, _ in catalog.groups if group]}


def api_group(catalog: Catalog, group: str) -> dict:
    """/apis/GROUP."""
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(catalog, group)}


def _resource_entries(r: ServedResource) -> list[dict]:
    entry: dict[str, Any] = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                             "kind": r.kind, "verbs": list(r.verbs)}
    if r.short_names:
        entry["shortNames"] = list(r.short_names)
    if r.categories:
        entry["categories"] = list(r.categories)
    if r.rt is not None:
        entry["storageVersionHash"] = r.storage_version_hash
    entries = [entry]
    for sub in r.subresources:
        sub_entry: dict[str, Any] = {"name": f"{r.plural}/{sub.name}", "singularName": "",
                                     "namespaced": r.namespaced, "kind": sub.kind, "verbs": list(sub.verbs)}
        if not sub.same_group:
            sub_entry = {**sub_entry, "group": sub.group, "version": sub.version}
        entries.append(sub_entry)
    return entries


def api_resource_list(catalog: Catalog, group: str, version: str) -> dict | None:
    """/api/v1 or /apis/GROUP/VERSION: the resources and subresources of one group-version (None if unserved)."""
    if version not in catalog.versions(group):
        return None
    resources = [entry for r in catalog.in_group_version(group, version) for entry in _resource_entries(r)]
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": resources}


def _aggregated_resource(r: ServedResource) -> dict:
    entry: dict[str, Any] = {
        "resource": r.plural,
        "responseKind": {"group": "", "version": "", "kind": r.kind},
        "scope": "Namespaced" if r.namespaced else "Cluster",
        "singularResource": r.singular,
        "verbs": list(r.verbs),
    }
    if r.short_names:
        entry["shortNames"] = list(r.short_names)
    if r.categories:
        entry["categories"] = list(r.categories)
    if r.subresources:
        entry["subresources"] = [
            {"subresource": sub.name,
             "responseKind": {"group": "" if sub.same_group else sub.group,
                              "version": "" if sub.same_group else sub.version, "kind": sub.kind},
             "verbs": list(sub.verbs)}
            for sub in r.subresources]
    return entry


def aggregated(catalog: Catalog, *, legacy: bool, version: str = "v2") -> dict:
    """APIGroupDiscoveryList of /api (legacy: the core group) or /apis (every named group)."""
    items = []
    for group, versions in catalog.groups:
        if (group == "") != legacy:
            continue
        metadata: dict[str, Any] = {"creationTimestamp": None}
        if group:
            metadata["name"] = group
        items.append({"metadata": metadata, "versions": [
            {"version": v, "resources": [_aggregated_resource(r) for r in catalog.in_group_version(group, v)],
             "freshness": "Current"}
            for v in versions]})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"apidiscovery.k8s.io/{version}", "metadata": {},
            "items": items}


def _body(catalog: Catalog, key: tuple, make: Any) -> tuple[bytes, str] | None:
    """The JSON bytes and ETag of a document, built once per catalog (None when make() answers None)."""

    def build() -> tuple[bytes, str] | None:
        document = make()
        if document is None:
            return None
        data = json.dumps(document, separators=(",", ":")).encode()
        return data, '"' + hashlib.sha256(data).hexdigest()[:32].upper() + '"'

    return catalog.remember(("discovery",) + key, build)


def _respond(request: web.Request, body: tuple[bytes, str] | None, content_type: str) -> web.Response:
    if body is None:
        from kctl.kubeapi import status

        return status.status_response(status.failure(404, "the server could not find the requested resource",
                                                     details={}))
    data, etag = body
    headers = {"ETag": etag, "Vary": "Accept", "Cache-Control": "no-cache, private"}
    if request.headers.get("If-None-Match") == etag:
        return web.Response(status=304, headers=headers)
    headers["Content-Type"] = content_type
    return web.Response(body=data, headers=headers)


def _route(path: str) -> tuple[str, ...] | None:
    """("api",), ("api", "v1"), ("apis",), ("apis", G), ("apis", G, V) for a discovery path, else None."""
    parts = tuple(p for p in path.strip("/").split("/") if p)
    if parts[:1] == ("api",) and len(parts) <= 2:
        return parts
    if parts[:1] == ("apis",) and len(parts) <= 3:
        return parts
    return None


async def handle(request: web.Request, ctx: Any) -> web.StreamResponse | None:
    """The discovery document of the path, or None when the path is not a discovery path."""
    if request.method not in ("GET", "HEAD"):
        return None
    parts = _route(request.path)
    if parts is None:
        return None
    catalog = await catalog_for(ctx)
    wanted = negotiate(request.headers.get("Accept", ""))
    if len(parts) == 1:
        legacy = parts[0] == "api"
        if wanted is not None:
            body = _body(catalog, ("aggregated", legacy, wanted),
                         lambda: aggregated(catalog, legacy=legacy, version=wanted))
            content_type = f"{JSON};g=apidiscovery.k8s.io;v={wanted};as=APIGroupDiscoveryList"
            return _respond(request, body, content_type)
        if legacy:
            return web.json_response(api_versions(request.host))
        return _respond(request, _body(catalog, ("groups",), lambda: api_group_list(catalog)), JSON)
    if parts[0] == "api":
        body = _body(catalog, ("resources", "", parts[1]), lambda: api_resource_list(catalog, "", parts[1]))
    elif len(parts) == 2:
        body = _body(catalog, ("group", parts[1]),
                     lambda: api_group(catalog, parts[1]) if catalog.versions(parts[1]) else None)
    else:
        body = _body(catalog, ("resources", parts[1], parts[2]),
                     lambda: api_resource_list(catalog, parts[1], parts[2]))
    return _respond(request, body, JSON)
