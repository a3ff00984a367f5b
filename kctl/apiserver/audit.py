"""The audit log: one JSON line per write the API server answered, never any object data.

The API layer (kctl.apiserver.server) calls `AuditLog.record` after each write has
committed (or failed), outside every SQLite transaction; `kctl audit` (kctl.cli.audit)
reads it back with `read_events`. Each line is a Kubernetes `audit.k8s.io/v1` Event at
level Metadata: auditID, stage ResponseComplete, verb, user {username}, sourceIPs (the
SSH client's address when kctl runs over SSH), userAgent (which client: the kctl
command, a daemon component, git sync), objectRef {resource, namespace, name, apiGroup,
apiVersion, resourceVersion, subresource}, responseStatus {code, and for a failure its
reason and message}, requestReceivedTimestamp, stageTimestamp. Admission hooks that
matched the request are named in annotations. Objects, patches and Secret data are never
written.

The file sits beside the store (`<folder>/<store name>.audit/audit.log`, folder 0700,
file 0600), or at $KCTL_AUDIT_LOG (`off` turns the log off). It is bounded by rotation
as kube-apiserver's --audit-log-maxsize/--audit-log-maxbackup: when a write would take
it over $KCTL_AUDIT_LOG_MAXSIZE MiB (default 10) it becomes audit.log.1 (older ones
shift up, $KCTL_AUDIT_LOG_MAXBACKUP are kept, default 2: three files in all). Several
processes append at once: each batch is one O_APPEND write under an flock, no fsync,
so a daemon's frequent status writes cost one small system call each.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import fcntl
import json
import logging
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from kctl.machinery import compactjson

log = logging.getLogger("kctl.audit")

ENV_PATH = "KCTL_AUDIT_LOG"
ENV_MAXSIZE = "KCTL_AUDIT_LOG_MAXSIZE"
ENV_MAXBACKUP = "KCTL_AUDIT_LOG_MAXBACKUP"
DEFAULT_MAXSIZE_MIB = 10
DEFAULT_MAXBACKUP = 2
#: a failure's message is kept up to this many characters
MESSAGE_LIMIT = 512
#: kctl commands with sub-commands: their user agent names both words
_GROUPS = frozenset({"rollout", "node", "sync", "image", "create", "set", "auth", "config"})
#: root options of `kctl` that take a value (skipped when finding the command)
_ROOT_OPTIONS = frozenset({"--store", "--server", "--identity", "--etcd-cafile", "--etcd-certfile", "--etcd-keyfile",
                           "--etcd-state-dir"})

_encode = compactjson.text  # json's compact text, by orjson
_client: contextvars.ContextVar[str | None] = contextvars.ContextVar("kctl_audit_client", default=None)
_process_agent: str | None = None


@dataclass(frozen=True)
class Requester:
    """Who made the request being served, as an authenticating front end (the HTTPS API) found them."""

    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    source_ips: tuple[str, ...] = ()


_requester: contextvars.ContextVar[Requester | None] = contextvars.ContextVar("kctl_audit_requester", default=None)


# -- who and which client ---------------------------------------------------------------------

@contextlib.contextmanager
def client(user_agent: str | None) -> Iterator[None]:
    """Writes made inside this block name `user_agent` as their client (None: unchanged)."""
    if not user_agent:
        yield
        return
    token = _client.set(_clean(user_agent))
    try:
        yield
    finally:
        _client.reset(token)


@contextlib.contextmanager
def acting_as(requester: Requester | None) -> Iterator[None]:
    """Writes made inside this block are this requester's (audit user, admission userInfo, field manager's user).

    A context variable: a thread pool worker must enter the block itself (asyncio.to_thread copies the context).
    """
    token = _requester.set(requester)
    try:
        yield
    finally:
        _requester.reset(token)


def requester() -> Requester | None:
    """The requester of an `acting_as` block around this call, or None (the process's own user acts)."""
    return _requester.get()


def set_process_agent(user_agent: str | None) -> None:
    """The client name of this whole process (instead of one guessed from its command line)."""
    global _process_agent
    _process_agent = _clean(user_agent) if user_agent else None


def name_command(args: list[str] | None) -> None:
    """Called by the CLI's entry point with its arguments: this process's client is that command."""
    set_process_agent(_command_agent(sys.argv[1:] if args is None else list(args), cli=True))


def user_agent() -> str:
    """Which client is writing: a `client()` block's name, else kctl/VERSION (command[/thread])."""
    explicit = _client.get()
    if explicit:
        return explicit
    base = _process_agent or _argv_agent()
    thread = threading.current_thread()
    if thread is threading.main_thread():
        return base
    key = (base, thread.name)
    agent = _thread_agents.get(key)
    if agent is None:
        if len(_thread_agents) >= _AGENT_CACHE:
            _thread_agents.clear()
        agent = _thread_agents[key] = _thread_agent(base, thread.name)
    return agent


#: user agents already worked out (every write asks: building one costs more than the rest of its audit event)
_AGENT_CACHE = 1024
_argv_agents: dict[tuple[str, ...], str] = {}
_thread_agents: dict[tuple[str, str], str] = {}


def _argv_agent() -> str:
    """_command_agent() of this process's argv, remembered per argv."""
    key = tuple(sys.argv)
    agent = _argv_agents.get(key)
    if agent is None:
        if len(_argv_agents) >= _AGENT_CACHE:
            _argv_agents.clear()
        agent = _argv_agents[key] = _command_agent()
    return agent


def _thread_agent(base: str, component: str) -> str:
    """The agent `base` named for a thread (`replicaset-worker-0` -> replicaset) of this process."""
    for suffix in ("-worker-",):
        if suffix in component:
            component = component.split(suffix, 1)[0]
    if component.startswith("Thread-") or component.startswith("ThreadPoolExecutor"):
        return base
    if base.endswith(")"):
        return f"{base[:-1]}/{_clean(component)})"
    return f"{base} ({_clean(component)})"


def _command_agent(argv: list[str] | None = None, *, cli: bool = False) -> str:
    """kctl/VERSION (COMMAND): the command's words from argv (root options skipped)."""
    from kctl import __version__

    words: list[str] = []
    args = iter(sys.argv[1:] if argv is None else argv)
    for arg in args:
        if arg in _ROOT_OPTIONS:
            next(args, None)
            continue
        if arg.startswith("-"):
            if words:
                break
            continue
        words.append(arg)
        if len(words) == 2 or words[0] not in _GROUPS:
            break
    command = " ".join(words) if words and (cli or _is_kctl()) else Path(sys.argv[0] or "python").name
    return f"kctl/{__version__} ({_clean(command)})"


def _is_kctl() -> bool:
    name = Path(sys.argv[0] or "").name
    return name in ("kctl", "__main__.py", "kctl.exe") or name.startswith("kctl")


def _clean(text: str) -> str:
    """One printable line of at most 200 characters (a client names itself: trust nothing)."""
    line = "".join(c if c.isprintable() else "?" for c in str(text))
    return line[:200]


def source_ips() -> list[str]:
    """The requester's addresses (acting_as), else the SSH client's when this process serves an SSH session."""
    who = _requester.get()
    if who is not None and who.source_ips:
        return list(who.source_ips)
    conn = os.environ.get("SSH_CONNECTION", "").split()
    return [conn[0]] if conn else []


# -- events -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ObjectRef:
    """The object a request was about (what the audit log may say of it: never its content)."""

    resource: str
    namespace: str
    name: str
    api_group: str = ""
    api_version: str = ""
    subresource: str = ""


def now() -> str:
    """RFC 3339 with microseconds, as audit events carry them."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def event(*, verb: str, user: str, ref: ObjectRef, code: int, received: str,
          resource_version: str = "", reason: str = "", message: str = "",
          hooks: Iterable[str] = (), agent: str | None = None, sources: list[str] | None = None,
          completed: str | None = None) -> dict:
    """One audit.k8s.io/v1 Event at level Metadata.

    agent, sources and completed (the stage timestamp) default to this thread's client, the
    SSH client's address and now; a batch computes them once and passes them.
    """
    object_ref: dict = {"resource": ref.resource, "name": ref.name, "apiGroup": ref.api_group,
                        "apiVersion": ref.api_version}
    if ref.namespace:
        object_ref["namespace"] = ref.namespace
    if resource_version:
        object_ref["resourceVersion"] = str(resource_version)
    if ref.subresource:
        object_ref["subresource"] = ref.subresource
    status: dict = {"metadata": {}, "code": code}
    if code >= 400:
        status["status"] = "Failure"
        if reason:
            status["reason"] = reason
        if message:
            status["message"] = message[:MESSAGE_LIMIT]
    record: dict = {
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
        "auditID": _new_id(), "stage": "ResponseComplete", "requestURI": _uri(ref),
        "verb": verb, "user": {"username": user}, "sourceIPs": source_ips() if sources is None else sources,
        "userAgent": agent or user_agent(), "objectRef": object_ref, "responseStatus": status,
        "requestReceivedTimestamp": received, "stageTimestamp": completed or now(),
    }
    names = sorted(set(hooks))
    if names:
        record["annotations"] = {"kctl.io/admission-hooks": ",".join(names)}
    return record


def _new_id() -> str:
    """A random (version 4) UUID, formatted without building a uuid.UUID (cheaper per event)."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"


def _uri(ref: ObjectRef) -> str:
    base = f"/apis/{ref.api_group}/{ref.api_version}" if ref.api_group else f"/api/{ref.api_version or 'v1'}"
    if ref.namespace:
        base += f"/namespaces/{ref.namespace}"
    base += f"/{ref.resource}"
    if ref.name:
        base += f"/{ref.name}"
    if ref.subresource:
        base += f"/{ref.subresource}"
    return base


# -- the file ---------------------------------------------------------------------------------

def path_for_store(store_path: str | os.PathLike) -> Path | None:
    """Where the audit log of a store goes: $KCTL_AUDIT_LOG, else beside the store (None: off)."""
    configured = os.environ.get(ENV_PATH)
    if configured is not None and configured.strip():
        return None if configured.strip().lower() in ("off", "none", "-") else Path(configured)
    store = Path(store_path)
    return store.parent / f"{store.stem}.audit" / "audit.log"


def _env_int(name: str, default: int) -> int:
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value >= 0 else default


class AuditLog:
    """Appends audit events to one file, rotating it by size; safe across threads and processes."""

    def __init__(self, path: str | os.PathLike, *, max_bytes: int | None = None,
                 max_backups: int | None = None) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes if max_bytes is not None else \
            _env_int(ENV_MAXSIZE, DEFAULT_MAXSIZE_MIB) * 1024 * 1024
        self.max_backups = max_backups if max_backups is not None else _env_int(ENV_MAXBACKUP, DEFAULT_MAXBACKUP)
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._failed = False

    @classmethod
    def for_store(cls, store_path: str | os.PathLike) -> "AuditLog | None":
        """The audit log of a store (None when $KCTL_AUDIT_LOG is off)."""
        path = path_for_store(store_path)
        return cls(path) if path is not None else None

    def record(self, events: list[dict]) -> None:
        """Append events as JSON lines in one write. A failure to write is logged, never raised."""
        if not events:
            return
        data = "".join(_encode(e) + "\n" for e in events).encode()
        try:
            with self._lock:
                self._append(data)
            self._failed = False
        except OSError as exc:
            if not self._failed:  # once per run of failures, not once per write
                log.warning("audit log %s: cannot write: %s", self.path, exc)
            self._failed = True
            self._close()

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return self._fd

    def _append(self, data: bytes) -> None:
        for _ in range(8):
            fd = self._open()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                try:
                    same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    same = False
                if not same:  # rotated (or removed) by someone else: write to the new file
                    self._close_locked(fd)
                    continue
                size = os.fstat(fd).st_size
                if size and size + len(data) > self.max_bytes:
                    self._rotate()
                    self._close_locked(fd)
                    continue
                os.write(fd, data)
                return
            finally:
                if self._fd == fd:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        raise OSError("the audit log keeps being rotated under us")

    def _close_locked(self, fd: int) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        self._close()

    def _rotate(self) -> None:
        """audit.log -> audit.log.1 -> ... ; the oldest beyond max_backups is removed."""
        if self.max_backups <= 0:
            os.truncate(self.path, 0)  # keep nothing: start again
            return
        oldest = self.path.with_name(f"{self.path.name}.{self.max_backups}")
        with contextlib.suppress(FileNotFoundError):
            oldest.unlink()
        for i in range(self.max_backups - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.replace(self.path.with_name(f"{self.path.name}.{i}"),
                           self.path.with_name(f"{self.path.name}.{i + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))


def log_files(path: str | os.PathLike) -> list[Path]:
    """The log and its rotated files that exist, oldest first."""
    path = Path(path)
    rotated = sorted((p for p in path.parent.glob(path.name + ".*") if p.suffix[1:].isdigit()),
                     key=lambda p: int(p.suffix[1:]), reverse=True)
    return [*rotated, *([path] if path.exists() else [])]


def read_events(path: str | os.PathLike) -> Iterator[dict]:
    """Every event in the log and its rotated files, oldest first (unreadable lines skipped)."""
    for file in log_files(path):
        try:
            handle = open(file, "rb")
        except FileNotFoundError:  # rotated away meanwhile
            continue
        with handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    yield record


__all__ = ["AuditLog", "ObjectRef", "client", "event", "log_files", "name_command", "path_for_store", "read_events",
           "set_process_agent", "source_ips", "user_agent"]
