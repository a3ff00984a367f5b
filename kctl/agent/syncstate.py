"""What one sync of one Pod knows and reports: the shared state of the pod-logic steps.

kctl.agent.podsync makes a `PodSyncState` for each sync_pod/terminate_pod call and hands
it to the steps (kctl.agent.sandbox, volumesetup, imagepull, lifecycle, containersync,
termination, containergc). The state holds the Pod, the runtime, the agent's
`SyncContext`, what the runtime showed (the Podman pod, the container instances) and
what the sync met on the way: Events to record, waiting reasons, re-sync delays. At the
end `result()` turns it into the Pod's recomputed status (kctl.agent.status) and a
`SyncResult`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from kctl.agent.backoff import Backoff
from kctl.agent.containers import KIND_INIT, pod_uid
from kctl.agent.env import Lookup
from kctl.agent.images import ImageCopier
from kctl.agent.probes import ProbeManager
from kctl.agent.status import Waiting, instances, pod_status
from kctl.agent.volumes import KIND_VOLUME_WRITER, ClaimVolume, Files, TokenSource
from kctl.runtime.interface import LABEL_CONTAINER_KIND, LABEL_MANAGED, LABEL_POD_UID, ContainerState, PodSandbox, \
    Runtime, RuntimeError_

#: re-sync after a runtime error that has no back-off of its own
ERROR_RETRY_SECONDS = 5.0
DEFAULT_GRACE_SECONDS = 30


@dataclass
class SyncContext:
    """What every sync of one node agent shares; made once per agent."""

    node_name: str
    host_ip: str
    lookup: Lookup  # (kind "ConfigMap"|"Secret", namespace, name) -> object or None
    backoff: Backoff
    probes: ProbeManager
    now: Callable[[], float] = time.time
    remote: bool = False
    #: (pod uid, volume name) -> content_hash of the files last written into that volume
    volume_hashes: dict[tuple[str, str], str] = field(default_factory=dict)
    #: copies a missing image from a host that has it (kctl.agent.images); None: registries only
    image_copier: ImageCopier | None = None
    #: the Podman network a new sandbox joins (kctl.agent.podnetwork.PodNetwork.pod_network):
    #: a name, "" for Podman's default, None while the pod network is not ready (sandboxes wait)
    pod_network: Callable[[], str | None] = lambda: ""
    #: tokens for projected serviceAccountToken sources (kctl.agent.serviceaccounttokens); None: none written
    tokens: TokenSource | None = None
    #: the `kubernetes` Service's environment every container gets (KUBERNETES_SERVICE_HOST, ...; kctl.agent.env)
    service_env: Callable[[], dict[str, str]] = dict


@dataclass
class EventSpec:
    """An Event the caller records on the Pod."""

    type: str  # "Normal" | "Warning"
    reason: str
    message: str
    field_path: str = ""  # e.g. spec.containers{web}


@dataclass
class SyncResult:
    """A sync's outcome: the Pod's status, the Events to record, when to sync again (None: no need)."""

    status: dict
    events: list[EventSpec]
    requeue_after: float | None


def meta(pod: dict) -> dict:
    return pod.get("metadata") or {}


def field_path(kind: str, name: str) -> str:
    return f"spec.{'initContainers' if kind == KIND_INIT else 'containers'}{{{name}}}"


def managed(labels: Mapping[str, str]) -> bool:
    """Whether kctl made this Podman object (labelled io.kctl.managed=true)."""
    return labels.get(LABEL_MANAGED) == "true"


def stop_grace(pod: dict, probe: Mapping[str, object] | None = None) -> int:
    """The seconds a container gets to stop: the probe's own grace, else the pod's (30)."""
    for value in ((probe or {}).get("terminationGracePeriodSeconds"),
                  (pod.get("spec") or {}).get("terminationGracePeriodSeconds")):
        if isinstance(value, int) and not isinstance(value, bool):
            return max(0, value)
    return DEFAULT_GRACE_SECONDS


class PodSyncState:
    """The state of one sync_pod or terminate_pod call (see the module docstring)."""

    def __init__(self, pod: dict, runtime: Runtime, ctx: SyncContext) -> None:
        self.pod, self.runtime, self.ctx = pod, runtime, ctx
        self.uid = pod_uid(pod)
        self.spec = pod.get("spec") or {}
        self.policy = str(self.spec.get("restartPolicy") or "Always")
        self.previous = pod.get("status") or {}
        self.now = ctx.now()
        self.events: list[EventSpec] = []
        self.waiting: dict[str, Waiting] = {}
        self.requeue: list[float] = []
        #: ids of the container instances this sync started (not ready before the next look)
        self.started: set[str] = set()
        self.sandbox: PodSandbox | None = None
        #: the sandbox was made by this sync: it holds no container yet (no need to list them)
        self.new_sandbox = False
        self.containers: list[ContainerState] = []
        self.files: dict[str, Files] = {}
        self.mount_error = ""
        #: pod volume name -> what its bound claim mounts (kctl.agent.volumesetup)
        self.claims: dict[str, ClaimVolume] = {}
        self.phase: str | None = None
        self.reason = self.message = ""
        self._allocatable: dict[str, object] | None = None
        self._events_lock = threading.Lock()

    @property
    def pod_ip(self) -> str:
        return self.sandbox.ip if self.sandbox is not None else ""

    def result(self) -> SyncResult:
        """The recomputed status, the events met and the earliest re-sync asked for."""
        status = pod_status(self.pod, self.sandbox, self.containers, self.ctx.probes, self.now,
                            host_ip=self.ctx.host_ip, waiting=self.waiting, phase=self.phase,
                            reason=self.reason, message=self.message, fresh=self.started)
        return SyncResult(status=status, events=self.events,
                          requeue_after=max(0.0, min(self.requeue)) if self.requeue else None)

    # -- events and waiting reasons -------------------------------------------------------

    def event(self, type_: str, reason: str, message: str, kind: str = "", name: str = "") -> None:
        with self._events_lock:  # containers are stopped in parallel (kctl.agent.termination)
            self.events.append(EventSpec(type=type_, reason=reason, message=message,
                                         field_path=field_path(kind, name) if name else ""))

    def previous_waiting(self, name: str) -> Waiting | None:
        """The waiting reason the last written status showed for a container."""
        for key in ("initContainerStatuses", "containerStatuses"):
            for status in self.previous.get(key) or ():
                if isinstance(status, dict) and status.get("name") == name:
                    waiting = (status.get("state") or {}).get("waiting")
                    return (str(waiting.get("reason", "")), str(waiting.get("message", ""))) if waiting else None
        return None

    def wait(self, name: str, kind: str, waiting: Waiting, event: tuple[str, str, str] | None = None) -> None:
        """Show the container waiting; record `event` (type, reason, message) only when this is new."""
        self.waiting[name] = waiting
        if event is not None and self.previous_waiting(name) != waiting:
            self.event(*event, kind, name)

    def previous_waiting_message(self) -> str:
        for status in self.previous.get("containerStatuses") or ():
            waiting = (status.get("state") or {}).get("waiting") or {}
            if waiting.get("message"):
                return str(waiting["message"])
        return ""

    def all_waiting(self, waiting: Waiting) -> None:
        for key in ("initContainers", "containers"):
            for container in self.spec.get(key) or ():
                self.waiting[str(container.get("name", ""))] = waiting

    # -- what the runtime shows -----------------------------------------------------------

    def list_containers(self) -> list[ContainerState]:
        """The pod's container instances in its sandbox (volume writers left out)."""
        found = self.runtime.list_containers({LABEL_POD_UID: self.uid})
        sandbox_id = self.sandbox.id if self.sandbox is not None else None
        return [c for c in found if managed(c.labels) and (sandbox_id is None or c.pod_id == sandbox_id)
                and c.labels.get(LABEL_CONTAINER_KIND) != KIND_VOLUME_WRITER]

    def refresh(self, container_id: str) -> ContainerState | None:
        """Re-inspect one container into self.containers; None when it is gone."""
        self.containers = [c for c in self.containers if c.id != container_id]
        try:
            state = self.runtime.inspect_container(container_id)
        except RuntimeError_:
            return None
        self.containers.append(state)
        return state

    def newest(self, kind: str, name: str) -> ContainerState | None:
        found = instances(self.containers, kind, name)
        return found[0] if found else None

    def allocatable(self) -> Mapping[str, object]:
        """The node's resources, for resourceFieldRef of a container without limits (asked once)."""
        if self._allocatable is None:
            info = self.runtime.info()
            self._allocatable = {"cpu": str(info.cpus), "memory": str(info.memory_bytes)}
        return self._allocatable


__all__ = ["DEFAULT_GRACE_SECONDS", "ERROR_RETRY_SECONDS", "EventSpec", "PodSyncState", "SyncContext", "SyncResult",
           "field_path", "managed", "meta", "stop_grace"]
