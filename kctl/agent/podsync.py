"""The kubelet's pod logic: make one Pod true on a runtime, stop it, clean up what no Pod owns.

The node agent (kctl.agent.agent) calls, for each Pod bound to its node:
- `sync_pod` on every change and periodically (level-triggered: it compares the Pod with
  what the runtime shows and acts only on the difference, so calling it twice does
  nothing more the second time);
- `terminate_pod` when the Pod is being deleted (or left the node);
- `cleanup_orphans` once after its first list.
Each returns the Pod's recomputed status and the Events to record (the caller writes
both), and never raises: a failure becomes a waiting reason, a Warning event and a
`requeue_after`.

What sync_pod does, in order (see docs/agent.md):
1. find the Podman pod by the pod-uid label (adopting one made before an agent restart),
   or create it; a dead one is removed and made again (SandboxChanged), except under
   restartPolicy Never once containers ran (the pod then ends as they did);
2. create the pod's named volumes and compute the files of configMap/secret/downwardAPI
   volumes (a missing source keeps containers from being created: FailedMount);
3. run the init containers one at a time, each to exit 0 (a failure fails the pod under
   restartPolicy Never, else is retried with back-off);
4. create and start each app container (image pulled per imagePullPolicy, environment
   and volume files prepared first); restart exited ones per restartPolicy with back-off
   (CrashLoopBackOff); recreate a running one whose image changed in the Pod;
5. run the probes that are due (liveness/startup failures kill and restart);
6. rewrite configMap/secret volume files whose content changed (through a never-started
   "volume writer" container, as the app mounts them read-only); remove old exited
   instances (keeping the two newest: `kctl logs --previous` reads the one before last);
7. compute the status (kctl.agent.status).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Mapping

from kctl.machinery.times import parse_seconds
from kctl.agent.backoff import Backoff
from kctl.agent.containers import (
    KIND_APP,
    KIND_INIT,
    LABEL_IMAGE,
    container_spec,
    pod_uid,
    pull_policy,
    sandbox_spec,
    security_error,
)
from kctl.agent.env import Lookup, resolve_env
from kctl.agent.images import ImageCopier, pull_auth, registry_may_have
from kctl.agent.probes import PROBE_FIELDS, ProbeManager, named_ports
from kctl.agent.status import (
    TERMINAL_PHASES,
    Waiting,
    instances,
    pod_status,
    restart_of,
)
from kctl.agent.volumes import (
    KIND_VOLUME_WRITER,
    WRITER_MOUNT,
    Files,
    VolumeError,
    content_hash,
    file_mounts,
    mounts_for,
    named_volumes,
    subpath_files,
    unsupported_volumes,
    volume_files,
    volume_labels,
    volume_source,
    writer_spec,
)
from kctl.runtime.interface import (
    LABEL_CONTAINER,
    LABEL_CONTAINER_KIND,
    LABEL_MANAGED,
    LABEL_POD_UID,
    ContainerSpec,
    ContainerState,
    PodSandbox,
    Runtime,
    RuntimeError_,
)

log = logging.getLogger("kctl.agent.podsync")

#: re-sync soon while an init container runs, to start the next one promptly
INIT_POLL_SECONDS = 1.0
#: re-sync after a runtime error that has no back-off of its own
ERROR_RETRY_SECONDS = 5.0
DEFAULT_GRACE_SECONDS = 30
SANDBOX_KEY = "sandbox:"  # back-off key (uid, SANDBOX_KEY) for pod sandbox creation
IMAGE_KEY = "image:"      # back-off key (uid, IMAGE_KEY + container) for image pulls
#: instances kept per container: the newest and the one before it (for `kctl logs --previous`)
KEEP_INSTANCES = 2


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


@dataclass
class EventSpec:
    type: str  # "Normal" | "Warning"
    reason: str
    message: str
    field_path: str = ""  # e.g. spec.containers{web}


@dataclass
class SyncResult:
    status: dict
    events: list[EventSpec]
    requeue_after: float | None


# -- small helpers --------------------------------------------------------------------------------

def _meta(pod: dict) -> dict:
    return pod.get("metadata") or {}


def field_path(kind: str, name: str) -> str:
    return f"spec.{'initContainers' if kind == KIND_INIT else 'containers'}{{{name}}}"


def go_duration(seconds: float) -> str:
    """Seconds as Go prints a Duration: 10s, 2m40s, 5m0s, 100ms."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:g}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest}s"


def should_restart(restart_policy: str, exit_code: int | None) -> bool:
    """Whether an exited container is started again under the pod's restartPolicy."""
    if restart_policy == "Never":
        return False
    if restart_policy == "OnFailure":
        return exit_code != 0
    return True


def _managed(labels: Mapping[str, str]) -> bool:
    return labels.get(LABEL_MANAGED) == "true"


def _grace(pod: dict, probe: Mapping[str, object] | None = None) -> int:
    """The seconds a container gets to stop: the probe's own grace, else the pod's (30)."""
    for value in ((probe or {}).get("terminationGracePeriodSeconds"),
                  (pod.get("spec") or {}).get("terminationGracePeriodSeconds")):
        if isinstance(value, int) and not isinstance(value, bool):
            return max(0, value)
    return DEFAULT_GRACE_SECONDS


# -- one sync -------------------------------------------------------------------------------------

class _PodSync:
    """The state of one sync_pod call; `run` does the work."""

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
        self.sandbox: PodSandbox | None = None
        self.containers: list[ContainerState] = []
        self.files: dict[str, Files] = {}
        self.mount_error = ""
        self.phase: str | None = None
        self.reason = self.message = ""
        self._allocatable: dict[str, object] | None = None
        self._events_lock = threading.Lock()

    # -- the steps ------------------------------------------------------------------------

    def run(self) -> SyncResult:
        terminal = self.previous.get("phase") in TERMINAL_PHASES
        if terminal or self._deadline_exceeded():
            return self._finish_terminal(terminal)
        self.sandbox = self._ensure_sandbox()
        if self.sandbox is None:
            return self._result()
        self.containers = self._list_containers()
        if not self.sandbox.running:  # restartPolicy Never: what ran stays as it ended
            return self._result()
        self._ensure_volumes()
        if self._sync_init_containers():
            for container in self.spec.get("containers") or ():
                self._guarded(container, KIND_APP, self._sync_app)
            self._run_probes()
        self._refresh_volume_files()
        self._remove_old_instances()
        self.containers = self._list_containers()
        return self._result()

    def _result(self) -> SyncResult:
        status = pod_status(self.pod, self.sandbox, self.containers, self.ctx.probes, self.now,
                            host_ip=self.ctx.host_ip, waiting=self.waiting, phase=self.phase,
                            reason=self.reason, message=self.message)
        return SyncResult(status=status, events=self.events,
                          requeue_after=max(0.0, min(self.requeue)) if self.requeue else None)

    def _guarded(self, container: dict, kind: str, step: Callable[[dict, str], None]) -> None:
        """Run one container's step; a runtime error becomes an event and a retry, not a raise."""
        try:
            step(container, kind)
        except RuntimeError_ as error:
            self._event("Warning", "Failed", f"Error: {error}", kind, container.get("name", ""))
            self.requeue.append(ERROR_RETRY_SECONDS)

    # -- events and waiting reasons -------------------------------------------------------

    def _event(self, type_: str, reason: str, message: str, kind: str = "", name: str = "") -> None:
        with self._events_lock:
            self.events.append(EventSpec(type=type_, reason=reason, message=message,
                                         field_path=field_path(kind, name) if name else ""))

    def _previous_waiting(self, name: str) -> Waiting | None:
        for key in ("initContainerStatuses", "containerStatuses"):
            for status in self.previous.get(key) or ():
                if isinstance(status, dict) and status.get("name") == name:
                    waiting = (status.get("state") or {}).get("waiting")
                    return (str(waiting.get("reason", "")), str(waiting.get("message", ""))) if waiting else None
        return None

    def _wait(self, name: str, kind: str, waiting: Waiting, event: tuple[str, str, str] | None = None) -> None:
        """Show the container waiting; record `event` (type, reason, message) only when this is new."""
        self.waiting[name] = waiting
        if event is not None and self._previous_waiting(name) != waiting:
            self._event(*event, kind, name)

    # -- the Podman pod -------------------------------------------------------------------

    def _find_sandboxes(self) -> list[PodSandbox]:
        return [p for p in self.runtime.list_pods({LABEL_POD_UID: self.uid}) if _managed(p.labels)]

    def _ensure_sandbox(self) -> PodSandbox | None:
        """The pod's running Podman pod: adopted, or made (a dead one is removed first)."""
        found = self._find_sandboxes()
        keep = next((p for p in found if p.running), None)
        if keep is None and found and self.policy == "Never" and self._has_run(found[0]):
            return found[0]  # as the kubelet: a pod that must not restart gets no new sandbox
        for extra in found:
            if extra is keep:
                continue
            if not extra.running:
                self._event("Normal", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
            self.runtime.remove_pod(extra.id)
        if keep is not None:
            return keep
        key = (self.uid, SANDBOX_KEY)
        if not self.ctx.backoff.ready(key, self.now):
            self._all_waiting(("ContainerCreating", self._previous_waiting_message()))
            self.requeue.append(self.ctx.backoff.remaining(key, self.now))
            return None
        try:
            sandbox = self.runtime.create_pod(sandbox_spec(self.pod))
        except RuntimeError_ as error:
            self.ctx.backoff.record(key, self.now)
            message = f"Failed to create pod sandbox: {error}"
            self._event("Warning", "FailedCreatePodSandBox", message)
            self._all_waiting(("ContainerCreating", message))
            self.requeue.append(self.ctx.backoff.remaining(key, self.now))
            return None
        self.ctx.backoff.clear(key)
        return sandbox

    def _has_run(self, sandbox: PodSandbox) -> bool:
        return any(c.pod_id == sandbox.id and c.started_at and _managed(c.labels)
                   for c in self.runtime.list_containers({LABEL_POD_UID: self.uid}))

    def _previous_waiting_message(self) -> str:
        for status in self.previous.get("containerStatuses") or ():
            waiting = (status.get("state") or {}).get("waiting") or {}
            if waiting.get("message"):
                return str(waiting["message"])
        return ""

    def _all_waiting(self, waiting: Waiting) -> None:
        for key in ("initContainers", "containers"):
            for container in self.spec.get(key) or ():
                self.waiting[str(container.get("name", ""))] = waiting

    def _list_containers(self) -> list[ContainerState]:
        """The pod's container instances in its sandbox (volume writers left out)."""
        found = self.runtime.list_containers({LABEL_POD_UID: self.uid})
        sandbox_id = self.sandbox.id if self.sandbox is not None else None
        return [c for c in found if _managed(c.labels) and (sandbox_id is None or c.pod_id == sandbox_id)
                and c.labels.get(LABEL_CONTAINER_KIND) != KIND_VOLUME_WRITER]

    def _refresh(self, container_id: str) -> ContainerState | None:
        """Re-inspect one container into self.containers; None when it is gone."""
        self.containers = [c for c in self.containers if c.id != container_id]
        try:
            state = self.runtime.inspect_container(container_id)
        except RuntimeError_:
            return None
        self.containers.append(state)
        return state

    def _newest(self, kind: str, name: str) -> ContainerState | None:
        found = instances(self.containers, kind, name)
        return found[0] if found else None

    # -- volumes --------------------------------------------------------------------------

    def _allocatable_now(self) -> Mapping[str, object]:
        """The node's resources, for resourceFieldRef of a container without limits (asked once)."""
        if self._allocatable is None:
            info = self.runtime.info()
            self._allocatable = {"cpu": str(info.cpus), "memory": str(info.memory_bytes)}
        return self._allocatable

    def _ensure_volumes(self) -> None:
        """Create missing named volumes; compute file volumes' contents (or the mount error)."""
        for name, reason in unsupported_volumes(self.pod).items():
            self._mount_failed(name, reason)
            return
        existing = set(self.runtime.list_volumes({LABEL_POD_UID: self.uid}))
        for name, runtime_name in named_volumes(self.pod).items():
            if runtime_name not in existing:
                self.runtime.create_volume(runtime_name, volume_labels(self.pod, name))
                self.ctx.volume_hashes.pop((self.uid, name), None)
        for volume in self.spec.get("volumes") or ():
            if volume_source(volume) not in ("configMap", "secret", "downwardAPI", "projected"):
                continue
            try:
                self.files[volume["name"]] = volume_files(self.pod, volume, self.ctx.lookup,
                                                          allocatable=self._allocatable_now)
            except VolumeError as error:
                self._mount_failed(volume["name"], str(error))
                return

    def _mount_failed(self, volume: str, reason: str) -> None:
        self.mount_error = f'MountVolume.SetUp failed for volume "{volume}" : {reason}'
        if all(self._previous_waiting(str(c.get("name", ""))) != ("ContainerCreating", self.mount_error)
               for c in self.spec.get("containers") or ()):
            self._event("Warning", "FailedMount", self.mount_error)

    def _write_volume_files(self, container: dict, container_id: str, env: Mapping[str, str]) -> None:
        """Before a container starts: its file volumes (unless already current) and subPath files."""
        for volume, mount_path in file_mounts(self.pod, container):
            files = self.files.get(volume)
            if files is None:
                continue
            digest = content_hash(files)
            if self.ctx.volume_hashes.get((self.uid, volume)) != digest:
                self.runtime.write_files(container_id, mount_path, files)
                self.ctx.volume_hashes[(self.uid, volume)] = digest
        for directory, files in subpath_files(self.pod, container, self.files, env=env):
            self.runtime.write_files(container_id, directory, files)

    def _refresh_volume_files(self) -> None:
        """Rewrite a file volume whose source changed, if a live container mounts it.

        Through a created (not yet started) container mounting it, or else through a
        volume writer: Podman writes into a running container inside its mount namespace,
        where the volume is read-only. With no live container, the next one created writes.
        """
        for volume, files in self.files.items():
            digest = content_hash(files)
            if self.ctx.volume_hashes.get((self.uid, volume)) == digest:
                continue
            created, image = self._live_mounts(volume)
            try:
                if created is not None:
                    self.runtime.write_files(created[0], created[1], files)
                elif image:
                    self._write_with_helper(volume, files, image)
                else:
                    continue
            except RuntimeError_ as error:
                self._event("Warning", "FailedMount", f'MountVolume.SetUp failed for volume "{volume}" : {error}')
                self.requeue.append(ERROR_RETRY_SECONDS)
                continue
            self.ctx.volume_hashes[(self.uid, volume)] = digest

    def _live_mounts(self, volume: str) -> tuple[tuple[str, str] | None, str]:
        """((id, mountPath) of a created instance mounting volume, or None; image of a running one, or "")."""
        image = ""
        for kind, key in ((KIND_INIT, "initContainers"), (KIND_APP, "containers")):
            for container in self.spec.get(key) or ():
                paths = [path for name, path in file_mounts(self.pod, container) if name == volume]
                current = self._newest(kind, str(container.get("name", ""))) if paths else None
                if current is not None and current.state == "created":
                    return (current.id, paths[0]), ""
                if current is not None and current.state == "running":
                    image = image or current.labels.get(LABEL_IMAGE, current.image)
        return None, image

    def _write_with_helper(self, volume: str, files: Files, image: str) -> None:
        """Write a volume's files through a never-started container of `image` mounting it read-write."""
        for stale in self.runtime.list_containers({LABEL_POD_UID: self.uid,
                                                   LABEL_CONTAINER_KIND: KIND_VOLUME_WRITER}):
            self.runtime.remove_container(stale.id)
        helper = self.runtime.create_container(self.sandbox.id if self.sandbox else "",
                                               writer_spec(self.pod, volume, image))
        try:
            self.runtime.write_files(helper, WRITER_MOUNT, files)
        finally:
            self.runtime.remove_container(helper)

    # -- init containers ------------------------------------------------------------------

    def _sync_init_containers(self) -> bool:
        """Advance the init containers; True once all of them exited 0."""
        for container in self.spec.get("initContainers") or ():
            name = str(container.get("name", ""))
            current = self._newest(KIND_INIT, name)
            if current is not None and current.state == "exited" and current.exit_code == 0 and not current.error:
                continue
            try:
                if not self._advance_init(container, current):
                    return False
            except RuntimeError_ as error:
                self._event("Warning", "Failed", f"Error: {error}", KIND_INIT, name)
                self.requeue.append(ERROR_RETRY_SECONDS)
                return False
        return True

    def _advance_init(self, container: dict, current: ContainerState | None) -> bool:
        """Move one unfinished init container on; True when it has now exited 0."""
        name = str(container.get("name", ""))
        if self.mount_error:
            self._wait(name, KIND_INIT, ("PodInitializing", self.mount_error))
            return False
        if current is not None and current.state == "running":
            self.requeue.append(INIT_POLL_SECONDS)
            return False
        if current is not None and current.state == "created" and not current.error:
            current = self._start_existing(container, KIND_INIT, current)
        elif current is not None:  # exited non-zero
            if self.policy == "Never":
                return False
            current = self._restart(container, KIND_INIT, current)
        else:
            current = self._create_and_start(container, KIND_INIT, self._first_restart_count(name))
        if current is not None and current.state == "exited" and current.exit_code == 0 and not current.error:
            return True
        self.requeue.append(INIT_POLL_SECONDS)
        return False

    # -- app containers -------------------------------------------------------------------

    def _sync_app(self, container: dict, kind: str = KIND_APP) -> None:
        name = str(container.get("name", ""))
        current = self._newest(kind, name)
        if self.mount_error and (current is None or current.state != "running"):
            self._wait(name, kind, ("ContainerCreating", self.mount_error))
            return
        if current is None:
            key = (self.uid, name)
            if not self.ctx.backoff.ready(key, self.now):  # the last create failed
                self.waiting[name] = self._previous_waiting(name) or ("ContainerCreating", "")
                self.requeue.append(self.ctx.backoff.remaining(key, self.now))
                return
            self._create_and_start(container, kind, self._first_restart_count(name))
            return
        if current.state == "running":
            if self._image_changed(container, current):
                self._replace(container, kind, current)
            return
        if current.state == "created" and not current.error:
            self._start_existing(container, kind, current)
            return
        if not should_restart(self.policy, current.exit_code):
            return
        if self._image_changed(container, current):
            self._replace(container, kind, current)
        else:
            self._restart(container, kind, current)

    def _image_changed(self, container: dict, current: ContainerState) -> bool:
        return current.labels.get(LABEL_IMAGE, current.image) != container.get("image")

    def _replace(self, container: dict, kind: str, current: ContainerState) -> None:
        """The Pod's image changed: kill the instance and start one of the new image at once."""
        name = str(container.get("name", ""))
        if current.state == "running":
            current = self._kill(container, kind, current, f"Container {name} definition changed, will be restarted",
                                 grace=_grace(self.pod)) or current
        self.ctx.backoff.clear((self.uid, name))
        self._create_and_start(container, kind, restart_of(current) + 1)

    def _restart(self, container: dict, kind: str, current: ContainerState) -> ContainerState | None:
        """Start an exited container again, unless its back-off has not run out (CrashLoopBackOff)."""
        name = str(container.get("name", ""))
        key = (self.uid, name)
        if not self.ctx.backoff.ready(key, self.now):
            meta = _meta(self.pod)
            pod_ref = f"{meta.get('name')}_{meta.get('namespace')}({self.uid})"
            delay = go_duration(self.ctx.backoff.delay(key, self.now))
            self._wait(name, kind, ("CrashLoopBackOff", f"back-off {delay} restarting failed container={name} "
                                                        f"pod={pod_ref}"),
                       ("Warning", "BackOff", f"Back-off restarting failed container {name} in pod {pod_ref}"))
            self.requeue.append(self.ctx.backoff.remaining(key, self.now))
            return None
        self.ctx.backoff.record(key, self.now)
        return self._create_and_start(container, kind, restart_of(current) + 1)

    def _first_restart_count(self, name: str) -> int:
        """The restart count of a container with no instance left: one more if it has run before."""
        for key in ("initContainerStatuses", "containerStatuses"):
            for status in self.previous.get(key) or ():
                if isinstance(status, dict) and status.get("name") == name:
                    count = int(status.get("restartCount") or 0)
                    state = status.get("state") or {}
                    has_run = "running" in state or "terminated" in state or bool(
                        (status.get("lastState") or {}).get("terminated"))
                    return count + 1 if has_run else count
        return 0

    # -- making a container ---------------------------------------------------------------

    def _create_and_start(self, container: dict, kind: str, restart_count: int) -> ContainerState | None:
        """Resolve env, get the image, create, write volume files, start. None when it could not."""
        name = str(container.get("name", ""))
        refusal = security_error(self.pod, container)
        if refusal:
            self._wait(name, kind, ("CreateContainerConfigError", refusal), ("Warning", "Failed", f"Error: {refusal}"))
            return None
        env, errors = resolve_env(self.pod, container, lookup=self.ctx.lookup, node_name=self.ctx.node_name,
                                  host_ip=self.ctx.host_ip, pod_ip=self.sandbox.ip if self.sandbox else "",
                                  allocatable=self._allocatable_now)
        if errors:
            self._wait(name, kind, ("CreateContainerConfigError", errors[0]),
                       ("Warning", "Failed", f"Error: {errors[0]}"))
            return None
        if not self._ensure_image(container, kind):
            return None
        spec = container_spec(self.pod, container, kind=kind, env=env,
                              mounts=mounts_for(self.pod, container, named_volumes(self.pod), env=env),
                              restart_count=restart_count)
        container_id = self._create(container, kind, spec)
        if container_id is None:
            return None
        try:
            self._write_volume_files(container, container_id, env)
        except RuntimeError_ as error:
            self._creation_failed(container, kind, f"cannot write volume files: {error}")
            self.runtime.remove_container(container_id)
            return None
        return self._start(container, kind, container_id)

    def _create(self, container: dict, kind: str, spec: ContainerSpec) -> str | None:
        name = str(container.get("name", ""))
        warnings: list[str] = []
        try:
            container_id = self.runtime.create_container(self.sandbox.id if self.sandbox else "", spec,
                                                         warnings=warnings)
        except RuntimeError_ as error:
            self._creation_failed(container, kind, str(error))
            return None
        self._event("Normal", "Created", f"Created container {name}", kind, name)
        for warning in warnings:  # e.g. limits that rootless Podman on cgroup v1 ignores
            self._event("Warning", "RuntimeWarning", f"Podman: {warning}", kind, name)
        return container_id

    def _creation_failed(self, container: dict, kind: str, message: str) -> None:
        name = str(container.get("name", ""))
        key = (self.uid, name)
        self.ctx.backoff.record(key, self.now)
        self._wait(name, kind, ("CreateContainerError", message), ("Warning", "Failed", f"Error: {message}"))
        self.requeue.append(self.ctx.backoff.remaining(key, self.now))

    def _start_existing(self, container: dict, kind: str, current: ContainerState) -> ContainerState | None:
        """A container created but never started (the agent stopped in between): start it now."""
        env, _ = resolve_env(self.pod, container, lookup=self.ctx.lookup, node_name=self.ctx.node_name,
                             host_ip=self.ctx.host_ip, pod_ip=self.sandbox.ip if self.sandbox else "",
                             allocatable=self._allocatable_now)
        self._write_volume_files(container, current.id, env)
        return self._start(container, kind, current.id)

    def _start(self, container: dict, kind: str, container_id: str) -> ContainerState | None:
        name = str(container.get("name", ""))
        try:
            self.runtime.start_container(container_id)
        except RuntimeError_ as error:
            self.ctx.backoff.record((self.uid, name), self.now)
            self._event("Warning", "Failed", f"Error: {error}", kind, name)
            self.requeue.append(self.ctx.backoff.remaining((self.uid, name), self.now))
            state = self._refresh(container_id)
            if state is not None and state.state == "created":  # never ran: do not start it again and again
                self.runtime.remove_container(container_id)
                self._refresh(container_id)
                self._wait(name, kind, ("RunContainerError", str(error)))
            return None
        self._event("Normal", "Started", f"Started container {name}", kind, name)
        state = self._refresh(container_id)
        if state is not None and state.state == "running":
            return self._post_start(container, kind, state)
        return state

    def _post_start(self, container: dict, kind: str, state: ContainerState) -> ContainerState | None:
        """Run lifecycle.postStart; a failure kills the container (restarted per restartPolicy)."""
        hook = ((container.get("lifecycle") or {}).get("postStart")) or None
        if not hook:
            return state
        ok, message = self._run_handler(container, hook, state.id, timeout=_grace(self.pod))
        if ok:
            return state
        name = str(container.get("name", ""))
        self._event("Warning", "FailedPostStartHook", f"PostStartHook failed: {message}", kind, name)
        return self._kill(container, kind, state, f"FailedPostStartHook: container {name} will be killed",
                          grace=_grace(self.pod), pre_stop=False)

    def _run_handler(self, container: dict, handler: dict, container_id: str, *, timeout: float) -> tuple[bool, str]:
        """A lifecycle hook's exec/httpGet/tcpSocket handler, run as a probe with `timeout`."""
        probe = {**handler, "timeoutSeconds": max(1, int(timeout))}
        return self.ctx.probes.run(probe, runtime=self.runtime, container_id=container_id,
                                   pod_ip=self.sandbox.ip if self.sandbox else "", host_ip=self.ctx.host_ip,
                                   remote=self.ctx.remote, ports=named_ports(container))

    # -- images ---------------------------------------------------------------------------

    def _ensure_image(self, container: dict, kind: str) -> bool:
        """Whether the image is there to use, pulling it per imagePullPolicy (with back-off)."""
        name, image = str(container.get("name", "")), str(container.get("image", ""))
        policy, present = pull_policy(container), self.runtime.image_present(image)
        key = (self.uid, IMAGE_KEY + name)
        if policy == "Never" or (policy == "IfNotPresent" and present):
            if present:
                self._event("Normal", "Pulled", f'Container image "{image}" already present on machine', kind, name)
                return True
            message = f'Container image "{image}" is not present with pull policy of Never'
            self._wait(name, kind, ("ErrImageNeverPull", message), ("Warning", "ErrImageNeverPull", message))
            return False
        if not self.ctx.backoff.ready(key, self.now):
            if present:  # Always, but the registry failed recently: use the local image meanwhile
                return True
            message = f'Back-off pulling image "{image}"'
            self._wait(name, kind, ("ImagePullBackOff", message), ("Normal", "BackOff", message))
            self.requeue.append(self.ctx.backoff.remaining(key, self.now))
            return False
        return self._pull(container, kind, key, present)

    def _pull(self, container: dict, kind: str, key: tuple[str, str], present: bool) -> bool:
        """Pull from the registry, else (image absent) copy from a host that has it (kctl.agent.images).

        A localhost/ image is copied without a pull: no registry serves it.
        """
        name, image = str(container.get("name", "")), str(container.get("image", ""))
        copier = self.ctx.image_copier if not present else None
        if copier is not None and not registry_may_have(image):
            return self._copy(copier, container, kind, key, "")
        auth, missing = pull_auth(self.pod, image, self.ctx.lookup)
        if missing:
            self._event("Warning", "FailedToRetrieveImagePullSecret",
                        f"Unable to retrieve some image pull secrets ({', '.join(missing)}); "
                        "attempting to pull the image may not succeed.", kind, name)
        self._event("Normal", "Pulling", f'Pulling image "{image}"', kind, name)
        started = time.monotonic()
        try:
            self.runtime.pull_image(image, auth=auth)
        except RuntimeError_ as error:
            if copier is not None:
                return self._copy(copier, container, kind, key, f"{error}; ")
            if present:
                self.ctx.backoff.record(key, self.now)
                self._event("Warning", "Failed", f'Failed to pull image "{image}": {error}; '
                                                 "using the image present on the host", kind, name)
                return True
            return self._pull_failed(container, kind, key, str(error))
        self.ctx.backoff.clear(key)
        self._event("Normal", "Pulled", f'Successfully pulled image "{image}" in '
                                        f"{time.monotonic() - started:.3f}s", kind, name)
        return True

    def _pull_failed(self, container: dict, kind: str, key: tuple[str, str], error: str) -> bool:
        """ErrImagePull: Warning events, the container waiting, a retry after the pull back-off."""
        name, image = str(container.get("name", "")), str(container.get("image", ""))
        self.ctx.backoff.record(key, self.now)
        self._event("Warning", "Failed", f'Failed to pull image "{image}": {error}', kind, name)
        self._event("Warning", "Failed", "Error: ErrImagePull", kind, name)
        self.waiting[name] = ("ErrImagePull", error)
        self.requeue.append(self.ctx.backoff.remaining(key, self.now))
        return False

    def _copy(self, copier: ImageCopier, container: dict, kind: str, key: tuple[str, str], pulled: str) -> bool:
        """Copy the image from the control host or another node; `pulled` is the failed pull's error + "; "."""
        name, image = str(container.get("name", "")), str(container.get("image", ""))
        try:
            copied = copier.copy(self.runtime, image, node=self.ctx.node_name)
        except RuntimeError_ as error:
            return self._pull_failed(container, kind, key, f"{pulled}{error}")
        self.ctx.backoff.clear(key)
        if copied.source is None:
            self._event("Normal", "Pulled", f'Container image "{image}" already present on machine', kind, name)
        else:
            self._event("Normal", "ImageCopied", f'Copied image "{image}" from {copied.source} in '
                                                 f"{copied.seconds:.3f}s", kind, name)
        return True

    # -- killing --------------------------------------------------------------------------

    def _kill(self, container: dict, kind: str, state: ContainerState, message: str, *, grace: int,
              pre_stop: bool = True) -> ContainerState | None:
        """Stop a running instance (preStop hook first), within `grace` seconds in all."""
        name = str(container.get("name", ""))
        self._event("Normal", "Killing", message, kind, name)
        deadline = self.ctx.now() + grace
        hook = (container.get("lifecycle") or {}).get("preStop")
        if pre_stop and hook and grace > 0:
            ok, hook_message = self._run_handler(container, hook, state.id, timeout=grace)
            if not ok:
                self._event("Warning", "FailedPreStopHook", f"PreStopHook failed: {hook_message}", kind, name)
        self.runtime.stop_container(state.id, timeout=max(0, min(grace, int(deadline - self.ctx.now()))))
        self.ctx.probes.forget(self.uid, name=name)
        return self._refresh(state.id)

    # -- probes ---------------------------------------------------------------------------

    def _run_probes(self) -> None:
        """Run the due probes of running app containers; kill (and restart) on a verdict."""
        running: dict[str, str] = {}
        for container in self.spec.get("containers") or ():
            if not any(container.get(f) for f in PROBE_FIELDS.values()):
                continue
            name = str(container.get("name", ""))
            current = self._newest(KIND_APP, name)
            if current is None or current.state != "running":
                continue
            try:
                if self._probe(container, current):
                    running[name] = current.id
            except RuntimeError_ as error:
                self._event("Warning", "Failed", f"Error: {error}", KIND_APP, name)
                self.requeue.append(ERROR_RETRY_SECONDS)
        next_due = self.ctx.probes.next_due(self.pod, running, self.ctx.now())
        if next_due is not None:
            self.requeue.append(next_due)

    def _probe(self, container: dict, current: ContainerState) -> bool:
        """Probe one running instance; False when it was killed."""
        name = str(container.get("name", ""))
        outcomes = self.ctx.probes.check(self.pod, container, runtime=self.runtime, container_id=current.id,
                                         pod_ip=self.sandbox.ip if self.sandbox else "", host_ip=self.ctx.host_ip,
                                         now=self.now, remote=self.ctx.remote)
        for outcome in outcomes:
            if not outcome.ok:
                self._event("Warning", "Unhealthy", f"{outcome.title} probe failed: {outcome.message}",
                            KIND_APP, name)
            if outcome.kill:
                probe = container.get(PROBE_FIELDS[outcome.kind]) or {}
                self._kill(container, KIND_APP, current,
                           f"Container {name} failed {outcome.kind} probe, will be restarted",
                           grace=_grace(self.pod, probe))
                self._sync_app(container)
                return False
        return True

    # -- housekeeping ---------------------------------------------------------------------

    def _remove_old_instances(self) -> None:
        """Keep each container's two newest instances (the one before serves `kctl logs --previous`)."""
        groups: dict[tuple[str, str], None] = {}
        for state in self.containers:
            groups[(state.labels.get(LABEL_CONTAINER_KIND, KIND_APP), state.labels.get(LABEL_CONTAINER, ""))] = None
        for kind, name in groups:
            for state in instances(self.containers, kind, name)[KEEP_INSTANCES:]:
                if state.state != "running":
                    try:
                        self.runtime.remove_container(state.id)
                    except RuntimeError_ as error:
                        log.warning("pod %s: cannot remove old container %s: %s", self.uid, state.name, error)

    def _deadline_exceeded(self) -> bool:
        deadline = self.spec.get("activeDeadlineSeconds")
        started = parse_seconds(self.previous.get("startTime"))
        return isinstance(deadline, int) and started is not None and self.now - started >= deadline

    def _finish_terminal(self, already: bool) -> SyncResult:
        """A pod that is done (or past activeDeadlineSeconds): nothing starts; what runs is stopped."""
        found = self._find_sandboxes()
        self.sandbox = next((p for p in found if p.running), found[0] if found else None)
        self.containers = self._list_containers() if self.sandbox is not None else []
        if not already:
            self.phase, self.reason = "Failed", "DeadlineExceeded"
            self.message = "Pod was active on the node longer than the specified deadline"
            self._event("Normal", "DeadlineExceeded", self.message)
        for key, kind in (("initContainers", KIND_INIT), ("containers", KIND_APP)):
            for container in self.spec.get(key) or ():
                current = self._newest(kind, str(container.get("name", "")))
                if current is not None and current.state == "running":
                    self._kill(container, kind, current, f"Stopping container {container.get('name')}",
                               grace=_grace(self.pod))
        return self._result()


def sync_pod(pod: dict, runtime: Runtime, ctx: SyncContext) -> SyncResult:
    """Make the pod true on the runtime (see the module docstring); never raises."""
    sync = _PodSync(pod, runtime, ctx)
    try:
        return sync.run()
    except Exception as error:  # one pod's trouble must not stop the agent
        log.error("pod %s/%s: sync failed: %s: %s", _meta(pod).get("namespace"), _meta(pod).get("name"),
                  type(error).__name__, error, exc_info=not isinstance(error, RuntimeError_))
        status = dict(pod.get("status") or {})
        return SyncResult(status=status, events=[*sync.events, EventSpec("Warning", "FailedSync",
                                                                         f"error syncing pod: {error}")],
                          requeue_after=ERROR_RETRY_SECONDS)


# -- stopping a pod ---------------------------------------------------------------------------------

def terminate_pod(pod: dict, runtime: Runtime, ctx: SyncContext, *, grace_seconds: int) -> SyncResult:
    """Stop the pod within grace_seconds (preStop hooks first), then remove its Podman pod and volumes.

    Status keeps the phase it had. requeue_after is None when all is gone, else the time
    to try again (the runtime failed). Never raises.
    """
    sync = _PodSync(pod, runtime, ctx)
    try:
        return _terminate(sync, max(0, grace_seconds))
    except Exception as error:
        log.error("pod %s/%s: stopping failed: %s: %s", _meta(pod).get("namespace"), _meta(pod).get("name"),
                  type(error).__name__, error, exc_info=not isinstance(error, RuntimeError_))
        return SyncResult(status=dict(pod.get("status") or {}),
                          events=[*sync.events, EventSpec("Warning", "FailedKillPod", f"error killing pod: {error}")],
                          requeue_after=ERROR_RETRY_SECONDS)


def _terminate(sync: _PodSync, grace: int) -> SyncResult:
    sandboxes = sync._find_sandboxes()
    sync.sandbox = next((p for p in sandboxes if p.running), sandboxes[0] if sandboxes else None)
    sync.containers = sync._list_containers() if sandboxes else []
    running = [(container, kind, state) for key, kind in (("initContainers", KIND_INIT), ("containers", KIND_APP))
               for container in sync.spec.get(key) or ()
               for state in instances(sync.containers, kind, str(container.get("name", "")))
               if state.state == "running"]
    if len(running) == 1:
        _stop_one(sync, *running[0], grace=grace)
    elif running:
        with ThreadPoolExecutor(max_workers=len(running), thread_name_prefix="kctl-stop") as pool:
            for future in [pool.submit(_stop_one, sync, *item, grace=grace) for item in running]:
                future.result()
    sync.containers = sync._list_containers() if sandboxes else []
    sync.phase = sync.previous.get("phase") or None
    result = sync._result()
    for sandbox in sandboxes:
        sync.runtime.remove_pod(sandbox.id)
    for volume in sync.runtime.list_volumes({LABEL_POD_UID: sync.uid}):
        sync.runtime.remove_volume(volume)
    _forget(sync.ctx, sync.uid)
    result.requeue_after = None
    return result


def _stop_one(sync: _PodSync, container: dict, kind: str, state: ContainerState, *, grace: int) -> None:
    sync._kill(container, kind, state, f"Stopping container {container.get('name')}", grace=grace)


def _forget(ctx: SyncContext, uid: str) -> None:
    """Drop what the agent remembers of a pod that is gone."""
    ctx.backoff.forget(uid)
    ctx.probes.forget(uid)
    for key in [k for k in list(ctx.volume_hashes) if k[0] == uid]:
        ctx.volume_hashes.pop(key, None)


# -- orphans ----------------------------------------------------------------------------------------

def cleanup_orphans(runtime: Runtime, *, keep_uids: set[str]) -> list[str]:
    """Remove kctl-made Podman pods, stray containers and volumes of pods not in keep_uids.

    Only objects labelled io.kctl.managed=true with a pod uid label are touched (volumes:
    also named kctl_...). Returns the names removed: Podman pods, then containers, then
    volumes. A failure to remove one is logged and the others are still tried.
    """
    removed: list[str] = []
    managed = {LABEL_MANAGED: "true"}
    for sandbox in runtime.list_pods(managed):
        uid = sandbox.labels.get(LABEL_POD_UID)
        if _managed(sandbox.labels) and uid and uid not in keep_uids:
            if _remove(runtime.remove_pod, sandbox.id, sandbox.name):
                removed.append(sandbox.name)
    for state in runtime.list_containers(managed):
        uid = state.labels.get(LABEL_POD_UID)
        if _managed(state.labels) and uid and uid not in keep_uids:
            if _remove(runtime.remove_container, state.id, state.name):
                removed.append(state.name)
    volumes = set(runtime.list_volumes(managed))
    if volumes:
        kept = {name for uid in keep_uids for name in runtime.list_volumes({**managed, LABEL_POD_UID: uid})}
        for name in sorted(volumes - kept):
            if name.startswith("kctl_") and _remove(runtime.remove_volume, name, name):
                removed.append(name)
    return removed


#: (orphan name, error) pairs already warned about: the start-up clean-up and the fence
#: before Ready (kctl/agent/agent.py) both try, and a stuck orphan is reported once
_WARNED_ORPHANS: dict[tuple[str, str], None] = {}
_WARNED_LOCK = threading.Lock()


def _remove(remove: Callable[[str], None], ident: str, name: str) -> bool:
    try:
        remove(ident)
    except RuntimeError_ as error:
        key = (name, str(error))
        with _WARNED_LOCK:
            repeated = key in _WARNED_ORPHANS
            _WARNED_ORPHANS[key] = None
            while len(_WARNED_ORPHANS) > 1024:
                del _WARNED_ORPHANS[next(iter(_WARNED_ORPHANS))]
        (log.debug if repeated else log.warning)("cannot remove orphan %s: %s", name, error)
        return False
    return True


__all__ = ["EventSpec", "SyncContext", "SyncResult", "cleanup_orphans", "go_duration", "should_restart",
           "sync_pod", "terminate_pod"]
