"""The control host's end of `--server ssh://...`: the API served over a pair of byte streams.

`kctl serve --stdio` (kctl.cli.serve), started by the client's `ssh`, calls `serve()` on
its stdin and stdout; the messages are those of kctl.apiserver.wire. Each request runs on a
small pool of threads (so one slow call, an admission hook, does not hold up the rest,
and the SQLite connections of the pool are reused); each watch runs on a thread of its
own until it ends, fails, or the client cancels it. Only the methods in `METHODS` can be
called. Admission warnings met while serving a request go back with its response (the
served APIServer's warn callback is `warn`).

The audit log (kctl.apiserver.audit) of the control host records each write with the user
this process runs as (the SSH login: ssh started it), the SSH client's address
(SSH_CONNECTION), and the client's own name that each request carries (`userAgent`).

`serve()` returns when its input ends (the client closed the connection, or ssh died):
every watch is stopped and the pool drained.
"""

from __future__ import annotations

import inspect
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, BinaryIO, Callable

from kctl import __version__
from kctl.apiserver import audit, wire
from kctl.machinery.errors import APIError, BadRequest

if TYPE_CHECKING:
    from kctl.apiserver.server import APIServer

log = logging.getLogger("kctl.serve")

WORKERS = 8
_local = threading.local()  # .warnings: the admission warnings of the request served on this thread


def warn(message: str) -> None:
    """The served APIServer's warn callback: the warning goes back with the current response."""
    sink = getattr(_local, "warnings", None)
    if sink is not None:
        sink.append(message)
    else:
        log.warning("%s", message)

#: parameter name -> how its JSON value becomes the Python value the APIServer takes
_ARGUMENTS: dict[str, Callable] = {
    "label_selector": wire.decode_label_selector,
    "field_selector": wire.decode_field_selector,
    "known": lambda v: None if v is None else {tuple(pair) for pair in v},
    "ops": lambda v: [tuple(op) for op in v],
    "bindings": lambda v: [wire.decode_binding(b) for b in v],
}

#: method -> how its result is encoded (JSON as it is when absent)
_RESULTS: dict[str, Callable] = {
    "resource": wire.encode_rt,
    "resource_for": wire.encode_rt,
    "registry": lambda types: [wire.encode_rt(rt) for rt in types],
    "list": lambda r: [r[0], r[1]],
    "apply": wire.encode_write_result,
    "write_all": lambda rs: [wire.encode_write_result(r) for r in rs],
    "bind_all": lambda rs: [wire.encode_write_result(r) for r in rs],
}


class _Methods:
    """What a client may call: the API contract's methods (kctl.apiserver.contract),
    except the store's administration."""

    def __init__(self, api: APIServer) -> None:
        self.api = api

    def hello(self) -> dict:
        return {"protocol": wire.PROTOCOL, "version": __version__, "store": self.api.where,
                "user": self.api.user}

    def resource(self, name: str):
        return self.api.resource(name)

    def resource_for(self, obj: dict):
        return self.api.resource_for(obj)

    def registry(self):
        return list(self.api.registry)

    def get(self, rt, name, *, namespace=None):
        return self.api.get(rt, name, namespace=namespace)

    def list(self, rt, *, namespace=None, label_selector=None, field_selector=None):
        return self.api.list(rt, namespace=namespace, label_selector=label_selector, field_selector=field_selector)

    def create(self, obj, *, namespace=None, dry_run=False):
        return self.api.create(obj, namespace=namespace, dry_run=dry_run)

    def update(self, obj, *, namespace=None, subresource=None, dry_run=False):
        return self.api.update(obj, namespace=namespace, subresource=subresource, dry_run=dry_run)

    def update_status(self, obj, *, dry_run=False):
        return self.api.update_status(obj, dry_run=dry_run)

    def patch(self, rt, name, patch, *, patch_type="strategic", namespace=None, subresource=None, dry_run=False):
        return self.api.patch(rt, name, patch, patch_type=patch_type, namespace=namespace, subresource=subresource,
                              dry_run=dry_run)

    def apply(self, obj, *, namespace=None, dry_run=False):
        return self.api.apply(obj, namespace=namespace, dry_run=dry_run)

    def apply_server_side(self, rt, name, obj, *, namespace=None, field_manager, force=False, dry_run=False):
        return self.api.apply_server_side(rt, name, obj, namespace=namespace, field_manager=field_manager,
                                          force=force, dry_run=dry_run)

    def delete(self, rt, name, *, namespace=None, propagation=None, grace_period=None, resource_version=None,
               dry_run=False):
        return self.api.delete(rt, name, namespace=namespace, propagation=propagation, grace_period=grace_period,
                               resource_version=resource_version, dry_run=dry_run)

    def write_all(self, ops, *, namespace=None, dry_run=False, atomic=False):
        return self.api.write_all(ops, namespace=namespace, dry_run=dry_run, atomic=atomic)

    def bind(self, namespace, name, node_name, *, uid=None):
        return self.api.bind(namespace, name, node_name, uid=uid)

    def bind_all(self, bindings):
        return self.api.bind_all(bindings)

    def evict(self, namespace, name, *, grace_period=None, dry_run=False):
        return self.api.evict(namespace, name, grace_period=grace_period, dry_run=dry_run)

    def create_token(self, namespace, name, token_request):
        return self.api.create_token(namespace, name, token_request)

    def store_get_by_uid(self, uid):  # (the wire names of get_by_uid and revision)
        return self.api.get_by_uid(uid)

    def store_revision(self):
        return self.api.revision()

    def watch(self, rt, *, since, namespace=None, label_selector=None, field_selector=None, timeout=None,
              known=None, _stop=None):
        return self.api.watch(rt, namespace=namespace, since=since, label_selector=label_selector,
                              field_selector=field_selector, stop=_stop, timeout=timeout, known=known)


#: the callable methods; `watch` streams, the others answer once
METHODS = frozenset(name for name in vars(_Methods) if not name.startswith("_"))


class Server:
    """Serves one client on (rfile, wfile); `run()` until rfile ends."""

    def __init__(self, api: APIServer, rfile: BinaryIO, wfile: BinaryIO, *, workers: int = WORKERS) -> None:
        self.api = api
        self.methods = _Methods(api)
        self.rfile = rfile
        self.wfile = wfile
        self.workers = workers
        self._write_lock = threading.Lock()
        self._watches: dict[object, threading.Event] = {}
        self._watch_threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def run(self) -> None:
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="serve")
        try:
            for line in self.rfile:
                if not line.strip():
                    continue
                try:
                    message = wire.loads(line)
                except ValueError as exc:
                    self.send({"id": None, "error": wire.encode_error(BadRequest(f"not a JSON message: {exc}"))})
                    continue
                if message.get("cancel"):
                    self._cancel(message.get("id"))
                elif message.get("method") == "watch":
                    self._start_watch(message)
                else:
                    pool.submit(self._answer, message)
        finally:
            with self._lock:
                for stop in self._watches.values():
                    stop.set()
                threads = list(self._watch_threads)
            pool.shutdown(wait=True)
            for thread in threads:
                thread.join(5)

    def send(self, message: dict) -> None:
        data = wire.dumps(message)
        with self._write_lock:
            try:
                self.wfile.write(data)
                self.wfile.flush()
            except (OSError, ValueError):  # the client is gone: run() ends when its input does
                pass

    # -- calls -------------------------------------------------------------------------

    def _bind(self, message: dict) -> tuple[str, Callable, inspect.BoundArguments]:
        method = message.get("method")
        if method not in METHODS:
            raise BadRequest(f"unknown method {method!r}")
        fn = getattr(self.methods, method)
        args, kwargs = message.get("args") or [], message.get("kwargs") or {}
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise BadRequest("args must be a list and kwargs an object")
        if any(str(name).startswith("_") for name in kwargs):
            raise BadRequest(f"{method}: unknown argument")
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as exc:
            raise BadRequest(f"{method}: {exc}") from None
        for name, value in bound.arguments.items():
            if name == "rt":
                bound.arguments[name] = None if value is None else self.api.resource(value)
            elif name in _ARGUMENTS:
                bound.arguments[name] = _ARGUMENTS[name](value)
        return method, fn, bound

    def _answer(self, message: dict) -> None:
        rid = message.get("id")
        _local.warnings = warnings = []
        try:
            method, fn, bound = self._bind(message)
            with audit.client(_client_of(message)):
                result = fn(*bound.args, **bound.kwargs)
            reply = {"id": rid, "result": _RESULTS.get(method, lambda r: r)(result)}
        except Exception as exc:
            if not isinstance(exc, APIError):  # a bug: say so on stderr (the client's ssh shows it)
                log.exception("%s failed", message.get("method"))
            reply = {"id": rid, "error": wire.encode_error(exc)}
        finally:
            _local.warnings = None
        if warnings:
            reply["warnings"] = warnings
        self.send(reply)

    # -- watches -----------------------------------------------------------------------

    def _start_watch(self, message: dict) -> None:
        rid = message.get("id")
        stop = threading.Event()
        thread = threading.Thread(target=self._stream, args=(message, stop), name=f"watch-{rid}", daemon=True)
        with self._lock:
            self._watches[rid] = stop
            self._watch_threads = [t for t in self._watch_threads if t.is_alive()] + [thread]
        thread.start()

    def _cancel(self, rid) -> None:
        with self._lock:
            stop = self._watches.get(rid)
        if stop is not None:
            stop.set()

    def _stream(self, message: dict, stop: threading.Event) -> None:
        rid = message.get("id")
        try:
            _, fn, bound = self._bind(message)
            bound.arguments["_stop"] = stop
            for change_type, obj in fn(*bound.args, **bound.kwargs):
                if stop.is_set():
                    break
                self.send({"id": rid, "event": [change_type, obj]})
            self.send({"id": rid, "end": True})
        except Exception as exc:
            if not isinstance(exc, APIError):
                log.exception("watch failed")
            self.send({"id": rid, "error": wire.encode_error(exc)})
        finally:
            with self._lock:
                self._watches.pop(rid, None)


def _client_of(message: dict) -> str:
    """The client's name a request carries (as it says: informational), else this server's."""
    agent = message.get("userAgent")
    if isinstance(agent, str) and agent.strip():
        return agent
    return f"kctl/{__version__} (serve --stdio)"


def serve(store_path: str | None, rfile: BinaryIO, wfile: BinaryIO, *, workers: int = WORKERS,
          store_options: dict[str, Any] | None = None) -> None:
    """Serve the API over the store at store_path (None: the default store; etcd://...: an etcd cluster, with
    store_options as kctl.store.open.open_store takes them: tls, state_dir) until rfile ends."""
    from kctl.apiserver.server import APIServer
    from kctl.store.open import open_store

    store = open_store(store_path, **(store_options or {}))
    try:
        Server(APIServer(store, warn=warn), rfile, wfile, workers=workers).run()
    finally:
        store.close()


def serve_stdio(store_path: str | None, *, store_options: dict[str, Any] | None = None) -> None:
    """serve() on this process's stdin and stdout; anything else printing goes to stderr."""
    import os
    import sys

    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not corrupt the stream
    sys.stdout = sys.stderr
    try:
        serve(store_path, sys.stdin.buffer, out, store_options=store_options)
    finally:
        out.close()


__all__ = ["METHODS", "Server", "serve", "serve_stdio", "warn"]
