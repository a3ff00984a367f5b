"""What a node agent needs from a container runtime, as a Protocol and plain data.

kctl.runtime.podman implements it with podman-py (local unix socket or ssh://), and
kctl.runtime.memory in memory for unit tests. The agent (kctl.agent) only ever speaks
this interface, so the same agent code drives a local or a remote host.

Everything kctl creates carries the LABEL_* labels, so an agent can find and adopt what
exists after a restart, and never touches what it did not make.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Protocol

LABEL_MANAGED = "io.kctl.managed"          # "true" on every pod, container and volume kctl makes
LABEL_POD_UID = "io.kctl.pod.uid"
LABEL_POD_NAMESPACE = "io.kctl.pod.namespace"
LABEL_POD_NAME = "io.kctl.pod.name"
LABEL_CONTAINER = "io.kctl.container.name"  # the container's name in the Pod spec
LABEL_CONTAINER_KIND = "io.kctl.container.kind"  # "init" | "app"
LABEL_SPEC_HASH = "io.kctl.container.hash"  # hash of the container spec it was made from
LABEL_RESTART = "io.kctl.container.restart"  # restart count at the time it was made ("0", "1", ...)
LABEL_VOLUME = "io.kctl.volume.name"         # the volume's name in the Pod spec

#: container events that mean a container stopped running (Podman's names): its pod is synced at once
DEATH_EVENTS = ("died", "oom", "exited")


class RuntimeError_(Exception):
    """A runtime call failed; `message` is one line a person can read."""


class ImageNotFound(RuntimeError_):
    """The image is not on the host (and could not be pulled)."""


class NotFoundInRuntime(RuntimeError_):
    """The pod, container or volume does not exist (any more)."""


@dataclass(frozen=True)
class PortMapping:
    container_port: int
    host_port: int
    protocol: str = "TCP"
    host_ip: str = ""


@dataclass(frozen=True)
class Mount:
    """A named volume (`volume`) or a host path (`host_path`) at `target` in the container."""

    target: str
    volume: str | None = None
    host_path: str | None = None
    read_only: bool = False
    sub_path: str | None = None


@dataclass(frozen=True)
class PodSandboxSpec:
    """One Podman pod: the shared network namespace of a kctl Pod."""

    name: str
    labels: dict[str, str]
    hostname: str = ""
    port_mappings: tuple[PortMapping, ...] = ()
    network: str = ""                        # the Podman network to join ("": Podman's default)
    dns_servers: tuple[str, ...] = ()        # resolv.conf of the pod (kubelet's dnsPolicy); () = the host's
    dns_searches: tuple[str, ...] = ()
    dns_options: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContainerSpec:
    """One container to create inside a pod sandbox."""

    name: str
    image: str
    labels: dict[str, str]
    entrypoint: list[str] | None = None   # Pod spec `command`
    command: list[str] | None = None      # Pod spec `args`
    env: dict[str, str] = field(default_factory=dict)
    working_dir: str | None = None
    mounts: tuple[Mount, ...] = ()
    cpu_limit_millis: int | None = None
    memory_limit_bytes: int | None = None
    user: str | None = None               # "uid" or "uid:gid"
    read_only_rootfs: bool = False
    cap_add: tuple[str, ...] = ()
    cap_drop: tuple[str, ...] = ()
    privileged: bool = False
    stdin: bool = False
    tty: bool = False


@dataclass(frozen=True)
class PodSandbox:
    id: str
    name: str
    labels: dict[str, str]
    running: bool
    ip: str = ""


@dataclass(frozen=True)
class ContainerState:
    """What the runtime knows of one container. Times are RFC 3339 UTC strings or ""."""

    id: str
    name: str
    pod_id: str
    labels: dict[str, str]
    image: str
    image_id: str
    state: str  # "created" | "running" | "exited" (paused/stopping map to running/exited)
    exit_code: int | None = None
    oom_killed: bool = False
    started_at: str = ""
    finished_at: str = ""
    error: str = ""


@dataclass(frozen=True)
class ImageInfo:
    id: str
    names: tuple[str, ...]
    size: int = 0


@dataclass(frozen=True)
class HostInfo:
    """For the Node object: capacity and nodeInfo."""

    cpus: int
    memory_bytes: int
    os: str
    kernel: str
    arch: str
    runtime_version: str  # e.g. "podman://4.3.1"
    hostname: str


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: bytes
    stderr: bytes


@dataclass(frozen=True)
class RegistryAuth:
    """Credentials for one registry (from a pod's imagePullSecrets); repr never shows them."""

    username: str = field(repr=False)
    password: str = field(repr=False)
    registry: str = ""


@dataclass(frozen=True)
class ContainerEvent:
    """One event of the runtime's container event stream (Podman's `podman events`, one container)."""

    container_id: str
    event: str                    # Podman's name: "died", "oom", "exited", "start", "remove", ...
    pod_uid: str = ""             # the container's LABEL_POD_UID label ("" when it has none)
    name: str = ""                # the runtime's name of the container
    exit_code: int | None = None  # for "died"/"exited", when the runtime says
    time: float = 0.0             # when it happened (seconds since the epoch; 0 when unknown)

    @property
    def is_death(self) -> bool:
        """Whether the container stopped running (died, OOM-killed, exited)."""
        return self.event in DEATH_EVENTS


@dataclass(frozen=True)
class ContainerStats:
    """One sample of a running container's usage (Podman's libpod stats): the metrics scraper's input."""

    id: str
    cpu_nanos: int            # CPU time used since the container started (cumulative), in nanoseconds
    memory_bytes: int         # memory in use now
    timestamp: float          # when the sample was taken (seconds since the epoch, the host's clock)
    labels: dict[str, str] = field(default_factory=dict)  # the container's labels (LABEL_POD_UID, ...)


@dataclass(frozen=True)
class HostStats:
    """One sample of a whole host's usage (/proc/stat, /proc/meminfo): a NodeMetrics' input."""

    cpu_nanos: int            # CPU time all CPUs spent busy since boot (cumulative), in nanoseconds
    memory_used_bytes: int    # MemTotal - MemAvailable
    timestamp: float          # when the sample was taken (seconds since the epoch)


class EventStream(Protocol):
    """Container events as they happen. Iterating blocks for the next one; the iteration ends
    when the stream ends and raises RuntimeError_ when it broke. `close()` may be called from
    any thread: the iteration then ends promptly (the connection is shut down)."""

    def __iter__(self) -> Iterator[ContainerEvent]: ...
    def close(self) -> None: ...


class LogStream(Protocol):
    """A container's log (Runtime.logs), one chunk (a line) at a time. Iterating blocks for the next one while
    following; `close()` may be called from any thread: the iteration then ends promptly."""

    def __iter__(self) -> Iterator[bytes]: ...
    def __next__(self) -> bytes: ...
    def close(self) -> None: ...


class ExecSession(Protocol):
    """A command running in a container (Runtime.exec_session): output as it comes, stdin as it is given.
    read/write/close_stdin/resize are called by one caller each; `close()` may be called from any
    thread: the session ends promptly (the stream is shut down)."""

    def read(self) -> tuple[int, bytes] | None:
        """The next piece of output as (1 stdout | 2 stderr, data), blocking; None once the command's
        output ended (with a TTY everything is stdout)."""
        ...
    def write(self, data: bytes) -> None: ...     # to the command's stdin (ignored when it has none)
    def close_stdin(self) -> None: ...            # end of stdin: the command reads EOF
    def resize(self, width: int, height: int) -> None: ...  # the TTY's size (no-op without a TTY)
    def exit_code(self) -> int: ...               # after read() returned None (-1 when it cannot be known)
    def close(self) -> None: ...


class Runtime(Protocol):
    """The container runtime of one host. Calls are blocking and thread-safe."""

    def info(self) -> HostInfo: ...

    # pod sandboxes
    def list_pods(self, labels: dict[str, str]) -> list[PodSandbox]: ...
    def create_pod(self, spec: PodSandboxSpec) -> PodSandbox: ...
    def remove_pod(self, pod_id: str) -> None: ...          # force: stops and removes its containers

    # containers
    def list_containers(self, labels: dict[str, str]) -> list[ContainerState]: ...
    def create_container(self, pod_id: str, spec: ContainerSpec, *,
                         warnings: list[str] | None = None) -> str: ...  # appends what the runtime warned of
    def start_container(self, container_id: str) -> None: ...
    def stop_container(self, container_id: str, *, timeout: int) -> None: ...  # SIGTERM, SIGKILL after timeout s
    def remove_container(self, container_id: str) -> None: ...
    def inspect_container(self, container_id: str) -> ContainerState: ...

    # images
    def image_present(self, ref: str) -> bool: ...
    def pull_image(self, ref: str, *, auth: RegistryAuth | None = None) -> None: ...  # ImageNotFound when it cannot
    def list_images(self) -> list[ImageInfo]: ...
    def save_image(self, ref: str) -> Iterator[bytes]: ...  # a docker-archive tar, in chunks; ImageNotFound
    def load_image(self, chunks: Iterable[bytes]) -> list[str]: ...  # load such a tar; the names it gave

    # volumes
    def list_volumes(self, labels: dict[str, str]) -> list[str]: ...
    def create_volume(self, name: str, labels: dict[str, str]) -> None: ...
    def remove_volume(self, name: str) -> None: ...
    def write_files(self, container_id: str, directory: str, files: dict[str, tuple[bytes, int]]) -> None:
        """Put files (relative path -> (content, mode)) under directory in a created or running container."""
        ...

    # exec and logs
    def exec(self, container_id: str, argv: list[str], *, stdin: bytes | None = None,
             timeout: float | None = None) -> ExecResult: ...
    def exec_session(self, container_id: str, argv: list[str], *, stdin: bool = False,
                     tty: bool = False) -> ExecSession:
        """Start argv in the running container and stream it (the HTTPS API's pods/exec); RuntimeError_
        (NotFoundInRuntime) when it cannot be started."""
        ...
    def attach_session(self, container_id: str, *, stdin: bool = False, tty: bool = False,
                       stdin_once: bool = False) -> ExecSession:
        """Attach to the running container's main process (the HTTPS API's pods/attach): its output from now
        on until it stops, stdin to it when the container has one open. close_stdin() closes the process's
        stdin only with `stdin_once` (Kubernetes' stdinOnce), else it just stops sending; exit_code() is the
        container's once it stopped (-1 while it runs)."""
        ...
    def logs(self, container_id: str, *, follow: bool = False, tail: int | None = None,
             since: float | None = None, timestamps: bool = False) -> LogStream: ...

    # the host itself (the network plugin and kube-proxy: kctl.agent.podnetwork, kctl.agent.proxy)
    def run_on_host(self, argv: list[str], *, stdin: bytes | None = None, timeout: float = 30.0) -> ExecResult:
        """Run argv on the runtime's host (locally, or over the runtime's SSH with its identity and
        known_hosts); no shell of kctl's between. RuntimeError_ when the host cannot be reached."""
        ...
    def ensure_network(self, name: str, *, subnet: str, gateway: str, labels: dict[str, str]) -> None:
        """Make the bridge network `name` with that subnet, unless one with that subnet exists."""
        ...
    def network_subnet(self, name: str) -> str | None: ...  # its subnet, None when there is no such network
    def remove_network(self, name: str) -> None: ...        # a missing one is fine

    # usage (the metrics scraper: kctl.agent.metrics)
    def container_stats(self, labels: dict[str, str]) -> list[ContainerStats]:
        """One usage sample of every running container carrying all `labels` (one stats call)."""
        ...
    def host_stats(self) -> HostStats:
        """One usage sample of the host itself (CPU time since boot, memory in use)."""
        ...

    # events (the node agent's evented PLEG: kctl.agent.events)
    def container_events(self, labels: dict[str, str], *, events: tuple[str, ...] = ()) -> EventStream:
        """Subscribe to the events named in `events` (all when empty) of containers carrying all
        `labels`, from now on. Returns once subscribed (RuntimeError_ when it cannot be)."""
        ...
