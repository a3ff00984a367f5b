"""RemoteAPIServer: the API of a control host, reached over SSH (`kctl --server ssh://...`).

kctl.cli.connect returns one when `--server` (or $KCTL_SERVER) is given, and
`kctl daemon --server` (node mode) runs its node agent on one. It implements the API
contract (kctl.apiserver.contract.API), as kctl.apiserver.server.APIServer does, and answers by asking
`kctl serve --stdio` on the control host (kctl.apiserver.serve) over one `ssh` process:

    ssh <kctl.ssh.ssh_options> -T -- user@host 'kctl' 'serve' '--stdio' '--store' '/path/kctl.db'

The messages (JSON lines, kctl.apiserver.wire) carry an id, so many threads may call at once
over the one connection; a reader thread hands each response to its caller, and a watch
streams its events until the caller stops reading (the server is then told to cancel).
Errors come back as the same kctl.machinery.errors classes. If ssh dies, the calls in flight
and those made meanwhile raise ServerUnavailable naming ssh's exit status and last
words; the next call starts a new ssh. Nothing is retried here: writes are not
idempotent, and the agent has its own back-off.

URL: `ssh://user@host[:port]/path/to/kctl.db` (the store on the control host; no path:
the server's default store; user: root when not given, as for Node URLs). The key is
`identity` or $KCTL_SSH_IDENTITY, host keys are checked against $KCTL_KNOWN_HOSTS or the
user's usual known_hosts files, and the kctl run there is $KCTL_REMOTE_COMMAND (default
`kctl`; split as a shell would, but run without one on this side).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import queue
import shlex
import subprocess
import threading
from collections import deque
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

from kctl.machinery import typeinfo
from kctl.apiserver import wire
from kctl.machinery.errors import BadRequest, ClientSideError, NotFound
from kctl.machinery.resources import Registry, ResourceType, builtin_registry
from kctl.apiserver.wire import ServerUnavailable
from kctl.ssh import SSHTarget, ssh_options

if TYPE_CHECKING:
    from kctl.apiserver.contract import Binding, WriteResult

log = logging.getLogger("kctl.remote")

ENV_IDENTITY = "KCTL_SSH_IDENTITY"
ENV_KNOWN_HOSTS = "KCTL_KNOWN_HOSTS"
ENV_REMOTE_COMMAND = "KCTL_REMOTE_COMMAND"
DEFAULT_REMOTE_COMMAND = "kctl"
#: seconds to wait for `kctl serve` to answer its first message (ssh's own timeouts come first)
HANDSHAKE_TIMEOUT = 60.0
#: how often a watch given a stop event looks at it
STOP_POLL = 0.1
_LOST = object()  # put on a caller's queue when the connection ends


# -- the byte streams ----------------------------------------------------------------------------

class Channel(Protocol):
    """Two byte streams to a `kctl serve`: rfile (its messages) and wfile (ours)."""

    rfile: object
    wfile: object

    def failure(self) -> str:
        """Why the streams ended, as a person reads it (called once they did)."""

    def close(self) -> None:
        """End the connection and release what it holds."""


def parse_server_url(url: str) -> SSHTarget:
    """The ssh:// URL of a control plane; BadRequest when it is not one."""
    try:
        target = SSHTarget.parse(url)
    except ValueError:
        raise BadRequest(f"--server: not an ssh://user@host[:port]/path/to/kctl.db URL: {url!r}") from None
    return target


def display_url(target: SSHTarget) -> str:
    """The URL as messages show it (never a password someone put in it)."""
    return f"ssh://{target.destination}:{target.port}{target.path}"


def ssh_command(url: str, *, identity: str | None = None, known_hosts: str | None = None,
                remote_command: str | None = None) -> list[str]:
    """The argv of the ssh that runs `kctl serve --stdio` on the control host of url."""
    target = parse_server_url(url)
    words = ["serve", "--stdio"]
    if target.path not in ("", "/"):
        words += ["--store", target.path]
    return _ssh_kctl(target, words, identity=identity, known_hosts=known_hosts, remote_command=remote_command)


def ssh_kctl_command(url: str, args: list[str], *, identity: str | None = None, known_hosts: str | None = None,
                     remote_command: str | None = None) -> list[str]:
    """The argv of an ssh that runs `kctl [--store PATH] ARGS...` on the control host of url.

    For the commands that need a node's Podman (logs, exec): they run where the Node
    objects' keys and known_hosts are, the control host.
    """
    target = parse_server_url(url)
    words = (["--store", target.path] if target.path not in ("", "/") else []) + list(args)
    return _ssh_kctl(target, words, identity=identity, known_hosts=known_hosts, remote_command=remote_command)


def _ssh_kctl(target: SSHTarget, words: list[str], *, identity: str | None, known_hosts: str | None,
              remote_command: str | None) -> list[str]:
    identity = identity or os.environ.get(ENV_IDENTITY) or None
    known_hosts = known_hosts or os.environ.get(ENV_KNOWN_HOSTS) or None
    command = remote_command or os.environ.get(ENV_REMOTE_COMMAND) or DEFAULT_REMOTE_COMMAND
    words = shlex.split(command) + words
    # ssh joins the remote words with spaces into a command line for the remote shell:
    # each word is quoted so it arrives as one argument, whatever it holds.
    return ["ssh", *ssh_options(identity=identity, known_hosts=known_hosts, port=target.port), "-T", "--",
            target.destination, " ".join(shlex.quote(w) for w in words)]


class SSHChannel:
    """One ssh process: our messages on its stdin, the server's on its stdout."""

    def __init__(self, argv: list[str]) -> None:
        # A session of its own: a Ctrl-C meant for kctl must not kill ssh under the agent's feet.
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, start_new_session=True)
        self.rfile, self.wfile = self.process.stdout, self.process.stdin
        self._stderr: deque[str] = deque(maxlen=20)
        self._drain = threading.Thread(target=self._read_stderr, name="kctl-remote-stderr", daemon=True)
        self._drain.start()

    def _read_stderr(self) -> None:
        for raw in self.process.stderr:
            line = raw.decode(errors="replace").rstrip()
            if line:
                self._stderr.append(line)
                log.debug("control host: %s", line)

    def failure(self) -> str:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self._drain.join(2)
        status = "the connection ended" if code is None else f"ssh exited with status {code}"
        said = "; ".join(list(self._stderr)[-3:])
        return f"{status}: {said}" if said else status

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.wfile.close()  # kctl serve sees its input end and exits; so does ssh
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._drain.join(2)
        for stream in (self.process.stdout, self.process.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.close()


# -- one connection ----------------------------------------------------------------------------

class _Connection:
    """Requests multiplexed by id over one channel; a reader thread dispatches the answers."""

    def __init__(self, channel: Channel, where: str) -> None:
        self.channel = channel
        self.where = where
        self.closed = False
        self.failure = ""
        self._pending: dict[int, queue.SimpleQueue] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._reader = threading.Thread(target=self._read, name="kctl-remote-reader", daemon=True)
        self._reader.start()

    def error(self) -> ServerUnavailable:
        return ServerUnavailable(f"lost the connection to the control plane at {self.where}: "
                                 f"{self.failure or 'it was closed'}")

    def open(self) -> tuple[int, queue.SimpleQueue]:
        """A new request id and the queue its answers arrive on."""
        with self._lock:
            if self.closed:
                raise self.error()
            rid = next(self._ids)
            self._pending[rid] = answers = queue.SimpleQueue()
            return rid, answers

    def forget(self, rid: int) -> None:
        with self._lock:
            self._pending.pop(rid, None)

    def send(self, message: dict) -> None:
        data = wire.dumps(message)
        with self._write_lock:
            try:
                self.channel.wfile.write(data)
                self.channel.wfile.flush()
            except (OSError, ValueError):
                broken = True
            else:
                broken = False
        if broken:
            self._lost()
            raise self.error()

    def call(self, method: str, kwargs: dict, *, timeout: float | None = None) -> dict:
        """Send one request and wait for its answer (the raw message)."""
        rid, answers = self.open()
        try:
            # userAgent: which client this is, for the control host's audit log (kctl.apiserver.audit)
            self.send({"id": rid, "method": method, "args": [], "kwargs": kwargs, "userAgent": _user_agent()})
            try:
                message = answers.get(timeout=timeout)
            except queue.Empty:
                raise ServerUnavailable(f"no answer from the control plane at {self.where} within "
                                        f"{timeout:g} s") from None
        finally:
            self.forget(rid)
        if message is _LOST:
            raise self.error()
        return message

    def _read(self) -> None:
        try:
            for line in self.channel.rfile:
                try:
                    message = wire.loads(line)
                except ValueError:  # a login banner or a shell rc file talking: not ours
                    log.debug("control host printed a line outside the protocol: %r", line[:200])
                    continue
                with self._lock:
                    answers = self._pending.get(message.get("id"))
                if answers is not None:
                    answers.put(message)
        except (OSError, ValueError):
            pass
        finally:
            self._lost()

    def _lost(self) -> None:
        """The stream ended: every caller waiting, and every later one, gets ServerUnavailable."""
        if self.closed:
            return
        failure = self.channel.failure()
        with self._lock:
            if self.closed:
                return
            self.failure, self.closed = failure, True
            waiting = list(self._pending.values())
        for answers in waiting:
            answers.put(_LOST)

    def close(self) -> None:
        self.channel.close()
        self._reader.join(5)


# -- the API -----------------------------------------------------------------------------------

def _user_agent() -> str:
    from kctl.apiserver.audit import user_agent

    return user_agent()


class RemoteAPIServer:
    """The APIServer of a control host, over SSH (see the module docstring)."""

    def __init__(self, url: str, *, identity: str | None = None, known_hosts: str | None = None,
                 remote_command: str | None = None, warn: Callable[[str], None] | None = None,
                 channel_factory: Callable[[], Channel] | None = None) -> None:
        if channel_factory is None:
            argv = ssh_command(url, identity=identity, known_hosts=known_hosts, remote_command=remote_command)
            channel_factory = lambda: SSHChannel(argv)  # noqa: E731
            self.where = display_url(parse_server_url(url))
        else:
            self.where = url
        self.url = url
        self.warn = warn or (lambda message: log.warning("%s", message))
        self.server_info: dict = {}  # what `hello` said: protocol, version, store, user
        self._channel_factory = channel_factory
        self._builtin = builtin_registry()
        self._conn: _Connection | None = None
        self._connect_lock = threading.Lock()

    # -- the connection -------------------------------------------------------------------

    def _connection(self) -> _Connection:
        """The live connection, made (ssh started, `hello` answered) when there is none."""
        with self._connect_lock:
            conn = self._conn
            if conn is not None and not conn.closed:
                return conn
            if conn is not None:
                conn.close()
                self._conn = None
            try:
                channel = self._channel_factory()
            except OSError as exc:
                raise ServerUnavailable(f"cannot reach the control plane at {self.where}: {exc}") from None
            conn = _Connection(channel, self.where)
            try:
                reply = conn.call("hello", {}, timeout=HANDSHAKE_TIMEOUT)
            except ServerUnavailable as exc:
                conn.close()
                raise ServerUnavailable(f"cannot reach the control plane at {self.where}: "
                                        f"{conn.failure or exc.message}") from None
            info = reply.get("result") if isinstance(reply.get("result"), dict) else {}
            if info.get("protocol") != wire.PROTOCOL:
                conn.close()
                raise ServerUnavailable(f"the control plane at {self.where} speaks protocol "
                                        f"{info.get('protocol')}, this kctl {wire.PROTOCOL}: "
                                        "run the same kctl version on both hosts")
            self.server_info, self._conn = info, conn
            return conn

    def _call(self, method: str, **kwargs):
        reply = self._connection().call(method, kwargs)
        for warning in reply.get("warnings") or ():
            self.warn(warning)
        if "error" in reply:
            raise wire.decode_error(reply["error"])
        return reply.get("result")

    def close(self) -> None:
        """End the ssh connection (the next call would start a new one)."""
        with self._connect_lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> "RemoteAPIServer":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    @property
    def local_path(self) -> str | None:
        """None: the store is on the control host."""
        return None

    @property
    def user(self) -> str:
        """The user the control host's API writes as (the SSH user there)."""
        if not self.server_info:
            self._connection()
        return self.server_info.get("user", "")

    # -- kinds ----------------------------------------------------------------------------

    @property
    def registry(self) -> Registry:
        """Built-in kinds plus those of the control host's CustomResourceDefinitions."""
        return Registry([wire.decode_rt(data) for data in self._call("registry")])

    def resource(self, name: str) -> ResourceType:
        try:  # built-in kinds always win a lookup, so they need no round trip
            return self._builtin.lookup(name)
        except BadRequest:
            return wire.decode_rt(self._call("resource", name=name))

    def resource_for(self, obj: dict) -> ResourceType:
        if not isinstance(obj, dict):
            raise BadRequest("object must be a mapping")
        try:
            return self._builtin.for_object(obj)
        except BadRequest:
            return wire.decode_rt(self._call("resource_for", obj=obj))

    def namespace_of(self, rt: ResourceType, namespace: str | None, meta: dict | None = None) -> str:
        """As APIServer.namespace_of (the same function, kctl.machinery.typeinfo; no round trip)."""
        return typeinfo.namespace_of(rt, namespace, meta)

    def schema_of(self, rt: ResourceType) -> dict | None:
        """As APIServer.schema_of (the same function, kctl.machinery.typeinfo; no round trip)."""
        return typeinfo.schema_of(rt)

    # -- reads ----------------------------------------------------------------------------

    def get(self, rt: ResourceType, name: str, *, namespace: str | None = None) -> dict:
        return self._call("get", rt=wire.rt_name(rt), name=name, namespace=namespace)

    def find(self, rt: ResourceType, name: str, *, namespace: str | None = None) -> dict | None:
        try:
            return self.get(rt, name, namespace=namespace)
        except NotFound:
            return None

    def get_by_uid(self, uid: str) -> dict | None:
        return self._call("store_get_by_uid", uid=uid)

    def revision(self) -> int:
        return self._call("store_revision")

    def list(self, rt: ResourceType, *, namespace: str | None = None, label_selector=None,
             field_selector=None) -> tuple[list[dict], int]:
        items, revision = self._call("list", rt=wire.rt_name(rt), namespace=namespace,
                                     label_selector=wire.encode_label_selector(label_selector),
                                     field_selector=wire.encode_field_selector(field_selector))
        return items, revision

    def watch(self, rt: ResourceType | None, *, namespace: str | None = None, since: int, label_selector=None,
              field_selector=None, stop: threading.Event | None = None, timeout: float | None = None,
              known: set | None = None) -> Iterator[tuple[str, dict]]:
        """As APIServer.watch; stopping (the stop event, or no longer iterating) cancels it there."""
        kwargs = {"rt": wire.rt_name(rt), "namespace": namespace, "since": since,
                  "label_selector": wire.encode_label_selector(label_selector),
                  "field_selector": wire.encode_field_selector(field_selector), "timeout": timeout,
                  "known": None if known is None else [list(pair) for pair in known]}
        conn = self._connection()
        rid, answers = conn.open()
        ended = False
        try:
            conn.send({"id": rid, "method": "watch", "args": [], "kwargs": kwargs})
            while True:
                if stop is None:
                    message = answers.get()
                else:
                    if stop.is_set():
                        return
                    try:
                        message = answers.get(timeout=STOP_POLL)
                    except queue.Empty:
                        continue
                if message is _LOST:
                    ended = True
                    raise conn.error()
                if "event" in message:
                    change_type, obj = message["event"]
                    yield change_type, obj
                    continue
                ended = True
                if "error" in message:
                    raise wire.decode_error(message["error"])
                return
        finally:
            conn.forget(rid)
            if not ended and not conn.closed:
                with contextlib.suppress(ServerUnavailable):
                    conn.send({"id": rid, "cancel": True})

    # -- writes ---------------------------------------------------------------------------

    def create(self, obj: dict, *, namespace: str | None = None, dry_run: bool = False) -> dict:
        return self._call("create", obj=obj, namespace=namespace, dry_run=dry_run)

    def update(self, obj: dict, *, namespace: str | None = None, subresource: str | None = None,
               dry_run: bool = False) -> dict:
        return self._call("update", obj=obj, namespace=namespace, subresource=subresource, dry_run=dry_run)

    def update_status(self, obj: dict, *, dry_run: bool = False) -> dict:
        return self._call("update_status", obj=obj, dry_run=dry_run)

    def update_status_all(self, objs: list[dict], *, dry_run: bool = False) -> list[WriteResult]:
        """As APIServer.update_status_all: write_all's update_status op on the control host."""
        return self.write_all([("update_status", obj) for obj in objs], dry_run=dry_run)

    def patch(self, rt: ResourceType, name: str, patch, *, patch_type: str = "strategic",
              namespace: str | None = None, subresource: str | None = None, dry_run: bool = False) -> dict:
        return self._call("patch", rt=wire.rt_name(rt), name=name, patch=patch, patch_type=patch_type,
                          namespace=namespace, subresource=subresource, dry_run=dry_run)

    def apply(self, obj: dict, *, namespace: str | None = None, dry_run: bool = False) -> WriteResult:
        return wire.decode_write_result(self._call("apply", obj=obj, namespace=namespace, dry_run=dry_run))

    def apply_server_side(self, rt: ResourceType, name: str, obj: dict, *, namespace: str | None = None,
                          field_manager: str, force: bool = False, dry_run: bool = False) -> dict:
        return self._call("apply_server_side", rt=wire.rt_name(rt), name=name, obj=obj, namespace=namespace,
                          field_manager=field_manager, force=force, dry_run=dry_run)

    def delete(self, rt: ResourceType, name: str, *, namespace: str | None = None,
               propagation: str | None = None, grace_period: int | None = None,
               resource_version: str | None = None, dry_run: bool = False) -> dict:
        return self._call("delete", rt=wire.rt_name(rt), name=name, namespace=namespace, propagation=propagation,
                          grace_period=grace_period, resource_version=resource_version, dry_run=dry_run)

    def write_all(self, ops: list[tuple[str, dict]], *, namespace: str | None = None, dry_run: bool = False,
                  atomic: bool = False) -> list[WriteResult]:
        results = self._call("write_all", ops=[[op, obj] for op, obj in ops], namespace=namespace,
                             dry_run=dry_run, atomic=atomic)
        return [wire.decode_write_result(r) for r in results]

    def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None) -> dict:
        return self._call("bind", namespace=namespace, name=name, node_name=node_name, uid=uid)

    def evict(self, namespace: str | None, name: str, *, grace_period: int | None = None,
              dry_run: bool = False) -> dict:
        return self._call("evict", namespace=namespace, name=name, grace_period=grace_period, dry_run=dry_run)

    def create_token(self, namespace: str | None, name: str, token_request: dict) -> dict:
        return self._call("create_token", namespace=namespace, name=name, token_request=token_request)

    def bind_all(self, bindings: list[Binding]) -> list[WriteResult]:
        results = self._call("bind_all", bindings=[wire.encode_binding(b) for b in bindings])
        return [wire.decode_write_result(r) for r in results]

    # -- the store: only on the control host ----------------------------------------------

    def _unsupported(self) -> ClientSideError:
        """Refused here, before any request (the CLI prints `error: ...`)."""
        return ClientSideError("not supported with --server: run this command on the control host")

    def backup(self, dest: str | os.PathLike) -> int:
        raise self._unsupported()

    def restore(self, source: str | os.PathLike) -> int:
        raise self._unsupported()

    def vacuum(self) -> tuple[int, int]:
        raise self._unsupported()

    def rotate_key(self) -> tuple[str, int, str]:
        raise self._unsupported()


__all__ = ["Channel", "RemoteAPIServer", "SSHChannel", "ServerUnavailable", "parse_server_url",
           "ssh_command"]
