"""Reach a pod's container on whichever host runs it: for logs, exec and attach.

`kctl logs` / `kctl exec` (kctl.cli.logs) and the HTTPS API's pods/log, pods/exec and pods/attach
(kctl.kubeapi.streams) both call this module: find the Pod, its Node, the Node's runtime
(kctl.runtime.connect.runtime_for_node, or the `runtime_for` a caller passes) and the container
by the labels the node agent puts on everything it creates (pod uid + container name).
Problems are PodStreamError (a BadRequest) worded as Kubernetes words them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from kctl.machinery.errors import BadRequest

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.runtime.interface import ContainerState, Runtime

DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"

RuntimeFor = Callable[[dict], "Runtime"]


class PodStreamError(BadRequest):
    """The container cannot be streamed from (which, its state): Kubernetes' 400 text."""


class ContainerNotRunning(PodStreamError):
    """No running instance of the container to exec into or attach to (kubelet's `container not found`)."""


def _default_runtime_for(node: dict) -> Runtime:
    from kctl.runtime.connect import runtime_for_node

    return runtime_for_node(node)


def pod_and_runtime(api: API, name: str, namespace: str, *,
                    runtime_for: RuntimeFor | None = None) -> tuple[dict, Runtime]:
    """The Pod (NotFound when missing) and the runtime of the node it is bound to."""
    pod = api.get(api.resource("pods"), name, namespace=namespace)
    return pod, runtime_of(api, pod, runtime_for=runtime_for)


def runtime_of(api: API, pod: dict, *, runtime_for: RuntimeFor | None = None) -> Runtime:
    """The runtime of the node `pod` is bound to (PodStreamError when it is not bound yet)."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        raise PodStreamError(f'pod "{pod["metadata"]["name"]}" is not scheduled to a node yet')
    node = api.get(api.resource("nodes"), node_name)
    return (runtime_for or _default_runtime_for)(node)


def close_runtime(runtime: object) -> None:
    """Close the runtime's connection (an SSH tunnel) if it has one to close."""
    close = getattr(runtime, "close", None)
    if callable(close):
        close()


def names(pod: dict, key: str) -> list[str]:
    """The names of the pod's `containers` or `initContainers`."""
    return [c.get("name", "") for c in (pod.get("spec") or {}).get(key) or ()]


def choose_container(pod: dict, container: str | None) -> str:
    """The container named, the default one, the only one, or an error listing the choices, as Kubernetes."""
    name = pod["metadata"]["name"]
    apps, inits = names(pod, "containers"), names(pod, "initContainers")
    if container:
        if container not in apps + inits:
            raise PodStreamError(f"container {container} is not valid for pod {name}")
        return container
    default = (pod["metadata"].get("annotations") or {}).get(DEFAULT_CONTAINER_ANNOTATION)
    if default in apps:
        return str(default)
    if len(apps) == 1:
        return apps[0]
    message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(apps)}]"
    if inits:
        message += f" or one of the init containers: [{' '.join(inits)}]"
    raise PodStreamError(message)


def _restart(state: ContainerState) -> int:
    from kctl.runtime.interface import LABEL_RESTART

    try:
        return int(state.labels.get(LABEL_RESTART, "0"))
    except ValueError:
        return 0


def instances(runtime: Runtime, pod: dict, container: str) -> list[ContainerState]:
    """The runtime's containers made for one container of the pod, oldest first."""
    from kctl.runtime.interface import LABEL_CONTAINER, LABEL_POD_UID

    found = runtime.list_containers({LABEL_POD_UID: pod["metadata"]["uid"], LABEL_CONTAINER: container})
    return sorted(found, key=lambda s: (_restart(s), s.started_at or "", s.finished_at or ""))


def _waiting_reason(pod: dict, container: str) -> str:
    """Why the container is not running yet, from the pod's status (ContainerCreating by default)."""
    status = pod.get("status") or {}
    for entry in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if entry.get("name") == container:
            reason = ((entry.get("state") or {}).get("waiting") or {}).get("reason")
            if reason:
                return str(reason)
    return "ContainerCreating"


@dataclass(frozen=True)
class LogOptions:
    """What to read of a container's log (Kubernetes' PodLogOptions)."""

    container: str | None = None
    follow: bool = False
    tail: int | None = None          # lines from the end (None: all)
    since: float | None = None       # seconds since the epoch (None: from the start)
    previous: bool = False
    timestamps: bool = False
    limit_bytes: int | None = None   # stop after this many bytes (None: no limit)


def log_instance(runtime: Runtime, pod: dict, options: LogOptions) -> ContainerState:
    """The runtime container whose log `options` asks for (the current, or the previous instance)."""
    name = choose_container(pod, options.container)
    pod_name = pod["metadata"]["name"]
    found = instances(runtime, pod, name)
    if options.previous:
        if len(found) < 2:
            raise PodStreamError(f'previous terminated container "{name}" in pod "{pod_name}" not found')
        return found[-2]
    if not found:
        raise PodStreamError(f'container "{name}" in pod "{pod_name}" is waiting to start: '
                             f'{_waiting_reason(pod, name)}')
    return found[-1]


class LogChunks:
    """A container's log as the runtime yields it, cut at `limit_bytes`; close() (any thread) ends it."""

    def __init__(self, runtime: Runtime, container_id: str, options: LogOptions) -> None:
        self._chunks = runtime.logs(container_id, follow=options.follow, tail=options.tail, since=options.since,
                                    timestamps=options.timestamps)
        self._left = options.limit_bytes

    def __iter__(self) -> LogChunks:
        return self

    def __next__(self) -> bytes:
        if self._left is not None and self._left <= 0:
            self.close()
            raise StopIteration
        chunk = next(self._chunks)
        if self._left is not None:
            chunk = chunk[:self._left]
            self._left -= len(chunk)
        return chunk

    def close(self) -> None:
        """End the runtime's log stream (a following one stops at once)."""
        close = getattr(self._chunks, "close", None)
        if callable(close):
            try:
                close()
            except ValueError:  # a generator running on another thread cannot be closed from here
                pass


def log_chunks(runtime: Runtime, container_id: str, options: LogOptions) -> LogChunks:
    """The container's log as the runtime yields it, cut at `limit_bytes` (LogChunks)."""
    return LogChunks(runtime, container_id, options)


def default_exec_container(pod: dict) -> tuple[str, str]:
    """kubectl exec's default container: (name, a note naming the others when there are several, or "")."""
    apps = names(pod, "containers")
    default = (pod["metadata"].get("annotations") or {}).get(DEFAULT_CONTAINER_ANNOTATION)
    if default in apps:
        return str(default), ""
    if not apps:
        raise PodStreamError(f'pod {pod["metadata"]["name"]} has no containers')
    note = f'Defaulted container "{apps[0]}" out of: {", ".join(apps)}' if len(apps) > 1 else ""
    return apps[0], note


def running_instance(runtime: Runtime, pod: dict, container: str | None, *, verb: str = "exec") -> ContainerState:
    """The running runtime container to exec into (or attach to), with Kubernetes' errors when there is none."""
    name = choose_container(pod, container)
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise PodStreamError(f"cannot {verb} into a container in a completed pod; current phase is {phase}")
    running = [s for s in instances(runtime, pod, name) if s.state == "running"]
    if not running:
        raise ContainerNotRunning(f'container not found ("{name}")')
    return running[-1]


def container_spec(pod: dict, container: str) -> dict[str, Any]:
    """The container's entry in the pod spec ({} when there is none)."""
    spec = pod.get("spec") or {}
    for entry in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        if entry.get("name") == container:
            return dict(entry)
    return {}


__all__ = ["DEFAULT_CONTAINER_ANNOTATION", "ContainerNotRunning", "LogChunks", "LogOptions", "PodStreamError",
           "choose_container", "close_runtime", "container_spec", "default_exec_container", "instances", "log_chunks",
           "log_instance", "names", "pod_and_runtime", "running_instance", "runtime_of"]
