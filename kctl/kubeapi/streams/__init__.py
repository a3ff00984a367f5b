"""The streaming subresources of pods over HTTPS: log, exec, attach (here) and portforward (H6's module).

kctl.kubeapi.app dispatches `/api/v1/namespaces/NS/pods/NAME/{log,exec,attach,portforward}` to
`handle(request, ctx, info, user)` after authentication and authorization. As kube-apiserver 1.35
does (AuthorizePodWebsocketUpgradeCreatePermission), a GET that upgrades to a WebSocket for exec,
attach or portforward is also authorized with the verb `create` (the verb kubectl's SPDY POST always
needed), so `get` on pods/exec alone does not let a user run commands.

`runtime_for(node)` gives a Node's runtime (kctl.runtime.connect.runtime_for_node); in-process tests
replace this module attribute with one that hands back a MemoryRuntime.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiohttp import web

    from kctl.kubeapi.app import ServerContext
    from kctl.kubeapi.requestinfo import RequestInfo
    from kctl.runtime.interface import Runtime

#: subresources that need `create` too when reached by a GET (a WebSocket upgrade)
CONNECT_SUBRESOURCES = frozenset({"exec", "attach", "portforward"})


def runtime_for(node: dict) -> Runtime:
    """The runtime of the host a Node object names."""
    from kctl.runtime.connect import runtime_for_node

    return runtime_for_node(node)


async def handle(request: web.Request, ctx: ServerContext, info: RequestInfo, user: Any) -> web.StreamResponse:
    """Answer pods/log, pods/exec, pods/attach, pods/portforward."""
    from kctl.kubeapi import status

    if info.subresource in CONNECT_SUBRESOURCES and info.verb != "create":
        from kctl.kubeapi.app import authorize

        refusal = await authorize(request, ctx, user, dataclasses.replace(info, verb="create"))
        if refusal is not None:
            return refusal
    if info.subresource == "log":
        from kctl.kubeapi.streams import logs

        return await logs.handle(request, ctx, info, user)
    if info.subresource == "exec":
        from kctl.kubeapi.streams import exec as exec_

        return await exec_.handle_exec(request, ctx, info, user)
    if info.subresource == "attach":
        from kctl.kubeapi.streams import exec as exec_

        return await exec_.handle_attach(request, ctx, info, user)
    if info.subresource == "portforward":
        try:
            from kctl.kubeapi.streams import portforward
        except ModuleNotFoundError as exc:  # not there (yet): 404 below; a broken one raises
            if exc.name != f"{__name__}.portforward":
                raise
        else:
            return await portforward.handle(request, ctx, info, user)
    return status.status_response(status.failure(404, "the server could not find the requested resource",
                                                 details={}))


__all__ = ["CONNECT_SUBRESOURCES", "handle", "runtime_for"]
