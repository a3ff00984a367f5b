"""What each container of a Pod needs in a sync: init containers in order, restarts, probe verdicts.

kctl.agent.podsync calls, once the Podman pod and the volumes are there:
- `sync_init_containers`: run the init containers one at a time, each to exit 0 (a
  failure fails the pod under restartPolicy Never, else is retried with back-off);
- `sync_app` for each app container: create and start one with no instance, restart an
  exited one per restartPolicy with back-off (CrashLoopBackOff), replace one whose image
  changed in the Pod (the kubelet's computePodActions);
- `run_probes`: the due liveness/readiness/startup probes of running app containers
  (kctl.agent.probes); a liveness or startup failure kills and restarts the container.
The instances themselves are made and killed by kctl.agent.lifecycle.
"""

from __future__ import annotations

from kctl.agent.containers import KIND_APP, KIND_INIT, LABEL_IMAGE
from kctl.agent.lifecycle import create_and_start, kill, start_existing
from kctl.agent.probes import PROBE_FIELDS
from kctl.agent.status import restart_of
from kctl.agent.syncstate import ERROR_RETRY_SECONDS, PodSyncState, meta, stop_grace
from kctl.runtime.interface import ContainerState, RuntimeError_

#: re-sync soon while an init container runs, to start the next one promptly
INIT_POLL_SECONDS = 1.0


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


# -- init containers ------------------------------------------------------------------------------

def sync_init_containers(s: PodSyncState) -> bool:
    """Advance the init containers; True once all of them exited 0."""
    for container in s.spec.get("initContainers") or ():
        name = str(container.get("name", ""))
        current = s.newest(KIND_INIT, name)
        if current is not None and current.state == "exited" and current.exit_code == 0 and not current.error:
            continue
        try:
            if not _advance_init(s, container, current):
                return False
        except RuntimeError_ as error:
            s.event("Warning", "Failed", f"Error: {error}", KIND_INIT, name)
            s.requeue.append(ERROR_RETRY_SECONDS)
            return False
    return True


def _advance_init(s: PodSyncState, container: dict, current: ContainerState | None) -> bool:
    """Move one unfinished init container on; True when it has now exited 0."""
    name = str(container.get("name", ""))
    if s.mount_error:
        s.wait(name, KIND_INIT, ("PodInitializing", s.mount_error))
        return False
    if current is not None and current.state == "running":
        s.requeue.append(INIT_POLL_SECONDS)
        return False
    if current is not None and current.state == "created" and not current.error:
        current = start_existing(s, container, KIND_INIT, current)
    elif current is not None:  # exited non-zero
        if s.policy == "Never":
            return False
        current = _restart(s, container, KIND_INIT, current)
    else:
        current = create_and_start(s, container, KIND_INIT, _first_restart_count(s, name))
    if current is not None and current.state == "exited" and current.exit_code == 0 and not current.error:
        return True
    s.requeue.append(INIT_POLL_SECONDS)
    return False


# -- app containers -------------------------------------------------------------------------------

def sync_app(s: PodSyncState, container: dict, kind: str = KIND_APP) -> None:
    """Bring one app container to what the Pod and its restartPolicy ask for."""
    name = str(container.get("name", ""))
    current = s.newest(kind, name)
    if s.mount_error and (current is None or current.state != "running"):
        s.wait(name, kind, ("ContainerCreating", s.mount_error))
        return
    if current is None:
        key = (s.uid, name)
        if not s.ctx.backoff.ready(key, s.now):  # the last create failed
            s.waiting[name] = s.previous_waiting(name) or ("ContainerCreating", "")
            s.requeue.append(s.ctx.backoff.remaining(key, s.now))
            return
        create_and_start(s, container, kind, _first_restart_count(s, name))
        return
    if current.state == "running":
        if _image_changed(container, current):
            _replace(s, container, kind, current)
        return
    if current.state == "created" and not current.error:
        start_existing(s, container, kind, current)
        return
    if not should_restart(s.policy, current.exit_code):
        return
    if _image_changed(container, current):
        _replace(s, container, kind, current)
    else:
        _restart(s, container, kind, current)


def _image_changed(container: dict, current: ContainerState) -> bool:
    return current.labels.get(LABEL_IMAGE, current.image) != container.get("image")


def _replace(s: PodSyncState, container: dict, kind: str, current: ContainerState) -> None:
    """The Pod's image changed: kill the instance and start one of the new image at once."""
    name = str(container.get("name", ""))
    if current.state == "running":
        current = kill(s, container, kind, current, f"Container {name} definition changed, will be restarted",
                       grace=stop_grace(s.pod)) or current
    s.ctx.backoff.clear((s.uid, name))
    create_and_start(s, container, kind, restart_of(current) + 1)


def _restart(s: PodSyncState, container: dict, kind: str, current: ContainerState) -> ContainerState | None:
    """Start an exited container again, unless its back-off has not run out (CrashLoopBackOff)."""
    name = str(container.get("name", ""))
    key = (s.uid, name)
    if not s.ctx.backoff.ready(key, s.now):
        pod_meta = meta(s.pod)
        pod_ref = f"{pod_meta.get('name')}_{pod_meta.get('namespace')}({s.uid})"
        delay = go_duration(s.ctx.backoff.delay(key, s.now))
        s.wait(name, kind, ("CrashLoopBackOff", f"back-off {delay} restarting failed container={name} "
                                                f"pod={pod_ref}"),
               ("Warning", "BackOff", f"Back-off restarting failed container {name} in pod {pod_ref}"))
        s.requeue.append(s.ctx.backoff.remaining(key, s.now))
        return None
    s.ctx.backoff.record(key, s.now)
    return create_and_start(s, container, kind, restart_of(current) + 1)


def _first_restart_count(s: PodSyncState, name: str) -> int:
    """The restart count of a container with no instance left: one more if it has run before."""
    for key in ("initContainerStatuses", "containerStatuses"):
        for status in s.previous.get(key) or ():
            if isinstance(status, dict) and status.get("name") == name:
                count = int(status.get("restartCount") or 0)
                state = status.get("state") or {}
                has_run = "running" in state or "terminated" in state or bool(
                    (status.get("lastState") or {}).get("terminated"))
                return count + 1 if has_run else count
    return 0


# -- probes ---------------------------------------------------------------------------------------

def run_probes(s: PodSyncState) -> None:
    """Run the due probes of running app containers; kill (and restart) on a verdict."""
    running: dict[str, str] = {}
    for container in s.spec.get("containers") or ():
        if not any(container.get(f) for f in PROBE_FIELDS.values()):
            continue
        name = str(container.get("name", ""))
        current = s.newest(KIND_APP, name)
        if current is None or current.state != "running":
            continue
        try:
            if _probe(s, container, current):
                running[name] = current.id
        except RuntimeError_ as error:
            s.event("Warning", "Failed", f"Error: {error}", KIND_APP, name)
            s.requeue.append(ERROR_RETRY_SECONDS)
    next_due = s.ctx.probes.next_due(s.pod, running, s.ctx.now())
    if next_due is not None:
        s.requeue.append(next_due)


def _probe(s: PodSyncState, container: dict, current: ContainerState) -> bool:
    """Probe one running instance; False when it was killed."""
    name = str(container.get("name", ""))
    outcomes = s.ctx.probes.check(s.pod, container, runtime=s.runtime, container_id=current.id, pod_ip=s.pod_ip,
                                  host_ip=s.ctx.host_ip, now=s.now, remote=s.ctx.remote)
    for outcome in outcomes:
        if not outcome.ok:
            s.event("Warning", "Unhealthy", f"{outcome.title} probe failed: {outcome.message}", KIND_APP, name)
        if outcome.kill:
            probe = container.get(PROBE_FIELDS[outcome.kind]) or {}
            kill(s, container, KIND_APP, current, f"Container {name} failed {outcome.kind} probe, will be restarted",
                 grace=stop_grace(s.pod, probe))
            sync_app(s, container)
            return False
    return True


__all__ = ["INIT_POLL_SECONDS", "go_duration", "run_probes", "should_restart", "sync_app", "sync_init_containers"]
