"""GET pods/log: a container's log as text/plain, streamed (chunked) while it follows, as kube-apiserver.

kctl.kubeapi.streams.handle calls `handle` for `/api/v1/namespaces/NS/pods/NAME/log`. The pod,
its node's runtime and the container instance come from kctl.ops.podstreams (the code `kctl logs`
runs too); the log is read on a thread of its own (kctl.kubeapi.streams.pump). Query parameters
are PodLogOptions': container, follow, previous, tailLines, sinceSeconds, sinceTime, timestamps,
limitBytes (insecureSkipTLSVerifyBackend is accepted and means nothing here). Bad values are 422
`PodLogOptions "NAME" is invalid` with the field's cause, as Kubernetes' validation words them.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Mapping

from aiohttp import web

from kctl.machinery.errors import APIError, BadRequest, FieldError, Invalid
from kctl.machinery.times import parse_time
from kctl.ops import podstreams
from kctl.kubeapi.streams.pump import ThreadReader

if TYPE_CHECKING:
    from kctl.kubeapi.app import ServerContext
    from kctl.kubeapi.requestinfo import RequestInfo

#: seconds to wait for the first piece of a log before the response starts anyway (an error
#: before it is a Status with its code; one after it ends the body)
FIRST_PIECE_WAIT = 1.0
#: how often (seconds) a quiet following stream checks whether the server stops
STOP_POLL = 1.0


def _flag(query: Mapping[str, str], key: str) -> bool:
    value = query.get(key, "")
    if value.lower() in ("", "false", "0"):
        return False
    if value.lower() in ("true", "1"):
        return True
    raise BadRequest(f'{key}: invalid boolean "{value}"')


def _integer(query: Mapping[str, str], key: str) -> int | None:
    if key not in query:
        return None
    try:
        return int(query[key])
    except ValueError:
        raise BadRequest(f'{key}: invalid integer "{query[key]}"') from None


def log_options(name: str, query: Mapping[str, str], *, now: float) -> podstreams.LogOptions:
    """The PodLogOptions of a request's query, validated as Kubernetes validates them."""
    tail, since_seconds, limit = _integer(query, "tailLines"), _integer(query, "sinceSeconds"), \
        _integer(query, "limitBytes")
    causes: list[FieldError] = []
    if tail is not None and tail < 0:
        causes.append(FieldError("tailLines", f"Invalid value: {tail}: must be greater than or equal to 0"))
    if limit is not None and limit < 1:
        causes.append(FieldError("limitBytes", f"Invalid value: {limit}: must be greater than 0"))
    if since_seconds is not None and since_seconds < 1:
        causes.append(FieldError("sinceSeconds", f"Invalid value: {since_seconds}: must be greater than 0"))
    since_time = None
    if query.get("sinceTime"):
        parsed = parse_time(query["sinceTime"])
        if parsed is None:
            raise BadRequest(f'sinceTime: invalid time "{query["sinceTime"]}" (RFC 3339 expected)')
        since_time = parsed.timestamp()
        if since_seconds is not None:
            causes.append(FieldError("", "at most one of `sinceTime` or `sinceSeconds` may be specified"))
    if causes:
        raise Invalid(f'PodLogOptions "{name}"', causes)
    since = since_time if since_time is not None else (now - since_seconds if since_seconds is not None else None)
    return podstreams.LogOptions(container=query.get("container") or None, follow=_flag(query, "follow"),
                                 tail=tail, since=since, previous=_flag(query, "previous"),
                                 timestamps=_flag(query, "timestamps"), limit_bytes=limit)


class MethodNotAllowed(APIError):
    """A method the subresource does not serve."""

    reason, code = "MethodNotAllowed", 405


async def handle(request: web.Request, ctx: ServerContext, info: RequestInfo, user: Any) -> web.StreamResponse:
    """Answer GET pods/log (module docstring)."""
    if request.method not in ("GET", "HEAD"):
        raise MethodNotAllowed(f"the server does not allow this method on the requested resource: {request.method}")
    options = log_options(info.name, request.query, now=time.time())
    pod, runtime = await ctx.run(podstreams.pod_and_runtime, ctx.api, info.name, info.namespace,
                                 runtime_for=runtime_for())
    try:
        instance = await ctx.run(podstreams.log_instance, runtime, pod, options)
        reader: ThreadReader[bytes] = ThreadReader(lambda: podstreams.log_chunks(runtime, instance.id, options),
                                                   name=f"kubeapi-log-{info.name}")
        try:
            return await _stream(request, ctx, reader)
        finally:
            reader.stop()
    finally:
        await asyncio.get_running_loop().run_in_executor(None, podstreams.close_runtime, runtime)


async def _stream(request: web.Request, ctx: ServerContext, reader: ThreadReader[bytes]) -> web.StreamResponse:
    """Copy the log to the response; an error before its first piece is the response's Status."""
    from kctl.runtime.interface import RuntimeError_

    try:
        first = await reader.get(timeout=FIRST_PIECE_WAIT)
    except asyncio.TimeoutError:
        first = b""
    except RuntimeError_ as exc:
        raise APIError(str(exc)) from None  # Kubernetes' InternalError (500), with the runtime's one line
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    piece: bytes | None = first
    try:
        while piece is not None:
            if piece:
                await response.write(piece)
            piece = await _next(reader, ctx)
        await response.write_eof()
    except (ConnectionError, RuntimeError_):  # the client left, or the runtime broke mid-stream: the body ends
        pass
    return response


async def _next(reader: ThreadReader[bytes], ctx: ServerContext) -> bytes | None:
    """The next piece of the log; None at its end or when the server stops."""
    while True:
        try:
            return await reader.get(timeout=STOP_POLL)
        except asyncio.TimeoutError:
            if ctx.stopping.is_set():
                return None


def runtime_for() -> Any:
    """The function that gives a Node's runtime (kctl.kubeapi.streams.runtime_for; tests replace it)."""
    from kctl.kubeapi import streams

    return streams.runtime_for


__all__ = ["MethodNotAllowed", "handle", "log_options", "runtime_for"]
