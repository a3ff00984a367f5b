"""The Runtime of kctl.runtime.interface on a Podman service, through its REST API.

A node agent (kctl.agent) gets one PodmanRuntime per Node from
kctl.runtime.connect.runtime_for_node and only calls the Runtime methods. The service is
reached on a unix socket (`unix:///run/kctl/podman.sock`) or, for a remote host, through
an SSH tunnel (`ssh://user@host:port/run/podman/podman.sock`) that this module keeps
open: ssh forwards a local unix socket to the remote one, with host keys verified (see
_SSHTunnel), and every call, exec included, then goes over that local socket.

Calls go through podman-py (one client per thread: a podman-py client is a
requests.Session) except exec, which speaks the hijacked exec-start stream itself so
that stdin, exit status and a deadline all work. Every podman-py, requests or socket
error leaves this module as RuntimeError_, ImageNotFound or NotFoundInRuntime with a
one-line message.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import io
import json
import os
import posixpath
import re
import shutil
import socket
import struct
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import requests
from podman import PodmanClient
from podman import errors as podman_errors

from kctl.ssh import ssh_options
from kctl.runtime.hostprobe import HostCheck, HostUnreachable
from kctl.runtime.interface import (
    LABEL_MANAGED,
    ContainerSpec,
    ContainerState,
    ExecResult,
    HostInfo,
    ImageInfo,
    ImageNotFound,
    Mount,
    NotFoundInRuntime,
    PodSandbox,
    PodSandboxSpec,
    RegistryAuth,
    RuntimeError_,
)

CPU_PERIOD_US = 100_000          # CFS period; a limit of N millicores is a quota of N*100 µs
MIN_CPU_QUOTA_US = 1_000         # the kernel refuses smaller quotas
STOP_HTTP_SLACK = 15.0           # seconds a stop call may take beyond its own timeout
EXEC_EXIT_WAIT = 2.0             # seconds to wait for an exec session to record its exit code
ZERO_TIME_PREFIX = "0001-01-01"  # Go's zero time: "never"
IMAGE_CHUNK = 1 << 20            # bytes per chunk of an image streamed by save_image
IMAGE_TRANSFER_TIMEOUT = 600.0   # seconds an image save or load may go without a byte moving
_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?$")

_STATE_MAP = {
    "configured": "created",
    "created": "created",
    "initialized": "created",
    "running": "running",
    "paused": "running",
    "stopping": "running",
    "exited": "exited",
    "stopped": "exited",
    "removing": "exited",
    "dead": "exited",
    "unknown": "exited",
}


# ---------------------------------------------------------------------------
# error translation


def _one_line(text: str) -> str:
    return "; ".join(part.strip() for part in str(text).strip().splitlines() if part.strip())


def _explain(error: BaseException) -> str:
    if isinstance(error, podman_errors.APIError) and isinstance(error.__cause__, OSError):
        return f"cannot reach the Podman service: {_innermost(error.__cause__)}"
    if isinstance(error, podman_errors.APIError):
        return _one_line(error.explanation or str(error))
    return _one_line(str(error) or type(error).__name__)


def _innermost(error: BaseException) -> str:
    """The deepest message of an exception wrapped in others' args (requests, urllib3)."""
    for argument in error.args:
        if isinstance(argument, BaseException):
            return _innermost(argument)
    return _one_line(str(error.args[-1] if error.args else error) or type(error).__name__)


def _is_image_missing(message: str) -> bool:
    lowered = message.lower()
    return "image not known" in lowered or "no such image" in lowered


def _is_object_missing(message: str) -> bool:
    lowered = message.lower()
    return any(f"no such {kind}" in lowered for kind in ("container", "pod", "volume", "exec session"))


@contextlib.contextmanager
def _calling(what: str) -> Iterator[None]:
    """Turn any podman-py / requests / OS error raised inside into one of ours."""
    try:
        yield
    except RuntimeError_:
        raise
    except podman_errors.APIError as error:
        message = _explain(error)
        if _is_image_missing(message) or isinstance(error, podman_errors.ImageNotFound):
            raise ImageNotFound(f"{what}: {message}") from error
        if error.status_code == 404 or _is_object_missing(message):
            raise NotFoundInRuntime(f"{what}: {message}") from error
        raise RuntimeError_(f"{what}: {message}") from error
    except (podman_errors.PodmanError, requests.RequestException, OSError,
            subprocess.SubprocessError, ValueError, TypeError, KeyError) as error:
        raise RuntimeError_(f"{what}: {_explain(error)}") from error


# ---------------------------------------------------------------------------
# conversions (pure)


def rfc3339(value: str | None) -> str:
    """Podman's timestamp as RFC 3339 UTC to the second ("" for Go's zero time)."""
    match = _TIMESTAMP.match(value or "")
    if not match or match[1].startswith(ZERO_TIME_PREFIX):
        return ""
    offset = "+00:00" if match[2] in (None, "Z") else match[2]
    stamp = dt.datetime.fromisoformat(match[1] + offset)
    return stamp.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def container_state(inspect: dict[str, Any]) -> ContainerState:
    """A ContainerState from the libpod inspect document of a container."""
    state = inspect.get("State") or {}
    status = _STATE_MAP.get(str(state.get("Status", "unknown")).lower(), "exited")
    config = inspect.get("Config") or {}
    return ContainerState(
        id=inspect["Id"],
        name=inspect.get("Name", "").lstrip("/"),
        pod_id=inspect.get("Pod", "") or "",
        labels=dict(config.get("Labels") or {}),
        image=inspect.get("ImageName", "") or config.get("Image", ""),
        image_id=inspect.get("Image", ""),
        state=status,
        exit_code=int(state.get("ExitCode", 0)) if status == "exited" else None,
        oom_killed=bool(state.get("OOMKilled", False)),
        started_at=rfc3339(state.get("StartedAt")),
        finished_at=rfc3339(state.get("FinishedAt")) if status == "exited" else "",
        error=_one_line(state.get("Error", "") or ""),
    )


def labels_match(have: dict[str, str] | None, want: dict[str, str]) -> bool:
    """True when every wanted label is present with the wanted value."""
    have = have or {}
    return all(have.get(key) == value for key, value in want.items())


def with_managed_label(labels: dict[str, str]) -> dict[str, str]:
    return {LABEL_MANAGED: "true", **labels}


def port_mappings(spec: PodSandboxSpec) -> list[dict[str, Any]]:
    """podman's portmappings for a pod sandbox."""
    mappings = []
    for port in spec.port_mappings:
        mapping: dict[str, Any] = {"container_port": port.container_port,
                                   "host_port": port.host_port,
                                   "protocol": port.protocol.lower()}
        if port.host_ip:
            mapping["host_ip"] = port.host_ip
        mappings.append(mapping)
    return mappings


def cpu_quota_us(millis: int) -> int:
    return max(MIN_CPU_QUOTA_US, millis * CPU_PERIOD_US // 1000)


def container_specgen(pod_id: str, spec: ContainerSpec, binds: dict[str, str]) -> dict[str, Any]:
    """The libpod create body (SpecGenerator) for a container of a pod.

    `binds` maps a mount's target to the host path bound there (host paths, and volumes
    mounted with a sub_path); other volume mounts are named-volume mounts. The working
    folder is created when the image lacks it, as Kubernetes runtimes do.
    """
    body: dict[str, Any] = {
        "image": spec.image, "name": spec.name, "pod": pod_id,
        "labels": with_managed_label(spec.labels), "env": dict(spec.env),
        "read_only_filesystem": spec.read_only_rootfs, "privileged": spec.privileged,
        "stdin": spec.stdin, "terminal": spec.tty,
        "volumes": [], "mounts": [],
    }
    optional = {"entrypoint": spec.entrypoint, "command": spec.command, "user": spec.user,
                "cap_add": list(spec.cap_add), "cap_drop": list(spec.cap_drop)}
    body.update({key: list(value) if isinstance(value, (list, tuple)) else value
                 for key, value in optional.items() if value is not None and value != []})
    if spec.working_dir:
        body.update(work_dir=spec.working_dir, create_working_dir=True)
    limits = _resource_limits(spec)
    if limits:
        body["resource_limits"] = limits
    for mount in spec.mounts:
        options = ["ro" if mount.read_only else "rw"]
        if mount.target in binds:
            body["mounts"].append({"type": "bind", "source": binds[mount.target],
                                   "destination": mount.target, "options": ["rbind", *options]})
        elif mount.volume:
            body["volumes"].append({"Name": mount.volume, "Dest": mount.target, "Options": options})
    return body


def _resource_limits(spec: ContainerSpec) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    if spec.cpu_limit_millis:
        limits["cpu"] = {"period": CPU_PERIOD_US, "quota": cpu_quota_us(spec.cpu_limit_millis)}
    if spec.memory_limit_bytes:
        limits["memory"] = {"limit": spec.memory_limit_bytes}
    return limits


def registry_auth_header(auth: RegistryAuth) -> str:
    """The X-Registry-Auth header of a pull (podman-py's encode_auth_header): base64url JSON."""
    body = {"username": auth.username, "password": auth.password}
    if auth.registry:
        body["serveraddress"] = auth.registry
    return base64.urlsafe_b64encode(json.dumps(body).encode()).decode()


def saved_name(tags: list[str], ref: str) -> str:
    """The name to save an image under for `ref`: ref itself, the tag a short ref stands for
    (busybox:demo for localhost/busybox:demo), else the image's first tag; "" when it has none."""
    if ref in tags:
        return ref
    last = ref.rsplit("/", 1)[-1]
    wanted = ref if ":" in last or "@" in ref else f"{ref}:latest"
    for tag in tags:
        if tag == wanted or tag.endswith("/" + wanted):
            return tag
    return tags[0] if tags else ""


def safe_join(base: str, relative: str) -> str:
    """base/relative, refusing a relative path that is absolute or climbs out of base."""
    if posixpath.isabs(relative) or ".." in relative.split("/"):
        raise ValueError(f"{relative!r} is not a relative path inside the folder")
    return posixpath.normpath(posixpath.join(base, relative))


def files_tar(files: dict[str, tuple[bytes, int]], *, mtime: float | None = None) -> bytes:
    """A tar archive of relative path -> (content, mode), with every parent folder (0755)."""
    stamp = time.time() if mtime is None else mtime
    buffer = io.BytesIO()
    added: set[str] = set()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path, (content, mode) in sorted(files.items()):
            name = safe_join("/", path).lstrip("/")
            if not name:
                raise ValueError(f"file name {path!r} is empty")
            for folder in _parents(name):
                if folder not in added:
                    archive.addfile(_tar_member(folder, tarfile.DIRTYPE, 0o755, 0, stamp))
                    added.add(folder)
            member = _tar_member(name, tarfile.REGTYPE, mode, len(content), stamp)
            archive.addfile(member, io.BytesIO(content))
    return buffer.getvalue()


def _parents(name: str) -> list[str]:
    parts = name.split("/")[:-1]
    return ["/".join(parts[: index + 1]) for index in range(len(parts))]


def _tar_member(name: str, kind: bytes, mode: int, size: int, mtime: float) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type = kind
    member.mode = mode & 0o7777
    member.size = size
    member.mtime = int(mtime)
    member.uid = member.gid = 0
    return member


def demux_frames(data: bytes) -> tuple[bytes, bytes, bytes]:
    """Split a multiplexed stream into (stdout, stderr, rest-not-yet-complete)."""
    out, err = bytearray(), bytearray()
    index = 0
    while len(data) - index >= 8:
        kind, size = struct.unpack_from(">BxxxL", data, index)
        if len(data) - index - 8 < size:
            break
        payload = data[index + 8: index + 8 + size]
        (err if kind == 2 else out).extend(payload)
        index += 8 + size
    return bytes(out), bytes(err), data[index:]


# ---------------------------------------------------------------------------
# transport


@dataclass(frozen=True)
class SSHAddress:
    """Where an ssh:// Podman URL points: ssh://user@host:port/path/to/podman.sock."""

    user: str
    host: str
    port: int
    socket_path: str

    @classmethod
    def parse(cls, url: str) -> "SSHAddress":
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "ssh" or not parts.hostname or not parts.path:
            raise ValueError(f"not an ssh://user@host[:port]/path URL: {url!r}")
        return cls(user=parts.username or "root", host=parts.hostname,
                   port=parts.port or 22, socket_path=parts.path)


class _SSHTunnel:
    """`ssh -N -L local.sock:remote.sock` kept alive; host keys are checked, never skipped.

    podman-py's own SSH transport passes `StrictHostKeyChecking no` and starts one ssh
    per connection; this tunnel is one ssh process per runtime, restarted when it dies.
    """

    def __init__(self, address: SSHAddress, *, identity: str | None, known_hosts: str | None,
                 connect_timeout: float) -> None:
        self.address = address
        self._identity = identity
        self._known_hosts = known_hosts
        self._connect_timeout = connect_timeout
        self._folder = ""  # made at the first start, kept across restarts
        self._process: subprocess.Popen[bytes] | None = None
        self._starting: subprocess.Popen[bytes] | None = None  # an ssh being started (reset() ends it)
        self._resets = 0  # bumped by reset(): a start under way gives up
        self._lock = threading.Lock()

    @property
    def local_socket(self) -> str:
        return os.path.join(self._folder, "podman.sock")

    def command(self) -> list[str]:
        options = ssh_options(identity=self._identity, known_hosts=self._known_hosts,
                              connect_timeout=self._connect_timeout, port=self.address.port)
        return ["ssh", "-N", "-T", "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes",
                *options, "-L", f"{self.local_socket}:{self.address.socket_path}",
                f"{self.address.user}@{self.address.host}"]

    def ensure(self) -> str:
        """The local socket path, (re)starting ssh when it is not running."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
        return self.local_socket

    def _start(self) -> None:
        if not self._folder:
            self._folder = tempfile.mkdtemp(prefix="kctl-ssh-")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.local_socket)
        log = tempfile.TemporaryFile()
        resets = self._resets
        process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=log)
        self._starting = process
        try:
            deadline = time.monotonic() + self._connect_timeout + 5
            while not os.path.exists(self.local_socket):
                if process.poll() is not None or time.monotonic() > deadline or self._resets != resets:
                    _stop_process(process)
                    log.seek(0)
                    reason = _ssh_verdict(log.read().decode(errors="replace")) or "no socket forwarded"
                    raise RuntimeError_(f"ssh to {self.address.host}:{self.address.port} failed: {reason}")
                time.sleep(0.05)
        finally:
            self._starting = None
        self._process = process

    def reset(self) -> None:
        """End the ssh (also one still starting) without waiting for the lock: the calls over it fail
        now, and the next call starts a fresh ssh (not one stuck in TCP retransmission)."""
        self._resets += 1
        for process in (self._starting, self._process):
            if process is not None and process.poll() is None:
                with contextlib.suppress(OSError):
                    process.kill()

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                _stop_process(self._process)
                self._process = None
            if self._folder:
                shutil.rmtree(self._folder, ignore_errors=True)
                self._folder = ""


def _ssh_verdict(stderr: str) -> str:
    """ssh's last word ("Host key verification failed."), not its 1 KB banner of @ lines and advice."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not set(line.strip()) <= {"@"}]
    return lines[-1][:300] if lines else ""


def _stop_process(process: subprocess.Popen[bytes], *, grace: float = 5) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class _Connection:
    """A local unix socket to the service (direct or tunnelled) and one client per thread."""

    def __init__(self, base_url: str, *, identity: str | None, known_hosts: str | None,
                 timeout: float) -> None:
        self.timeout = timeout
        self._tunnel: _SSHTunnel | None = None
        if base_url.startswith("ssh://"):
            with _calling("Podman URL"):
                address = SSHAddress.parse(base_url)
            self._tunnel = _SSHTunnel(address, identity=identity,
                                      known_hosts=known_hosts, connect_timeout=timeout)
            self._socket = ""
        elif base_url.startswith("unix://"):
            self._socket = base_url[len("unix://"):]
        else:
            raise RuntimeError_(f"unsupported Podman URL {base_url!r} (use unix:// or ssh://)")
        self._local = threading.local()
        self._clients: list[PodmanClient] = []
        self._lock = threading.Lock()
        self._suspended = ""  # why the host cannot be reached (the heartbeat said so); "" normally
        self._generation = 0  # bumped by suspend(): each thread then makes a new client

    def socket_path(self) -> str:
        if self._suspended:
            raise HostUnreachable(self._suspended)
        if self._tunnel is not None:
            return self._tunnel.ensure()
        return self._socket

    def client(self) -> PodmanClient:
        socket_path = self.socket_path()
        client = getattr(self._local, "client", None)
        if client is not None and getattr(self._local, "generation", 0) != self._generation:
            with contextlib.suppress(Exception):
                client.close()
            client = None
        if client is None:
            client = PodmanClient(base_url=f"unix://{socket_path}", timeout=self.timeout)
            self._local.client = client
            self._local.generation = self._generation
            with self._lock:
                self._clients.append(client)
        return client

    def suspend(self, reason: str) -> None:
        """Calls fail at once with HostUnreachable(reason) until resume(); the ssh tunnel is ended."""
        first = not self._suspended
        self._suspended = reason or "the host cannot be reached"
        if first:
            self._generation += 1
            if self._tunnel is not None:
                self._tunnel.reset()

    def resume(self) -> None:
        """Calls go through again (over a fresh tunnel)."""
        self._suspended = ""

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            with contextlib.suppress(Exception):
                client.close()
        self._local = threading.local()
        if self._tunnel is not None:
            self._tunnel.close()


# ---------------------------------------------------------------------------
# exec over the hijacked exec-start stream


def _http_head(sock: socket.socket, request: bytes) -> tuple[int, bytes, bytes]:
    """Send one request; return (status, header block, bytes read after the headers)."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the Podman service closed the connection")
        data += chunk
        if len(data) > 1 << 20:
            raise ConnectionError("oversized response header")
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, head, rest


def _error_body(sock: socket.socket, head: bytes, rest: bytes) -> str:
    length = 0
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    text = rest.decode(errors="replace")
    with contextlib.suppress(ValueError, AttributeError):
        text = json.loads(text).get("message", text)
    return _one_line(text)


def _feed_stdin(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)


def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def exec_stream(socket_path: str, path_prefix: str, exec_id: str, *, stdin: bytes | None,
                deadline: float | None) -> tuple[bytes, bytes]:
    """Start exec session `exec_id` on the service, feed stdin, collect (stdout, stderr)."""
    body = json.dumps({"Detach": False, "Tty": False}).encode()
    request = (f"POST {path_prefix}exec/{exec_id}/start HTTP/1.1\r\nHost: d\r\n"
               "Content-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(_remaining(deadline))
        sock.connect(socket_path)
        status, head, rest = _http_head(sock, request)
        if status >= 400:
            message = _error_body(sock, head, rest)
            if status == 404:
                raise NotFoundInRuntime(f"exec: {message}")
            raise RuntimeError_(f"exec: {message}")
        if stdin is not None:
            threading.Thread(target=_feed_stdin, args=(sock, stdin), daemon=True).start()
        return _read_frames(sock, rest, deadline)


def _read_frames(sock: socket.socket, pending: bytes, deadline: float | None) -> tuple[bytes, bytes]:
    out, err = bytearray(), bytearray()
    while True:
        more_out, more_err, pending = demux_frames(pending)
        out += more_out
        err += more_err
        sock.settimeout(_remaining(deadline))
        chunk = sock.recv(65536)
        if not chunk:
            return bytes(out), bytes(err)
        pending += chunk


# ---------------------------------------------------------------------------
# the runtime


class PodmanRuntime:
    """kctl.runtime.interface.Runtime on one Podman service (unix socket or ssh://)."""

    def __init__(self, base_url: str, *, identity: str | None = None,
                 known_hosts: str | None = None, timeout: float = 30) -> None:
        """`identity` is an SSH key file and `known_hosts` a known_hosts file (ssh:// only)."""
        self.base_url = base_url
        self._timeout = timeout
        self._identity, self._known_hosts = identity, known_hosts
        self._checker: Any = None  # the heartbeat's HostChecker, made at its first check
        self._connection = _Connection(base_url, identity=identity, known_hosts=known_hosts,
                                       timeout=timeout)

    def __enter__(self) -> "PodmanRuntime":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the clients of every thread (and the SSH tunnel, and the heartbeat's connection)."""
        self._connection.close()
        if self._checker is not None:
            self._checker.close()

    def __repr__(self) -> str:
        return f"PodmanRuntime({self.base_url!r})"

    # -- reachability (the node heartbeat's)

    def check_host(self, *, timeout: float, details: bool = True, node: str = "") -> HostCheck:
        """One look at the host over a connection of its own (kctl.runtime.hostprobe); never raises."""
        from kctl.runtime.hostprobe import HostChecker

        if self._checker is None:
            self._checker = HostChecker(self.base_url, node=node, identity=self._identity,
                                        known_hosts=self._known_hosts)
        return self._checker.check(timeout=timeout, details=details)

    def suspend(self, reason: str) -> None:
        """The host cannot be reached: end the tunnel; calls raise HostUnreachable(reason) until resume()."""
        self._connection.suspend(reason)

    def resume(self) -> None:
        """The host answers again: calls go through (a fresh tunnel)."""
        self._connection.resume()

    def ping(self, *, timeout: float | None = None) -> None:
        """GET /_ping: returns once the Podman service answers; raises what the request raised."""
        response = self._api().get("/_ping", timeout=timeout)
        response.raise_for_status()

    # -- plumbing

    def _api(self) -> Any:
        return self._connection.client().api

    def _get(self, path: str, *, params: dict[str, Any] | None = None,
             timeout: float | None = None) -> Any:
        response = self._api().get(path, params=params, timeout=timeout)
        response.raise_for_status()
        return response.json() if response.status_code != 204 else None

    def _post(self, path: str, *, params: dict[str, Any] | None = None,
              body: Any = None, timeout: float | None = None) -> Any:
        data = json.dumps(body) if body is not None else None
        response = self._api().post(path, params=params, data=data, timeout=timeout,
                                    headers={"Content-Type": "application/json"})
        response.raise_for_status()
        return response

    def _delete(self, path: str, *, params: dict[str, Any] | None = None) -> None:
        response = self._api().delete(path, params=params)
        if response.status_code != 404:
            response.raise_for_status()

    # -- host

    def info(self) -> HostInfo:
        with _calling("podman info"):
            info = self._get("/info")
        host = info.get("host", {})
        version = info.get("version", {}).get("Version", "")
        distribution = host.get("distribution", {}) or {}
        return HostInfo(cpus=int(host.get("cpus", 0)), memory_bytes=int(host.get("memTotal", 0)),
                        os=host.get("os", "") or distribution.get("distribution", ""),
                        kernel=host.get("kernel", ""), arch=host.get("arch", ""),
                        runtime_version=f"podman://{version}", hostname=host.get("hostname", ""))

    # -- pod sandboxes

    def list_pods(self, labels: dict[str, str]) -> list[PodSandbox]:
        with _calling("list pods"):
            pods = self._get("/pods/json", params=_filters(labels)) or []
        result = []
        for pod in pods:
            if labels_match(pod.get("Labels"), labels):
                running = _infra_running(pod)
                ip = self._infra_ip(pod.get("InfraId", "")) if running else ""
                result.append(PodSandbox(id=pod["Id"], name=pod.get("Name", ""),
                                         labels=dict(pod.get("Labels") or {}),
                                         running=running, ip=ip))
        return result

    def create_pod(self, spec: PodSandboxSpec) -> PodSandbox:
        """Create the pod and start its infra container, so it has its IP when returned."""
        labels = with_managed_label(spec.labels)
        body: dict[str, Any] = {"name": spec.name, "labels": labels,
                                "portmappings": port_mappings(spec)}
        if spec.hostname:
            body["hostname"] = spec.hostname
        with _calling(f"create pod {spec.name}"):
            pod_id = self._post("/pods/create", body=body).json()["Id"]
        try:
            with _calling(f"start pod {spec.name}"):
                self._start_pod(pod_id, spec.name)
                infra = self._get(f"/pods/{pod_id}/json").get("InfraContainerID", "")
                ip = self._infra_ip(infra)
        except RuntimeError_:
            with contextlib.suppress(RuntimeError_):
                self.remove_pod(pod_id)
            raise
        return PodSandbox(id=pod_id, name=spec.name, labels=labels, running=True, ip=ip)

    def _start_pod(self, pod_id: str, name: str) -> None:
        """Start the pod; its errors come as a list ("Errs"), the first one is reported."""
        response = self._api().post(f"/pods/{pod_id}/start")
        if response.status_code == 304:
            return
        with contextlib.suppress(ValueError, AttributeError):
            errors = (response.json() or {}).get("Errs") or []
            if errors:
                raise RuntimeError_(f"start pod {name}: {_one_line(str(errors[0]))}")
        response.raise_for_status()

    def _infra_ip(self, infra_id: str) -> str:
        if not infra_id:
            return ""
        with contextlib.suppress(RuntimeError_), _calling("inspect infra container"):
            settings = self._get(f"/containers/{infra_id}/json").get("NetworkSettings") or {}
            for network in (settings.get("Networks") or {}).values():
                if network.get("IPAddress"):
                    return str(network["IPAddress"])
            return str(settings.get("IPAddress", "") or "")
        return ""

    def remove_pod(self, pod_id: str) -> None:
        """Kill (SIGKILL) and remove the pod with its containers; a missing pod is fine.

        Killing first makes removal take about 0.2 s instead of each container's stop
        timeout (10 s by default).
        """
        with _calling(f"remove pod {pod_id[:12]}"):
            with contextlib.suppress(podman_errors.APIError):
                self._api().post(f"/pods/{pod_id}/kill", params={"signal": "SIGKILL"})
            self._delete(f"/pods/{pod_id}", params={"force": True})

    # -- containers

    def list_containers(self, labels: dict[str, str]) -> list[ContainerState]:
        """Containers (not pods' infra containers) carrying all the labels, inspected."""
        with _calling("list containers"):
            listed = self._get("/containers/json", params={"all": True, **_filters(labels)}) or []
        result = []
        for entry in listed:
            if entry.get("IsInfra") or not labels_match(entry.get("Labels"), labels):
                continue
            with contextlib.suppress(NotFoundInRuntime):
                result.append(self.inspect_container(entry["Id"]))
        return result

    def create_container(self, pod_id: str, spec: ContainerSpec, *, warnings: list[str] | None = None) -> str:
        """Create the container; Podman's warnings (settings it ignores) are appended to `warnings`.

        Rootless Podman on cgroup v1, for one, creates the container but drops its
        resource limits, and says so only in the response's "Warnings".
        """
        with _calling(f"create container {spec.name}"):
            binds = {mount.target: self._bind_source(mount) for mount in spec.mounts
                     if mount.host_path or mount.sub_path}
            body = container_specgen(pod_id, spec, binds)
            created = self._post("/containers/create", body=body).json()
            if warnings is not None:
                warnings.extend(_one_line(str(text)) for text in created.get("Warnings") or ())
            return str(created["Id"])

    def _bind_source(self, mount: Mount) -> str:
        """The host path bound for a host-path mount, or for a volume's sub_path."""
        if mount.volume:
            base = self._get(f"/volumes/{mount.volume}/json")["Mountpoint"]
        elif mount.host_path:
            base = mount.host_path
        else:
            raise ValueError(f"mount at {mount.target} names neither a volume nor a host path")
        return safe_join(base, mount.sub_path) if mount.sub_path else base

    def start_container(self, container_id: str) -> None:
        with _calling(f"start container {container_id[:12]}"):
            self._post(f"/containers/{container_id}/start")

    def stop_container(self, container_id: str, *, timeout: int) -> None:
        """SIGTERM (or the image's stop signal), SIGKILL after `timeout` s; stopped is fine."""
        with _calling(f"stop container {container_id[:12]}"):
            self._post(f"/containers/{container_id}/stop", params={"timeout": max(0, int(timeout))},
                       timeout=max(0, timeout) + STOP_HTTP_SLACK)

    def remove_container(self, container_id: str) -> None:
        """Kill (SIGKILL) and remove with its anonymous volumes; missing is fine.

        Podman's own force-removal first waits the stop timeout (10 s) for SIGTERM.
        """
        with _calling(f"remove container {container_id[:12]}"):
            with contextlib.suppress(podman_errors.APIError):
                self._api().post(f"/containers/{container_id}/kill", params={"signal": "SIGKILL"})
            self._delete(f"/containers/{container_id}", params={"force": True, "v": True})

    def inspect_container(self, container_id: str) -> ContainerState:
        with _calling(f"inspect container {container_id[:12]}"):
            return container_state(self._get(f"/containers/{container_id}/json"))

    # -- images

    def image_present(self, ref: str) -> bool:
        with _calling(f"look up image {ref}"):
            response = self._api().get(f"/images/{ref}/exists")
            if response.status_code == 404:
                return False
            response.raise_for_status()
            return True

    def pull_image(self, ref: str, *, auth: RegistryAuth | None = None) -> None:
        """Pull `ref` (with `auth`, sent as X-Registry-Auth); ImageNotFound when it cannot be pulled.

        A `localhost/` image is built on its host and never pulled: when absent it fails
        at once instead of after Podman's 3 s of trying https://localhost.
        """
        if ref.startswith("localhost/"):
            if not self.image_present(ref):
                raise ImageNotFound(f"image {ref} is not on the host (localhost/ images are built there, not pulled)")
            return
        with _calling(f"pull image {ref}"):
            headers = {"X-Registry-Auth": registry_auth_header(auth)} if auth is not None else None
            response = self._api().post("/images/pull", params={"reference": ref, "policy": "always"},
                                        headers=headers, stream=True, timeout=(self._timeout, self._timeout))
            response.raise_for_status()
            try:
                for line in response.iter_lines():
                    report = json.loads(line) if line.strip() else {}
                    if report.get("error"):
                        raise ImageNotFound(f"pull image {ref}: {_one_line(report['error'])}")
            finally:
                response.close()

    def list_images(self) -> list[ImageInfo]:
        with _calling("list images"):
            images = self._get("/images/json") or []
        return [ImageInfo(id=image["Id"], names=tuple(image.get("RepoTags") or image.get("Names") or ()),
                          size=int(image.get("Size", 0) or 0)) for image in images]

    def save_image(self, ref: str) -> Iterator[bytes]:
        """The image as a docker-archive tar carrying its name, streamed in chunks (never whole
        in memory); ImageNotFound when the host lacks it. Podman writes the archive first."""
        what = f"save image {ref}"
        with _calling(what):
            inspect = self._get(f"/images/{ref}/json")
            name = saved_name([str(tag) for tag in inspect.get("RepoTags") or ()], ref) or inspect["Id"]
            response = self._api().get(f"/images/{name}/get", params={"format": "docker-archive"},
                                       stream=True, timeout=(self._timeout, IMAGE_TRANSFER_TIMEOUT))
            response.raise_for_status()
        return self._image_chunks(response, what)

    @staticmethod
    def _image_chunks(response: Any, what: str) -> Iterator[bytes]:
        try:
            with _calling(what):
                yield from response.iter_content(chunk_size=IMAGE_CHUNK)
        finally:
            response.close()

    def load_image(self, chunks: Iterable[bytes]) -> list[str]:
        """Load a docker-archive tar sent as it comes from `chunks` (chunked upload); the names it gave."""
        with _calling("load image"):
            response = self._api().post("/images/load", data=iter(chunks),
                                        headers={"Content-Type": "application/x-tar"},
                                        timeout=(self._timeout, IMAGE_TRANSFER_TIMEOUT))
            response.raise_for_status()
            return [str(name) for name in (response.json() or {}).get("Names") or ()]

    # -- volumes

    def list_volumes(self, labels: dict[str, str]) -> list[str]:
        with _calling("list volumes"):
            volumes = self._get("/volumes/json", params=_filters(labels)) or []
        return [volume["Name"] for volume in volumes if labels_match(volume.get("Labels"), labels)]

    def create_volume(self, name: str, labels: dict[str, str]) -> None:
        """Create a named volume; one that exists already is left as it is."""
        with _calling(f"create volume {name}"):
            response = self._api().post("/volumes/create", data=json.dumps(
                {"Name": name, "Label": with_managed_label(labels)}),
                headers={"Content-Type": "application/json"})
            if response.status_code >= 400 and "already exists" in response.text:
                return
            response.raise_for_status()

    def remove_volume(self, name: str) -> None:
        """Remove a named volume (force: also from stopped containers); missing is fine."""
        with _calling(f"remove volume {name}"):
            self._delete(f"/volumes/{name}", params={"force": True})

    def write_files(self, container_id: str, directory: str, files: dict[str, tuple[bytes, int]]) -> None:
        """Put files (relative path -> (content, mode)) under directory in a created or running container."""
        with _calling(f"write files to {directory} in container {container_id[:12]}"):
            archive = files_tar(files)
            response = self._api().put(f"/containers/{container_id}/archive",
                                       params={"path": directory}, data=archive)
            response.raise_for_status()

    # -- exec and logs

    def exec(self, container_id: str, argv: list[str], *, stdin: bytes | None = None,
             timeout: float | None = None) -> ExecResult:
        """Run argv in the running container; RuntimeError_ when it outlives `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        what = f"exec {argv[0] if argv else ''} in container {container_id[:12]}"
        with _calling(what):
            exec_id = self._post(f"/containers/{container_id}/exec", body={
                "AttachStdin": stdin is not None, "AttachStdout": True, "AttachStderr": True,
                "Cmd": list(argv), "Tty": False}).json()["Id"]
            try:
                stdout, stderr = exec_stream(self._connection.socket_path(), self._api().path_prefix,
                                             exec_id, stdin=stdin, deadline=deadline)
            except (TimeoutError, socket.timeout):
                raise RuntimeError_(f"{what}: timed out after {timeout:g} s") from None
            return ExecResult(exit_code=self._exec_exit_code(exec_id), stdout=stdout, stderr=stderr)

    def _exec_exit_code(self, exec_id: str) -> int:
        deadline = time.monotonic() + EXEC_EXIT_WAIT
        while True:
            try:
                session = self._get(f"/exec/{exec_id}/json")
            except podman_errors.NotFound as error:
                raise RuntimeError_(f"exec session {exec_id[:12]} is gone: exit code lost") from error
            if not session.get("Running") or time.monotonic() > deadline:
                return int(session.get("ExitCode", -1) if session.get("ExitCode") is not None else -1)
            time.sleep(0.02)

    def logs(self, container_id: str, *, follow: bool = False, tail: int | None = None,
             since: float | None = None, timestamps: bool = False) -> Iterator[bytes]:
        """The container's output (stdout and stderr), one chunk (a line) at a time."""
        params: dict[str, Any] = {"stdout": True, "stderr": True, "follow": follow,
                                  "timestamps": timestamps}
        if tail is not None:
            params["tail"] = str(max(0, tail))
        if since is not None:
            params["since"] = f"{since:.9f}"
        what = f"logs of container {container_id[:12]}"
        with _calling(what):
            response = self._api().get(f"/containers/{container_id}/logs", params=params, stream=True,
                                       timeout=(self._timeout, None if follow else self._timeout))
            response.raise_for_status()
        return self._log_frames(response, what)

    @staticmethod
    def _log_frames(response: Any, what: str) -> Iterator[bytes]:
        try:
            with _calling(what):
                while True:
                    header = response.raw.read(8)
                    if len(header) < 8:
                        return
                    _, size = struct.unpack(">BxxxL", header)
                    if size:
                        yield response.raw.read(size)
        finally:
            response.close()

    # -- events

    def container_events(self, labels: dict[str, str], *, events: tuple[str, ...] = ()) -> Any:
        """Podman's container events from now on, over the runtime's socket or SSH tunnel
        (kctl.runtime.podman_events: a stream that close() ends from any thread)."""
        from kctl.runtime.podman_events import open_event_stream

        with _calling("container events"):
            return open_event_stream(self._connection.socket_path(), self._api().path_prefix,
                                     labels=labels, events=events, timeout=self._timeout)


def _filters(labels: dict[str, str]) -> dict[str, str]:
    """Query parameters that filter by labels server-side (we check again client-side)."""
    if not labels:
        return {}
    criteria: dict[str, list[str]] = {"label": [f"{key}={value}" for key, value in sorted(labels.items())]}
    return {"filters": json.dumps(criteria)}


def _infra_running(pod: dict[str, Any]) -> bool:
    infra = pod.get("InfraId", "")
    for container in pod.get("Containers") or []:
        if container.get("Id") == infra:
            return str(container.get("Status", "")).lower() == "running"
    return str(pod.get("Status", "")).lower() in ("running", "degraded")
