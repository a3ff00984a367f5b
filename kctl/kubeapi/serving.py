"""Run the HTTPS API on a thread of its own: an asyncio event loop serving kctl.kubeapi.app over TLS.

kctl.daemon.server calls `start` when `kctl daemon --listen ADDR:PORT` is given (the test fixtures
call it too) and `Serving.stop()` when the daemon stops. The event loop only moves bytes: blocking
API calls run on the ServerContext's pool of threads, and each watch on a thread of its own
(kctl.kubeapi.watch). Connections are kept alive between requests (aiohttp's keep-alive). `stop()`
ends every watch and long request (ServerContext.stopping), closes the listening socket and the
connections, and joins the thread and the pool.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kctl.kubeapi.app import ServerContext, make_app

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.kubeapi")

#: seconds `stop()` waits for requests in flight to finish before closing their connections
SHUTDOWN_GRACE = 3.0
#: seconds `start()` waits for the socket to listen
START_TIMEOUT = 30.0
#: seconds an idle kept-alive connection stays open
KEEPALIVE_TIMEOUT = 75.0


@dataclass
class Serving:
    """A running server: where it listens (host, port, url) and how to stop it."""

    host: str
    port: int
    ctx: ServerContext
    _thread: threading.Thread | None = field(default=None, repr=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _stopped: asyncio.Event | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The server's https URL (an IPv6 host in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"

    def stop(self) -> None:
        """End every watch, close the socket and connections, join the thread and the pool (idempotent)."""
        self.ctx.stopping.set()
        loop, thread = self._loop, self._thread
        if loop is not None and self._stopped is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._stopped.set)
            except RuntimeError:  # the loop closed meanwhile
                pass
        if thread is not None and thread is not threading.current_thread():
            thread.join(SHUTDOWN_GRACE + 30)
        self.ctx.executor.shutdown(wait=False, cancel_futures=True)
        stop_authorizer = getattr(self.ctx.authorizer, "stop", None)
        if stop_authorizer is not None:
            stop_authorizer()


class ListenError(Exception):
    """The HTTPS API could not start: the address is taken or not this host's, or the PKI is unusable."""


def parse_listen(text: str) -> tuple[str, int]:
    """`ADDR:PORT` (`127.0.0.1:6443`, `[::1]:6443`, `:6443` for every address) as (host, port); ValueError."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"--listen {text!r} is not ADDR:PORT (e.g. 127.0.0.1:6443)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "0.0.0.0", int(port_text)


def start_for_api(api: API, *, host: str, port: int, tls_sans: tuple[str, ...] = (),
                  bookmark_interval: float | None = None) -> Serving:
    """Serve `api` (its store on this host) as a daemon does: the store's PKI made or renewed (serving
    certificate SANs: host, tls_sans and this host's names and addresses), client certificates and
    ServiceAccount tokens, RBAC. ListenError when it cannot."""
    from kctl.kubeapi import admissionwarnings
    from kctl.kubeapi.authn import Authenticator
    from kctl.kubeapi.authz import Authorizer
    from kctl.kubeapi.pki import PKI

    if api.local_path is None:
        raise ListenError("the HTTPS API serves a store on this host (not in node mode)")
    pki = PKI.for_store(api.local_path)
    sans = [name for name in (host, *tls_sans) if name and name not in ("0.0.0.0", "::")]
    try:
        pki.ensure(sans=sans)
    except Exception as exc:  # noqa: BLE001 - PKIError, a folder not writable: one line for the daemon
        raise ListenError(f"the PKI at {pki.folder}: {exc}") from None
    admissionwarnings.route(api)
    authorizer = Authorizer(api)
    authorizer.start()
    kwargs = {} if bookmark_interval is None else {"bookmark_interval": bookmark_interval}
    ctx = ServerContext(api=api, pki=pki, authenticator=Authenticator(pki=pki, api=api), authorizer=authorizer,
                        **kwargs)
    try:
        return start(ctx, host=host, port=port)
    except OSError as exc:
        authorizer.stop()
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def start(ctx: ServerContext, *, host: str = "127.0.0.1", port: int = 6443,
          ssl_context: ssl.SSLContext | None = None) -> Serving:
    """Serve ctx's API on host:port (0: a free port) over TLS (None: ctx.pki's serving context); returns once
    listening. OSError when the address cannot be bound."""
    if ssl_context is None:
        ssl_context = ctx.pki.server_ssl_context()
    serving = Serving(host=host, port=port, ctx=ctx)
    ready = threading.Event()
    failure: list[BaseException] = []

    def main() -> None:
        loop = asyncio.new_event_loop()
        serving._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(_serve(serving, ssl_context, ready, failure))
        except BaseException as exc:  # noqa: BLE001 - reported to start()'s caller, or logged
            if not ready.is_set():
                failure.append(exc)
            else:
                log.exception("the HTTPS API server stopped on an error")
        finally:
            ready.set()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    thread = threading.Thread(target=main, name="kubeapi", daemon=True)
    serving._thread = thread
    thread.start()
    if not ready.wait(START_TIMEOUT):
        serving.stop()
        raise OSError(f"the HTTPS API did not start listening on {host}:{port} within {START_TIMEOUT:.0f}s")
    if failure:
        thread.join(SHUTDOWN_GRACE + 5)
        ctx.executor.shutdown(wait=False, cancel_futures=True)
        exc = failure[0]
        raise exc if isinstance(exc, OSError) else OSError(f"the HTTPS API could not start: {exc}")
    log.info("serving the Kubernetes API on %s", serving.url)
    return serving


async def _serve(serving: Serving, ssl_context: ssl.SSLContext, ready: threading.Event,
                 failure: list[BaseException]) -> None:
    from aiohttp import web

    serving._stopped = asyncio.Event()
    app = make_app(serving.ctx)
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=KEEPALIVE_TIMEOUT,
                           shutdown_timeout=SHUTDOWN_GRACE, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, serving.host, serving.port, ssl_context=ssl_context, backlog=512,
                           reuse_address=True)
        try:
            await site.start()
        except BaseException as exc:
            failure.append(exc)
            ready.set()
            return
        if runner.addresses:  # the port bound (port 0: a free one)
            serving.port = runner.addresses[0][1]
        ready.set()
        if serving.ctx.stopping.is_set():
            return
        await serving._stopped.wait()
    finally:
        serving.ctx.stopping.set()
        await runner.cleanup()


__all__ = ["ListenError", "Serving", "parse_listen", "start", "start_for_api"]
