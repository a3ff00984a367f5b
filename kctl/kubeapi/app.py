"""The HTTPS API's request path: kube-apiserver's filter chain, then dispatch to the handler of the path.

kctl.kubeapi.serving runs the aiohttp application `make_app(ctx)` builds. Every request goes
through, in kube-apiserver's order:

1. authentication (`ctx.authenticator`, kctl.kubeapi.authn: a client certificate or a bearer token):
   none -> 401 Status `Unauthorized` (anonymous requests reach only /healthz, /livez, /readyz and
   /version, as Kubernetes' `system:public-info-viewer` allows);
2. request info (kctl.kubeapi.requestinfo): verb, group, version, namespace, resource, name;
3. authorization (`ctx.authorizer`, kctl.kubeapi.authz: RBAC) -> 403 Status with Kubernetes' text;
4. dispatch: non-resource paths to the discovery, OpenAPI and version handlers (each answers None
   for a path not its own); pods' log/exec/attach/portforward to kctl.kubeapi.streams;
   serviceaccounts/token to kctl.kubeapi.authn.tokens; the access reviews to
   kctl.kubeapi.authz.reviews; every other resource request to kctl.kubeapi.resources.

The request's user (kctl.apiserver.audit.acting_as), its client (the User-Agent, audit.client) and
field manager (kctl.apiserver.fieldmanager.managing: the `fieldManager` parameter, else the user
agent's first word) are context variables set around dispatch; `ServerContext.run` runs a blocking API call on
the pool with a copy of that context, so the API audits and admits the call as that user. Admission
warnings become `Warning` headers (kctl.kubeapi.admissionwarnings).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import importlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeVar

from aiohttp import web

from kctl.apiserver import audit, fieldmanager
from kctl.kubeapi import admissionwarnings, requestinfo, status
from kctl.kubeapi.requestinfo import RequestInfo
from kctl.machinery.errors import APIError

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.kubeapi")

T = TypeVar("T")
#: worker threads for blocking API calls (watches share one reader per kind: kctl.kubeapi.watchcache)
DEFAULT_WORKERS = 16
#: seconds between two BOOKMARK events of a watch that asked for them (kube-apiserver: about a minute)
DEFAULT_BOOKMARK_INTERVAL = 60.0
#: paths anonymous clients may read (Kubernetes' system:public-info-viewer)
PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/version/"})
#: request keys where handlers find what the chain learnt (`request[USER_KEY]`, `request[INFO_KEY]`)
USER_KEY: web.RequestKey[Any] = web.RequestKey("kctl.user", object)
INFO_KEY: web.RequestKey[RequestInfo] = web.RequestKey("kctl.info", RequestInfo)
#: non-resource handler modules, asked in this order (each `handle(request, ctx)` answers None if not its path)
NON_RESOURCE_HANDLERS = ("kctl.kubeapi.discovery.version", "kctl.kubeapi.discovery.groups",
                         "kctl.kubeapi.discovery.openapi")
#: subresources of pods that stream (kctl.kubeapi.streams)
STREAM_SUBRESOURCES = frozenset({"log", "exec", "attach", "portforward"})
#: the access reviews (kctl.kubeapi.authz.reviews), by resource
REVIEW_RESOURCES = frozenset({"selfsubjectaccessreviews", "selfsubjectrulesreviews", "subjectaccessreviews",
                              "localsubjectaccessreviews", "selfsubjectreviews"})
#: a field manager name is at most this long (Kubernetes' limit)
FIELD_MANAGER_MAX = 128
#: a client certificate's user is remembered this long (the certificate was verified by the TLS handshake; the
#: authenticator's checks are not repeated on every request of a kept-alive connection), and for this many
CERT_CACHE_SECONDS = 10.0
CERT_CACHE_SIZE = 1024


@dataclass(frozen=True)
class AnonymousUser:
    """The user of a request without credentials (it may read PUBLIC_PATHS only)."""

    name: str = "system:anonymous"
    groups: tuple[str, ...] = ("system:unauthenticated",)
    uid: str = ""
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ServerContext:
    """What every handler of the HTTPS API works with: the API, the PKI, authn/authz, and the worker pool.

    `run(fn, *args)` runs a blocking call (an API call) on the pool with a copy of the current
    context (the requester, the field manager, the warnings' list) and returns an awaitable of its result.
    `stopping` is set when the server stops: watches and other long requests end.
    """

    api: API
    pki: Any = None
    authenticator: Any = None
    authorizer: Any = None
    executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(
        DEFAULT_WORKERS, thread_name_prefix="kubeapi-worker"))
    stopping: threading.Event = field(default_factory=threading.Event)
    bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL
    #: client certificate (DER) -> (until when, its user): used on the event loop only
    cert_users: collections.OrderedDict = field(default_factory=collections.OrderedDict, repr=False, compare=False)

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Awaitable[T]:
        """Run fn(*args, **kwargs) on the pool, in a copy of this request's context."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        return loop.run_in_executor(self.executor, functools.partial(context.run, fn, *args, **kwargs))


#: the application key of the ServerContext (`request.app[CTX_KEY]`)
CTX_KEY: web.AppKey[ServerContext] = web.AppKey("kctl.ctx", ServerContext)


def make_app(ctx: ServerContext) -> web.Application:
    """The aiohttp application: every method and path goes through `handle`."""
    app = web.Application(client_max_size=4 * 1024 * 1024)  # kctl refuses requests over 3 MiB itself
    app[CTX_KEY] = ctx
    app.router.add_route("*", "/{tail:.*}", functools.partial(handle, ctx=ctx))
    return app


async def handle(request: web.Request, *, ctx: ServerContext) -> web.StreamResponse:
    """The filter chain for one request (see the module docstring)."""
    try:
        user = await authenticate(request, ctx)
        if user is None:
            return status.status_response(status.failure(401, "Unauthorized"))
        from kctl.kubeapi.authz import impersonation  # Impersonate-* headers (kubectl --as): H3's

        user = await impersonation.apply(request, ctx, user)
        info = requestinfo.parse(request.method, request.path, request.query)
        request[USER_KEY], request[INFO_KEY] = user, info
        if isinstance(user, AnonymousUser) and request.path not in PUBLIC_PATHS:
            return status.status_response(status.failure(401, "Unauthorized"))
        refusal = await authorize(request, ctx, user, info)
        if refusal is not None:
            return refusal
        with audit.acting_as(requester_of(user, request)), audit.client(request.headers.get("User-Agent")), \
                fieldmanager.managing(field_manager(request)), admissionwarnings.collecting() as warnings:
            response = await dispatch(request, ctx, info, user)
            if warnings and not response.prepared:
                for message in warnings:
                    response.headers.add("Warning", admissionwarnings.header_value(message))
            return response
    except APIError as exc:
        return status.error_response(exc)
    except web.HTTPException as exc:  # aiohttp's own refusals (a body over client_max_size): as a Status
        if exc.status < 400:
            raise
        message = "the request is too large" if exc.status == 413 else (exc.reason or "the request failed")
        return status.status_response(status.failure(exc.status, message))
    except (ConnectionResetError, asyncio.CancelledError):
        raise
    except Exception as exc:  # noqa: BLE001 - one request's bug must not take the server down
        log.exception("request %s %s failed", request.method, request.path)
        return status.status_response(status.unknown_error(exc))


async def authenticate(request: web.Request, ctx: ServerContext) -> Any:
    """The request's user (H2's UserInfo), AnonymousUser for a public path without credentials, or None."""
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    peercert = ssl_object.getpeercert() if ssl_object is not None else None
    der_cert = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    authorization = request.headers.get("Authorization")
    user = None
    if ctx.authenticator is not None and (peercert or der_cert or authorization):
        cached = ctx.cert_users.get(der_cert) if der_cert and not authorization else None
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        user = await ctx.run(ctx.authenticator.authenticate, peercert=peercert or None, der_cert=der_cert,
                             authorization=authorization)
        if user is not None and der_cert and not authorization:
            _remember(ctx.cert_users, der_cert, user)
    if user is None and not authorization and request.path in PUBLIC_PATHS:
        return AnonymousUser()
    return user


def _remember(cache: collections.OrderedDict, der_cert: bytes, user: Any) -> None:
    """Keep a certificate's user for CERT_CACHE_SECONDS (the same certificate on every keep-alive request)."""
    cache[der_cert] = (time.monotonic() + CERT_CACHE_SECONDS, user)
    cache.move_to_end(der_cert)
    while len(cache) > CERT_CACHE_SIZE:
        cache.popitem(last=False)


def attributes_of(user: Any, info: RequestInfo) -> Any:
    """The authorizer's Attributes (kctl.kubeapi.authz) of a request."""
    from kctl.kubeapi.authz import Attributes

    return Attributes(user=user, verb=info.verb, namespace=info.namespace, api_group=info.api_group,
                      api_version=info.api_version, resource=info.resource, subresource=info.subresource,
                      name=info.name, path=info.path, resource_request=info.resource_request)


async def authorize(request: web.Request, ctx: ServerContext, user: Any, info: RequestInfo) -> web.Response | None:
    """None when the authorizer allows the request, else the 403 response Kubernetes gives."""
    if ctx.authorizer is None:
        return None
    attrs = attributes_of(user, info)
    allowed, reason = await ctx.run(ctx.authorizer.authorize, attrs)
    if allowed:
        return None
    from kctl.kubeapi.authz import forbidden_message

    message = forbidden_message(attrs, reason)
    details = {"name": info.name, "group": info.api_group, "kind": info.resource} if info.resource_request else None
    return status.status_response(status.failure(403, message, details={k: v for k, v in (details or {}).items()
                                                                         if v} or None))


def requester_of(user: Any, request: web.Request) -> audit.Requester:
    """The audit log's and admission's view of the request's user."""
    extra = getattr(user, "extra", None) or {}
    return audit.Requester(user=user.name, groups=tuple(getattr(user, "groups", ()) or ()),
                           uid=getattr(user, "uid", "") or "",
                           extra=tuple(sorted((k, tuple(v)) for k, v in extra.items())),
                           source_ips=(request.remote,) if request.remote else ())


def field_manager(request: web.Request) -> str | None:
    """The `fieldManager` query parameter, else the user agent's first word (`kubectl-edit`), as Kubernetes."""
    given = request.query.get("fieldManager")
    if given:
        return given[:FIELD_MANAGER_MAX]
    agent = request.headers.get("User-Agent", "")
    prefix = agent.split("/", 1)[0].strip()
    return prefix[:FIELD_MANAGER_MAX] or None


def _handler_module(name: str) -> Any:
    """The module of a handler another part of kctl.kubeapi provides, or None while it does not exist."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            return None
        raise


async def dispatch(request: web.Request, ctx: ServerContext, info: RequestInfo, user: Any) -> web.StreamResponse:
    """The handler of an authenticated, authorized request."""
    if not info.resource_request:
        for name in NON_RESOURCE_HANDLERS:
            module = _handler_module(name)
            if module is None:
                continue
            response = await module.handle(request, ctx)
            if response is not None:
                return response
        return status.status_response(status.failure(404, "the server could not find the requested resource",
                                                     details={}))
    if info.api_group == "" and info.resource == "pods" and info.subresource in STREAM_SUBRESOURCES:
        module = _handler_module("kctl.kubeapi.streams")
        if module is not None:
            return await module.handle(request, ctx, info, user)
    elif info.api_group == "" and info.resource == "serviceaccounts" and info.subresource == "token":
        module = _handler_module("kctl.kubeapi.authn.tokens")
        if module is not None:
            return await module.handle_token_request(request, ctx, info, user)
    elif info.api_group == "authorization.k8s.io" and info.resource in REVIEW_RESOURCES \
            or info.api_group == "authentication.k8s.io" and info.resource in REVIEW_RESOURCES:
        module = _handler_module("kctl.kubeapi.authz.reviews")
        if module is not None:
            return await module.handle(request, ctx, info, user)
    from kctl.kubeapi import resources

    return await resources.handle(request, ctx, info, user)


__all__ = ["AnonymousUser", "CTX_KEY", "INFO_KEY", "ServerContext", "USER_KEY", "attributes_of", "dispatch",
           "field_manager", "handle", "make_app", "requester_of"]
