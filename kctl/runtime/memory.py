"""The Runtime of kctl.runtime.interface kept in memory, for unit tests of the node agent.

Unit tests (tests/unit/agent, tests/unit/runtime) hand a MemoryRuntime to
kctl.agent.podsync instead of a PodmanRuntime. It implements every Runtime method and
adds controls a test needs: `crash` a container, decide what `exec` returns, choose which
images are present (`images`) or may be pulled (`pullable`), drive time with a FakeClock,
and read back every call made (`calls`) to assert, say, that nothing was created twice.

How a container's process behaves is read from its command line (entrypoint + command),
so a Pod manifest alone says what happens:

- no command, or anything not matched below: runs until stopped, crashed or removed;
- the last word is `true` (or `/bin/true`): exits 0 at once; `false`: exits 1 at once;
- the command line ends in `exit N` (e.g. `["sh", "-c", "echo hi; exit 3"]`): exits N at once;
- it ends in `sleep S` (e.g. `["sleep", "5"]`): runs S seconds of the clock, then exits 0;
  `sleep S; exit N` (or `&&`) runs S seconds, then exits N.

A command line made only of what kctl.runtime.fakeshell knows (`sh -c` scripts of `echo` (also
`>&2`), `cat`, `pwd`, `true`, `false`, `sleep S`, `exit N`, joined by `;`, `&&`, `||`,
with `$VAR` taken from the spec's env) runs as a shell would: its output reaches the
log at the time it is written (so `logs` with `since`, `tail` and `timestamps` works as
Podman's), e.g. `["echo", "hi"]` prints and exits 0 at once. `exec` runs such commands
the same way (`cat` echoes stdin or reads what write_files put there) when no rule or
hook says otherwise; other commands still return 0 with no output (Podman would run them).
Of another container command line, what comes before the first command it does not know
still writes its output (`trap` is skipped), and the rule above says when it exits.

A stopped container exits 143 (SIGTERM), or 137 when its process ignores SIGTERM: its
name is in `ignores_sigterm`, or its PID 1 is a shell or `sleep` without a `trap` (as
on Linux, PID 1 of a container has no default signal actions, so busybox `sleep` and
`sh` under Podman die only by SIGKILL); the clock then moves on by the stop timeout. A
stopped container can be started again (its log keeps the earlier output). Creating a
pod that publishes a host port another pod publishes fails, as Podman's does.
Unlike Podman, creating a container that mounts a named volume which does not exist
fails (Podman would quietly make an unlabelled one): the agent must create its volumes.
As with Podman, `write_files` into a read-only mount of a *running* container fails
(Podman copies inside the running container's mount namespace); into a created or
exited container it writes to the volume itself.

The host itself (the network plugin's and kube-proxy's commands): `run_on_host` records
each argv with its stdin (`host_commands`) and returns what `set_host_result` chose (the
last matching rule; exit 0 with no output by default), or raises RuntimeError_ while
`host_error` is set (the host cannot be reached). Networks live in `networks` (name ->
subnet); a pod whose spec names one gets its address from that subnet; removing a network
a running pod uses fails, as Podman's does.

`exec_session` is `exec` streamed: stdin written to the session is collected until it is closed
(at once when the session has no stdin), then the command runs as `exec` runs it and its stdout
and stderr are read back; a TTY merges them. `attach_session` has no process to read from: it
sends no output, keeps what is written to its stdin in `attached_input` (container id -> bytes)
and ends when the container stops running (or the session is closed).

`container_events` streams what Podman's event stream would: "start", "oom" then "died"
(with the exit code) when a container stops for any reason (a crash, a stop, its pod
removed), "remove". A planned exit (`sleep S`) happens when a call looks at the
container, or at `settle()`. Test controls for the stream: `drop_event_streams` ends
the open streams (cleanly or with an error), `events_error` makes new subscriptions
fail, `event_streams` counts the open ones.

Usage (the metrics scraper's input) is set, not measured: `set_usage(container_id,
cpu_nanos=, memory_bytes=)` (cumulative CPU time; a running container never set reports 0),
`host_usage` (a HostStats; its timestamp is replaced by the clock's), and `stats_error`
makes `container_stats` and `host_stats` fail while set. Samples carry the clock's time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import itertools
import posixpath
import queue
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

from kctl.runtime.fakeshell import FALSE as _FALSE
from kctl.runtime.fakeshell import TRUE as _TRUE
from kctl.runtime.fakeshell import Script, ignores_sigterm, interpret
from kctl.runtime.interface import (
    LABEL_CONTAINER,
    LABEL_MANAGED,
    LABEL_POD_UID,
    ContainerEvent,
    ContainerSpec,
    ContainerState,
    ContainerStats,
    HostStats,
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

EXIT_SIGTERM = 143
EXIT_SIGKILL = 137
EXIT_START_ERROR = 128
_SCRIPT_END = re.compile(
    r"(?:^|[\s;&|(])(?:sleep\s+(?P<sleep>\d+(?:\.\d+)?)\s*(?:;|&&)\s*)?exit\s+(?P<code>\d+)\s*$"
    r"|(?:^|[\s;&|(])sleep\s+(?P<only_sleep>\d+(?:\.\d+)?)\s*$")
_ARCHIVE_MAGIC = b"memory-image-archive\n"  # what save_image's stand-in archive starts with

ExecHook = Callable[[ContainerState, list[str]], "ExecResult | int | None"]


class FakeClock:
    """A clock that only moves when told: pass it as `clock` here and as SyncContext.now."""

    def __init__(self, *, start: float = 1_700_000_000.0) -> None:
        self.now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> float:
        """Move on by `seconds`; the new time."""
        with self._lock:
            self.now += seconds
            return self.now


def planned_exit(argv: Sequence[str]) -> tuple[int, float] | None:
    """(exit code, seconds it runs first) by the module's convention; None: runs until stopped."""
    if not argv:
        return None
    last = argv[-1].strip()
    if last in _TRUE:
        return 0, 0.0
    if last in _FALSE:
        return 1, 0.0
    match = _SCRIPT_END.search(" ".join(part.strip() for part in argv))
    if match is None:
        return None
    if match["only_sleep"] is not None:
        return 0, float(match["only_sleep"])
    return int(match["code"]), float(match["sleep"] or 0.0)


def rfc3339(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _nanos(seconds: float) -> str:
    """An RFC 3339 UTC time with nanoseconds, as Podman stamps log lines."""
    whole = int(seconds)
    stamp = dt.datetime.fromtimestamp(whole, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{min(int((seconds - whole) * 1e9), 999_999_999):09d}Z"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _labels_match(have: dict[str, str], want: dict[str, str]) -> bool:
    return all(have.get(key) == value for key, value in want.items())


@dataclass
class _ExecRule:
    result: ExecResult
    container: str | None
    argv: tuple[str, ...] | None
    duration: float


@dataclass
class _Pod:
    id: str
    spec: PodSandboxSpec
    labels: dict[str, str]
    ip: str
    running: bool = True


@dataclass
class _Container:
    id: str
    pod_id: str
    spec: ContainerSpec
    labels: dict[str, str]
    image_id: str
    state: str = "created"
    exit_code: int | None = None
    oom_killed: bool = False
    started: float | None = None
    finished: float | None = None
    error: str = ""
    planned: tuple[int, float] | None = None
    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    output: list[tuple[float, bytes]] = field(default_factory=list)  # (when written, data)

    @property
    def argv(self) -> list[str]:
        return [*(self.spec.entrypoint or []), *(self.spec.command or [])]


class _MemoryEventStream:
    """One subscription to a MemoryRuntime's container events (an EventStream)."""

    def __init__(self, runtime: "MemoryRuntime", labels: dict[str, str], events: tuple[str, ...]) -> None:
        self._runtime = runtime
        self._labels = dict(labels)
        self._events = tuple(events)
        self._items: queue.SimpleQueue[ContainerEvent | RuntimeError_ | None] = queue.SimpleQueue()
        self.closed = False

    def offer(self, event: ContainerEvent, labels: dict[str, str]) -> None:
        """Pass the event on if the container carries the subscribed labels."""
        if not self.closed and _labels_match(labels, self._labels) and (
                not self._events or event.event in self._events):
            self._items.put(event)

    def end(self, error: RuntimeError_ | None = None) -> None:
        """The stream ends (breaks with `error`) after the events already in it."""
        self._items.put(error)

    def __iter__(self) -> Iterator[ContainerEvent]:
        while not self.closed:
            item = self._items.get()
            if item is None or self.closed:
                return
            if isinstance(item, RuntimeError_):
                raise item
            yield item

    def close(self) -> None:
        self.closed = True
        self._items.put(None)
        self._runtime._unsubscribe(self)


@dataclass
class _Volume:
    labels: dict[str, str]
    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)


class _MemoryExecSession:
    """Runtime.exec_session in memory: collect stdin until closed, then `exec` and hand out its output."""

    def __init__(self, run: Callable[[bytes | None], ExecResult], *, stdin: bool, tty: bool) -> None:
        self._run, self._tty = run, tty
        self._stdin: bytearray | None = bytearray() if stdin else None
        self._stdin_done = threading.Event()
        self._closed = False
        self._output: list[tuple[int, bytes]] | None = None
        self._exit = -1
        if not stdin:
            self._stdin_done.set()

    def read(self) -> tuple[int, bytes] | None:
        if self._output is None:
            self._stdin_done.wait()
            if self._closed:
                return None
            result = self._run(None if self._stdin is None else bytes(self._stdin))
            self._exit = result.exit_code
            pieces = [(1, result.stdout), (1 if self._tty else 2, result.stderr)]
            self._output = [(n, data) for n, data in pieces if data]
        if self._closed or not self._output:
            return None
        return self._output.pop(0)

    def write(self, data: bytes) -> None:
        if self._stdin is not None and not self._stdin_done.is_set():
            self._stdin += data

    def close_stdin(self) -> None:
        self._stdin_done.set()

    def resize(self, width: int, height: int) -> None:
        """No TTY to resize in memory."""

    def exit_code(self) -> int:
        return self._exit

    def close(self) -> None:
        self._closed = True
        self._stdin_done.set()


class _MemoryLog:
    """Runtime.logs in memory: the lines logged so far (it does not follow); close() ends the iteration."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = list(chunks)
        self._closed = False

    def __iter__(self) -> "_MemoryLog":
        return self

    def __next__(self) -> bytes:
        if self._closed or not self._chunks:
            raise StopIteration
        return self._chunks.pop(0)

    def close(self) -> None:
        self._closed = True


class _MemoryAttachSession:
    """Runtime.attach_session in memory: no output; ends when the container stops (or on close)."""

    POLL = 0.05  # seconds between two looks at the container's state

    def __init__(self, runtime: "MemoryRuntime", container_id: str, *, stdin: bool) -> None:
        self._runtime, self._id, self._stdin = runtime, container_id, stdin
        self._closed = threading.Event()

    def read(self) -> tuple[int, bytes] | None:
        while not self._closed.is_set():
            try:
                if self._runtime.inspect_container(self._id).state != "running":
                    return None
            except RuntimeError_:
                return None
            self._closed.wait(self.POLL)
        return None

    def write(self, data: bytes) -> None:
        if self._stdin:
            with self._runtime._lock:
                self._runtime.attached_input[self._id] = self._runtime.attached_input.get(self._id, b"") + data

    def close_stdin(self) -> None:
        self._stdin = False

    def resize(self, width: int, height: int) -> None:
        """No TTY to resize in memory."""

    def exit_code(self) -> int:
        state = self._runtime.inspect_container(self._id)
        return -1 if state.state == "running" or state.exit_code is None else state.exit_code

    def close(self) -> None:
        self._closed.set()


class MemoryRuntime:
    """A whole Runtime in memory, with test controls (see the module docstring)."""

    def __init__(self, *, images: Iterable[str] = (), pullable: Iterable[str] = (),
                 clock: Callable[[], float] = time.time, host: HostInfo | None = None) -> None:
        self.images: set[str] = set(images)
        self.pullable: set[str] = set(pullable)
        self.clock = clock
        self.host = host or HostInfo(cpus=4, memory_bytes=8 * 1024 ** 3, os="linux", kernel="6.1.0",
                                     arch="amd64", runtime_version="memory://1", hostname="memory")
        self.calls: list[tuple] = []
        self.ignores_sigterm: set[str] = set()       # container names (Pod spec) that ignore SIGTERM
        self.start_errors: dict[str, str] = {}       # container name (Pod spec) -> start error message
        self.create_warnings: list[str] = []         # warnings every container creation returns
        self.exec_hook: ExecHook | None = None
        self.events_error: str | None = None         # container_events fails with this while set
        self.host_files: dict[str, tuple[bytes, int]] = {}  # written through host-path mounts
        self.networks: dict[str, str] = {}                  # Podman networks: name -> subnet
        self.network_labels: dict[str, dict[str, str]] = {}
        self.host_commands: list[tuple[list[str], bytes | None]] = []  # run_on_host: (argv, stdin), in order
        self.attached_input: dict[str, bytes] = {}  # attach_session: what was written to stdin, by container
        self.host_error: str | None = None                  # run_on_host fails with this while set
        self.usage: dict[str, tuple[int, int]] = {}         # container id -> (cpu_nanos, memory_bytes)
        self.host_usage = HostStats(cpu_nanos=0, memory_used_bytes=0, timestamp=0.0)
        self.stats_error: str | None = None                 # container_stats / host_stats fail with this
        self._host_rules: list[tuple[tuple[str, ...], ExecResult]] = []
        self._exec_rules: list[_ExecRule] = []
        self._pods: dict[str, _Pod] = {}
        self._containers: dict[str, _Container] = {}
        self._volumes: dict[str, _Volume] = {}
        self._ids = itertools.count(1)
        self._streams: list[_MemoryEventStream] = []
        self._lock = threading.RLock()

    # -- test controls --------------------------------------------------------------------

    def crash(self, container_id: str, exit_code: int, *, oom: bool = False) -> None:
        """Make a running container exit now with `exit_code` (OOM-killed if `oom`)."""
        with self._lock:
            container = self._get_container(container_id)
            if container.state != "running":
                raise RuntimeError_(f"container {container_id[:12]} is not running")
            self._exit(container, exit_code, oom=oom)

    def set_exec_result(self, result: ExecResult | int, *, container: str | None = None,
                        argv: Sequence[str] | None = None, duration: float = 0.0) -> None:
        """What exec returns from now on, for a container (name in the Pod spec, or id) and argv.

        Later rules win over earlier ones. `duration` seconds pass on a FakeClock; an exec
        whose timeout is shorter fails as timed out. Without any rule exec returns 0.
        """
        if isinstance(result, int):
            result = ExecResult(exit_code=result, stdout=b"", stderr=b"")
        with self._lock:
            self._exec_rules.append(_ExecRule(result=result, container=container,
                                              argv=tuple(argv) if argv is not None else None, duration=duration))

    def set_host_result(self, result: ExecResult | int, *, argv: Sequence[str] = ()) -> None:
        """What run_on_host returns from now on for commands starting with `argv` (all when empty).

        Later rules win over earlier ones.
        """
        if isinstance(result, int):
            result = ExecResult(exit_code=result, stdout=b"", stderr=b"")
        with self._lock:
            self._host_rules.append((tuple(argv), result))

    def set_usage(self, container_id: str, *, cpu_nanos: int, memory_bytes: int) -> None:
        """What container_stats reports for a container from now on (cumulative CPU ns, bytes in use)."""
        with self._lock:
            self.usage[container_id] = (cpu_nanos, memory_bytes)

    def stop_sandbox(self, pod_id: str) -> None:
        """The pod's infra container dies (a host reboot): the pod and its containers stop."""
        with self._lock:
            pod = self._pods[pod_id]
            pod.running = False
            for container in self._containers.values():
                if container.pod_id == pod_id and container.state == "running":
                    self._exit(container, EXIT_SIGKILL)

    def drop_event_streams(self, error: str | None = None) -> int:
        """End every open event stream (with RuntimeError_(error) when given); how many there were."""
        with self._lock:
            streams, self._streams = self._streams, []
        for stream in streams:
            stream.end(RuntimeError_(error) if error is not None else None)
        return len(streams)

    @property
    def event_streams(self) -> int:
        """How many event streams are open."""
        with self._lock:
            return len(self._streams)

    def settle(self) -> None:
        """Containers whose planned run time is over exit now (and their events go out)."""
        with self._lock:
            for container in list(self._containers.values()):
                self._settle(container)

    def emit(self, container_id: str, data: bytes) -> None:
        """Append output to a container's log."""
        with self._lock:
            self._get_container(container_id).output.append((self.clock(), data))

    def read_file(self, container_id: str, path: str) -> tuple[bytes, int] | None:
        """(content, mode) of a file written with write_files, as the container sees it."""
        with self._lock:
            container = self._get_container(container_id)
            store, relative = self._resolve(container, path)
            return store.get(relative)

    def volume_files(self, name: str) -> dict[str, tuple[bytes, int]]:
        """The files written into a named volume (relative path -> (content, mode))."""
        with self._lock:
            return dict(self._volumes[name].files)

    def calls_to(self, method: str) -> list[tuple]:
        """The recorded calls of one method, in order (each a tuple starting with its name)."""
        return [call for call in list(self.calls) if call[0] == method]

    def count(self, method: str) -> int:
        return len(self.calls_to(method))

    def container_ids(self, *, name: str | None = None) -> list[str]:
        """Ids of the containers that exist, oldest first (only those named `name` in the Pod spec)."""
        with self._lock:
            return [c.id for c in self._containers.values()
                    if name is None or c.labels.get(LABEL_CONTAINER) == name]

    # -- host -----------------------------------------------------------------------------

    def info(self) -> HostInfo:
        self._record("info")
        return self.host

    # -- pod sandboxes --------------------------------------------------------------------

    def list_pods(self, labels: dict[str, str]) -> list[PodSandbox]:
        self._record("list_pods", dict(labels))
        with self._lock:
            return [self._sandbox(pod) for pod in self._pods.values() if _labels_match(pod.labels, labels)]

    def create_pod(self, spec: PodSandboxSpec) -> PodSandbox:
        self._record("create_pod", spec.name)
        with self._lock:
            if any(pod.spec.name == spec.name for pod in self._pods.values()):
                raise RuntimeError_(f"create pod {spec.name}: name is already in use")
            taken = {(port.host_port, port.protocol.upper()) for pod in self._pods.values()
                     for port in pod.spec.port_mappings if port.host_port}
            for port in spec.port_mappings:
                if (port.host_port, port.protocol.upper()) in taken:
                    raise RuntimeError_(f"start pod {spec.name}: cannot listen on the {port.protocol} port "
                                        f"{port.host_port}: address already in use")
            number = next(self._ids)
            ip = f"10.88.{number // 250}.{number % 250 + 2}"
            if spec.network:
                if spec.network not in self.networks:
                    raise RuntimeError_(f"create pod {spec.name}: unable to find network with name or ID "
                                        f"{spec.network}: network not found")
                subnet = ipaddress.ip_network(self.networks[spec.network])
                ip = str(subnet.network_address + 1 + number % (subnet.num_addresses - 3) + 1)
            pod = _Pod(id=_digest(f"pod-{number}"), spec=spec, labels={LABEL_MANAGED: "true", **spec.labels}, ip=ip)
            self._pods[pod.id] = pod
            return self._sandbox(pod)

    def remove_pod(self, pod_id: str) -> None:
        self._record("remove_pod", pod_id)
        with self._lock:
            self._pods.pop(pod_id, None)
            for container in [c for c in self._containers.values() if c.pod_id == pod_id]:
                self._settle(container)
                if container.state == "running":
                    self._exit(container, EXIT_SIGKILL)
                del self._containers[container.id]
                self._publish(container, "remove")

    # -- the host -------------------------------------------------------------------------

    def run_on_host(self, argv: list[str], *, stdin: bytes | None = None, timeout: float = 30.0) -> ExecResult:
        self._record("run_on_host", list(argv))
        with self._lock:
            self.host_commands.append((list(argv), stdin))
            if self.host_error is not None:
                raise RuntimeError_(f"{argv[0] if argv else '?'} on the host: {self.host_error}")
            for prefix, result in reversed(self._host_rules):
                if tuple(argv[:len(prefix)]) == prefix:
                    return result
        return ExecResult(exit_code=0, stdout=b"", stderr=b"")

    def container_stats(self, labels: dict[str, str]) -> list[ContainerStats]:
        self._record("container_stats", dict(labels))
        with self._lock:
            if self.stats_error is not None:
                raise RuntimeError_(f"container stats: {self.stats_error}")
            result = []
            for container in self._containers.values():
                self._settle(container)
                if container.state != "running" or not _labels_match(container.labels, labels):
                    continue
                cpu, memory = self.usage.get(container.id, (0, 0))
                result.append(ContainerStats(id=container.id, cpu_nanos=cpu, memory_bytes=memory,
                                             timestamp=self.clock(), labels=dict(container.labels)))
            return result

    def host_stats(self) -> HostStats:
        self._record("host_stats")
        with self._lock:
            if self.stats_error is not None:
                raise RuntimeError_(f"host stats: {self.stats_error}")
            return HostStats(cpu_nanos=self.host_usage.cpu_nanos,
                             memory_used_bytes=self.host_usage.memory_used_bytes, timestamp=self.clock())

    def ensure_network(self, name: str, *, subnet: str, gateway: str, labels: dict[str, str]) -> None:
        self._record("ensure_network", name, subnet)
        with self._lock:
            current = self.networks.get(name)
            if current is not None and current != subnet:
                raise RuntimeError_(f"network {name} exists with subnet {current}, not {subnet}")
            self.networks[name] = subnet
            self.network_labels[name] = {LABEL_MANAGED: "true", **labels}

    def network_subnet(self, name: str) -> str | None:
        with self._lock:
            return self.networks.get(name)

    def remove_network(self, name: str) -> None:
        self._record("remove_network", name)
        with self._lock:
            users = [pod.spec.name for pod in self._pods.values() if pod.spec.network == name and pod.running]
            if users:
                raise RuntimeError_(f"remove network {name}: network is being used by {users[0]}")
            self.networks.pop(name, None)
            self.network_labels.pop(name, None)

    # -- containers -----------------------------------------------------------------------

    def list_containers(self, labels: dict[str, str]) -> list[ContainerState]:
        self._record("list_containers", dict(labels))
        with self._lock:
            return [self._state(c) for c in self._containers.values() if _labels_match(c.labels, labels)]

    def create_container(self, pod_id: str, spec: ContainerSpec, *, warnings: list[str] | None = None) -> str:
        self._record("create_container", spec.name)
        with self._lock:
            if pod_id not in self._pods:
                raise NotFoundInRuntime(f"create container {spec.name}: no such pod {pod_id[:12]}")
            if spec.image not in self.images:
                raise ImageNotFound(f"create container {spec.name}: {spec.image}: image not known")
            if any(c.spec.name == spec.name for c in self._containers.values()):
                raise RuntimeError_(f"create container {spec.name}: name is already in use")
            for mount in spec.mounts:
                if mount.volume and mount.volume not in self._volumes:
                    raise RuntimeError_(f"create container {spec.name}: no such volume {mount.volume}")
            container = _Container(id=_digest(f"container-{next(self._ids)}"), pod_id=pod_id, spec=spec,
                                   labels={LABEL_MANAGED: "true", **spec.labels},
                                   image_id=self._image_id(spec.image))
            self._containers[container.id] = container
            if warnings is not None:
                warnings.extend(self.create_warnings)
            return container.id

    def start_container(self, container_id: str) -> None:
        self._record("start_container", container_id)
        with self._lock:
            container = self._get_container(container_id)
            if container.state == "running":
                return
            if not self._pods[container.pod_id].running:
                raise RuntimeError_(f"start container {container_id[:12]}: its pod is not running")
            now = self.clock()
            container.started, container.finished = now, None
            script = interpret(container.argv, env=container.spec.env, workdir=container.spec.working_dir or "/",
                               read=lambda path: self._read(container, path), partial=True)
            if script is None or not script.complete:
                container.planned = planned_exit(container.argv)
            else:
                container.planned = None if script.exit_code is None else (script.exit_code, script.seconds)
            if script is not None:
                container.output.extend((now + offset, data) for offset, _, data in script.output)
            container.exit_code, container.oom_killed, container.error = None, False, ""
            message = self.start_errors.get(container.labels.get(LABEL_CONTAINER, ""))
            if message:
                container.error = message
                self._exit(container, EXIT_START_ERROR)
                raise RuntimeError_(f"start container {container_id[:12]}: {message}")
            container.state = "running"
            self._publish(container, "start")
            if container.planned is not None and container.planned[1] == 0:
                self._exit(container, container.planned[0])

    def stop_container(self, container_id: str, *, timeout: int) -> None:
        self._record("stop_container", container_id, timeout)
        with self._lock:
            container = self._get_container(container_id)
            self._settle(container)
            if container.state != "running":
                return
            if container.labels.get(LABEL_CONTAINER) in self.ignores_sigterm or ignores_sigterm(container.argv):
                self._pass_time(timeout)
                self._exit(container, EXIT_SIGKILL)
            else:
                self._exit(container, EXIT_SIGTERM)

    def remove_container(self, container_id: str) -> None:
        self._record("remove_container", container_id)
        with self._lock:
            container = self._containers.pop(container_id, None)
            if container is not None:
                self._settle(container)
                if container.state == "running":
                    self._exit(container, EXIT_SIGKILL)
                self._publish(container, "remove")

    def inspect_container(self, container_id: str) -> ContainerState:
        self._record("inspect_container", container_id)
        with self._lock:
            return self._state(self._get_container(container_id))

    # -- images ---------------------------------------------------------------------------

    def image_present(self, ref: str) -> bool:
        self._record("image_present", ref)
        with self._lock:
            return ref in self.images

    def pull_image(self, ref: str, *, auth: RegistryAuth | None = None) -> None:
        self._record("pull_image", ref, *((auth,) if auth is not None else ()))
        with self._lock:
            if ref.startswith("localhost/") and ref in self.images:
                return  # as Podman: a localhost/ image is built on the host, there is nothing to pull
            if ref not in self.pullable:
                raise ImageNotFound(f"pull image {ref}: initializing source docker://{ref}: "
                                    "pinging container registry: connection refused")
            self.images.add(ref)

    def list_images(self) -> list[ImageInfo]:
        self._record("list_images")
        with self._lock:
            return [ImageInfo(id=self._image_id(ref), names=(ref,)) for ref in sorted(self.images)]

    def save_image(self, ref: str) -> Iterator[bytes]:
        """A stand-in archive of the image, in two chunks, that load_image understands."""
        self._record("save_image", ref)
        with self._lock:
            if ref not in self.images:
                raise ImageNotFound(f"save image {ref}: {ref}: image not known")
        return iter([_ARCHIVE_MAGIC, ref.encode()])

    def load_image(self, chunks: Iterable[bytes]) -> list[str]:
        data = b"".join(chunks)
        self._record("load_image")
        if not data.startswith(_ARCHIVE_MAGIC) or len(data) == len(_ARCHIVE_MAGIC):
            raise RuntimeError_("load image: not an image archive")
        name = data[len(_ARCHIVE_MAGIC):].decode()
        with self._lock:
            self.images.add(name)
        return [name]

    # -- volumes --------------------------------------------------------------------------

    def list_volumes(self, labels: dict[str, str]) -> list[str]:
        self._record("list_volumes", dict(labels))
        with self._lock:
            return [name for name, volume in self._volumes.items() if _labels_match(volume.labels, labels)]

    def create_volume(self, name: str, labels: dict[str, str]) -> None:
        self._record("create_volume", name)
        with self._lock:
            self._volumes.setdefault(name, _Volume(labels={LABEL_MANAGED: "true", **labels}))

    def remove_volume(self, name: str) -> None:
        self._record("remove_volume", name)
        with self._lock:
            self._volumes.pop(name, None)

    def write_files(self, container_id: str, directory: str, files: dict[str, tuple[bytes, int]]) -> None:
        self._record("write_files", container_id, directory, tuple(sorted(files)))
        with self._lock:
            container = self._get_container(container_id)
            self._settle(container)
            for path, (content, mode) in files.items():
                if posixpath.isabs(path) or ".." in path.split("/"):
                    raise RuntimeError_(f"write files to {directory}: {path!r} is not a relative path")
                mount = self._mount_of(container, posixpath.join(directory, path))
                if mount is not None and mount.read_only and container.state == "running":
                    raise RuntimeError_(f"write files to {directory} in container {container_id[:12]}: "
                                        f"{posixpath.join(directory, path)}: read-only file system")
                store, relative = self._resolve(container, posixpath.join(directory, path))
                store[relative] = (bytes(content), mode)

    # -- exec and logs --------------------------------------------------------------------

    def exec(self, container_id: str, argv: list[str], *, stdin: bytes | None = None,
             timeout: float | None = None) -> ExecResult:
        self._record("exec", container_id, tuple(argv))
        with self._lock:
            container = self._running_for_exec(container_id, argv)
            state = self._state(container)
            rule = self._exec_rule(container, argv)
        if self.exec_hook is not None:
            hooked = self.exec_hook(state, list(argv))
            if hooked is not None:
                return hooked if isinstance(hooked, ExecResult) else ExecResult(hooked, b"", b"")
        if rule is None:
            return self._run(container, argv, stdin=stdin, timeout=timeout)
        if timeout is not None and rule.duration > timeout:
            self._pass_time(timeout)
            raise RuntimeError_(f"exec {argv[0] if argv else ''} in container {container_id[:12]}: "
                                f"timed out after {timeout:g} s")
        self._pass_time(rule.duration)
        return rule.result

    def _running_for_exec(self, container_id: str, argv: list[str]) -> _Container:
        """The container an exec runs in (the lock held); RuntimeError_ unless it is running."""
        container = self._get_container(container_id)
        self._settle(container)
        if container.state != "running":
            raise RuntimeError_(f"exec {argv[0] if argv else ''} in container {container_id[:12]}: "
                                "container is not running")
        return container

    def exec_session(self, container_id: str, argv: list[str], *, stdin: bool = False,
                     tty: bool = False) -> _MemoryExecSession:
        """exec, streamed (module docstring); fails at once as exec would for a missing or stopped container."""
        self._record("exec_session", container_id, tuple(argv))
        with self._lock:
            self._running_for_exec(container_id, argv)
        return _MemoryExecSession(lambda data: self.exec(container_id, list(argv), stdin=data), stdin=stdin, tty=tty)

    def attach_session(self, container_id: str, *, stdin: bool = False, tty: bool = False,
                       stdin_once: bool = False) -> _MemoryAttachSession:
        """Attach (module docstring); fails at once for a missing or stopped container, as Podman's does."""
        self._record("attach_session", container_id)
        with self._lock:
            container = self._get_container(container_id)
            self._settle(container)
            if container.state != "running":
                raise RuntimeError_(f"attach to container {container_id[:12]}: container is not running")
        return _MemoryAttachSession(self, container_id, stdin=stdin)

    def logs(self, container_id: str, *, follow: bool = False, tail: int | None = None,
             since: float | None = None, timestamps: bool = False) -> _MemoryLog:
        self._record("logs", container_id)
        with self._lock:
            container = self._get_container(container_id)
            self._settle(container)
            now = self.clock()
            lines = [(at, data) for at, data in container.output
                     if at <= now and (since is None or at >= since)]
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        if timestamps:
            return _MemoryLog([_nanos(at).encode() + b" " + data for at, data in lines])
        return _MemoryLog([data for _, data in lines])

    # -- events ---------------------------------------------------------------------------

    def container_events(self, labels: dict[str, str], *, events: tuple[str, ...] = ()) -> _MemoryEventStream:
        """Subscribe to the `events` (all when empty) of containers carrying `labels` (module docstring)."""
        self._record("container_events", dict(labels))
        with self._lock:
            if self.events_error is not None:
                raise RuntimeError_(f"container events: {self.events_error}")
            stream = _MemoryEventStream(self, labels, events)
            self._streams.append(stream)
            return stream

    def _unsubscribe(self, stream: _MemoryEventStream) -> None:
        with self._lock:
            if stream in self._streams:
                self._streams.remove(stream)

    def _publish(self, container: _Container, event: str) -> None:
        """Send one event of `container` to the open streams (called with the lock held)."""
        record = ContainerEvent(container_id=container.id, event=event,
                                pod_uid=container.labels.get(LABEL_POD_UID, ""), name=container.spec.name,
                                exit_code=container.exit_code if event == "died" else None,
                                time=self.clock())
        for stream in list(self._streams):
            stream.offer(record, container.labels)

    # -- internals ------------------------------------------------------------------------

    def _run(self, container: _Container, argv: list[str], *, stdin: bytes | None,
             timeout: float | None) -> ExecResult:
        """exec without a rule: run what `interpret` knows, else exit 0 with no output."""
        with self._lock:
            script = interpret(argv, env=container.spec.env, stdin=stdin or b"",
                               workdir=container.spec.working_dir or "/",
                               read=lambda path: self._read(container, path))
        if script is None:
            return ExecResult(exit_code=0, stdout=b"", stderr=b"")
        if timeout is not None and (script.exit_code is None or script.seconds > timeout):
            self._pass_time(timeout)
            raise RuntimeError_(f"exec {argv[0]} in container {container.id[:12]}: timed out after {timeout:g} s")
        self._pass_time(script.seconds)
        return ExecResult(exit_code=script.exit_code or 0,
                          stdout=b"".join(data for _, stream, data in script.output if stream == 1),
                          stderr=b"".join(data for _, stream, data in script.output if stream == 2))

    def _read(self, container: _Container, path: str) -> bytes | None:
        """A file's content as the container sees it, if write_files put it there (None: unknown)."""
        if not posixpath.isabs(path):
            path = posixpath.join(container.spec.working_dir or "/", path)
        try:
            store, relative = self._resolve(container, path)
        except KeyError:
            return None
        found = store.get(relative)
        return None if found is None else found[0]

    def _record(self, method: str, *args: object) -> None:
        with self._lock:
            self.calls.append((method, *args))

    def _get_container(self, container_id: str) -> _Container:
        container = self._containers.get(container_id)
        if container is None:
            raise NotFoundInRuntime(f"no such container {container_id[:12]}")
        return container

    def _image_id(self, ref: str) -> str:
        return "sha256:" + _digest(f"image-{ref}")

    def _sandbox(self, pod: _Pod) -> PodSandbox:
        return PodSandbox(id=pod.id, name=pod.spec.name, labels=dict(pod.labels), running=pod.running,
                          ip=pod.ip if pod.running else "")

    def _exit(self, container: _Container, exit_code: int, *, oom: bool = False,
              at: float | None = None) -> None:
        container.state = "exited"
        container.exit_code = exit_code
        container.oom_killed = oom
        container.finished = self.clock() if at is None else at
        container.output = [(when, data) for when, data in container.output if when <= container.finished]
        if oom:
            self._publish(container, "oom")
        self._publish(container, "died")

    def _settle(self, container: _Container) -> None:
        """A running container whose planned run time is over has exited by now."""
        if container.state != "running" or container.planned is None or container.started is None:
            return
        code, seconds = container.planned
        if self.clock() >= container.started + seconds:
            self._exit(container, code, at=container.started + seconds)

    def _state(self, container: _Container) -> ContainerState:
        self._settle(container)
        return ContainerState(
            id=container.id, name=container.spec.name, pod_id=container.pod_id, labels=dict(container.labels),
            image=container.spec.image, image_id=container.image_id, state=container.state,
            exit_code=container.exit_code if container.state == "exited" else None,
            oom_killed=container.oom_killed,
            started_at=rfc3339(container.started) if container.started is not None else "",
            finished_at=rfc3339(container.finished) if container.finished is not None else "",
            error=container.error)

    @staticmethod
    def _mount_of(container: _Container, path: str) -> Mount | None:
        """The mount `path` falls under (the deepest one), None for the container's own files."""
        path = posixpath.normpath(path)
        best = None
        for mount in container.spec.mounts:
            target = posixpath.normpath(mount.target)
            if (path == target or path.startswith(target.rstrip("/") + "/")) and (
                    best is None or len(target) > len(posixpath.normpath(best.target))):
                best = mount
        return best

    def _resolve(self, container: _Container, path: str) -> tuple[dict[str, tuple[bytes, int]], str]:
        """Where `path` in the container lives: (a volume's, the host's or the container's files, key)."""
        path = posixpath.normpath(path)
        best = self._mount_of(container, path)
        if best is None:
            return container.files, path
        relative = posixpath.relpath(path, posixpath.normpath(best.target))
        if best.sub_path:
            relative = posixpath.normpath(posixpath.join(best.sub_path, relative))
        if best.volume:
            return self._volumes[best.volume].files, relative
        return self.host_files, posixpath.normpath(posixpath.join(best.host_path or "/", relative))

    def _exec_rule(self, container: _Container, argv: Sequence[str]) -> _ExecRule | None:
        name = container.labels.get(LABEL_CONTAINER)
        for rule in reversed(self._exec_rules):
            if rule.container is not None and rule.container not in (name, container.id):
                continue
            if rule.argv is not None and rule.argv != tuple(argv):
                continue
            return rule
        return None

    def _pass_time(self, seconds: float) -> None:
        advance = getattr(self.clock, "advance", None)
        if seconds > 0 and callable(advance):
            advance(seconds)


__all__ = ["FakeClock", "MemoryRuntime", "Script", "ignores_sigterm", "interpret", "planned_exit"]
