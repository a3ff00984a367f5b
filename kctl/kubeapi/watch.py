"""WATCH over HTTPS: a chunked stream of `{"type": ..., "object": ...}` lines, as kube-apiserver sends.

kctl.kubeapi.resources hands a request here when its verb is watch (`?watch=true`, or the old
`/watch/` prefix). The events come from kctl.kubeapi.watchcache (one reader of the API's change log
per kind, shared by every watch of that kind: no thread per watch); the event loop writes them,
one JSON line each (a change is encoded once for all watches wanting the same form), and:
- without a resourceVersion (or with "0"), first ADDED events for every object that exists (the
  state at the list's revision), then the changes after it;
- with a resourceVersion, the changes after it; one older than the change log's compacted horizon
  is an ERROR event holding a 410 Expired Status, as Kubernetes;
- `sendInitialEvents=true` (with `resourceVersionMatch=NotOlderThan`): ADDED events for the current
  state, then a BOOKMARK annotated `k8s.io/initial-events-end: "true"`;
- `allowWatchBookmarks=true`: a BOOKMARK (the object's kind with only metadata.resourceVersion) when
  nothing was sent for ServerContext.bookmark_interval seconds;
- `timeoutSeconds` (default: a random 30-60 minutes, as kube-apiserver) ends the stream; so do the
  client closing it, the server stopping, and the client falling watchcache.WATCHER_QUEUE events
  behind (kube-apiserver ends such a watch too; the client watches again from its last revision).
A Table asked for in the Accept header makes each event's object a Table of one row.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from typing import TYPE_CHECKING

from aiohttp import web

from kctl.kubeapi import params, watchcache
from kctl.kubeapi.requestinfo import RequestInfo

if TYPE_CHECKING:
    from kctl.kubeapi.app import ServerContext
    from kctl.machinery.resources import ResourceType

log = logging.getLogger("kctl.kubeapi")

#: kube-apiserver's --min-request-timeout: a watch without timeoutSeconds lasts 1-2 times this
MIN_REQUEST_TIMEOUT = 1800.0
#: seconds between checks that the client is still there and the server is not stopping
LIVENESS_CHECK = 1.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def _line(event_type: str, obj: dict) -> bytes:
    return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"


def _matching_at(ctx: ServerContext, rt: ResourceType, info: RequestInfo, opts: params.ListOptions,
                 since: int) -> set:
    """The keys of the objects a selector watch from `since` knows matched then: those matching now and unchanged
    since (their later changes are MODIFIED, not ADDED, as Kubernetes reports them)."""
    from kctl.kubeapi import resources

    items, _ = resources.list_items(ctx, rt, info, opts)
    return {resources.object_key(o) for o in items
            if str((o.get("metadata") or {}).get("resourceVersion", "")).isdigit()
            and int(o["metadata"]["resourceVersion"]) <= since}


async def handle(request: web.Request, ctx: ServerContext, info: RequestInfo, rt: ResourceType) -> web.StreamResponse:
    """Stream the events of a watch request until its timeout, the client leaving, or the server stopping."""
    from kctl.kubeapi import resources

    opts = params.list_options(request.query, kind=rt.kind)
    namespace = resources.request_namespace(rt, info)
    initial: list[dict] = []
    known: set = set()
    send_initial = opts.send_initial_events if opts.send_initial_events is not None \
        else opts.resource_version in ("", "0")
    if send_initial:
        if opts.resource_version and opts.resource_version != "0":
            await resources.wait_for_revision(ctx, int(opts.resource_version))
        initial, since = await ctx.run(resources.list_items, ctx, rt, info, opts)
        known = {resources.object_key(o) for o in initial}
    elif opts.resource_version in ("", "0"):  # sendInitialEvents=false without a revision: from now on
        since = await ctx.run(ctx.api.revision)
    else:
        since = int(opts.resource_version)
        if opts.label_selector is not None or opts.field_selector is not None:
            known = await ctx.run(_matching_at, ctx, rt, info, opts, since)
    table = resources.wants_table(request) and resources.table_module() is not None
    include = resources.include_object(request) if table else "Metadata"
    columns = None
    if table and rt.is_custom:  # a CRD's printer columns (kctl.kubeapi.table)
        from kctl.kubeapi.table import printer_columns

        columns = await ctx.run(printer_columns, ctx.api, rt)

    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json",
                                                       "Cache-Control": "no-cache, private"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    loop = asyncio.get_running_loop()
    timeout = opts.timeout_seconds if opts.timeout_seconds else MIN_REQUEST_TIMEOUT * (1 + random.random())
    deadline = loop.time() + timeout
    last_rv = since
    first_table = True
    from kctl.kubeapi import versions

    at_version = versions.request_api_version(rt, info) if versions.is_converted(rt, info) else None

    def encode(event_type: str, obj: dict, shared: watchcache.Event | None = None) -> bytes:
        nonlocal first_table
        if shared is not None and not table:  # the same line for every watch of this form: encoded once
            if at_version is None:
                return shared.line(event_type)
            return shared.line(event_type, version=at_version,
                               convert=lambda o: versions.convert_object(o, rt, at_version))
        if table and event_type in ("ADDED", "MODIFIED", "DELETED"):
            from kctl.kubeapi.table import to_table

            obj = to_table(rt, [obj], list_meta={"resourceVersion": (obj.get("metadata") or {}).get(
                "resourceVersion", "")}, include_object=include, columns=columns)
            if not first_table:
                obj.pop("columnDefinitions", None)
            first_table = False
        if at_version is not None and event_type in ("ADDED", "MODIFIED", "DELETED"):
            obj = versions.convert_object(obj, rt, at_version)  # (autoscaling/v1's HPA: kctl.kubeapi.versions)
        return _line(event_type, obj)

    def bookmark(*, initial_end: bool = False) -> bytes:
        meta: dict = {"resourceVersion": str(last_rv)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return _line("BOOKMARK", {"kind": rt.kind, "apiVersion": at_version or rt.api_version, "metadata": meta})

    feed = await watchcache.subscribe(ctx, rt, namespace=namespace, since=since,
                                      label_selector=opts.label_selector, field_selector=opts.field_selector,
                                      known=known)
    try:
        for obj in initial:
            await response.write(encode("ADDED", obj))
        if opts.send_initial_events:
            await response.write(bookmark(initial_end=True))
        quiet_since = loop.time()
        while not ctx.stopping.is_set():
            now = loop.time()
            if now >= deadline:
                break
            transport = request.transport
            if transport is None or transport.is_closing():
                break
            wait = min(LIVENESS_CHECK, deadline - now)
            if opts.allow_bookmarks:
                wait = min(wait, max(0.0, quiet_since + ctx.bookmark_interval - now))
            try:
                item = await feed.get(max(wait, 0.001))
            except asyncio.TimeoutError:
                if opts.allow_bookmarks and loop.time() - quiet_since >= ctx.bookmark_interval:
                    await response.write(bookmark())
                    quiet_since = loop.time()
                continue
            if item is watchcache.END:
                break
            event_type, obj, shared = item
            if event_type != "ERROR":
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if rv and str(rv).isdigit():
                    last_rv = max(last_rv, int(rv))
            await response.write(encode(event_type, obj, shared))
            quiet_since = loop.time()
            if event_type == "ERROR":
                break
    except ConnectionError:  # the client left: nothing more to write
        return response
    finally:
        feed.close()
    try:
        await response.write_eof()
    except ConnectionError:
        pass
    return response


__all__ = ["INITIAL_EVENTS_END", "handle"]
