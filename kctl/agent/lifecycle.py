"""One container instance's life during a sync: create, start, postStart; preStop, stop.

kctl.agent.containersync calls `create_and_start` for a container with no instance (or
one to restart), `start_existing` for one created but never started, and `kill` on a
liveness verdict or an image change; kctl.agent.termination calls `kill` to stop a pod.

Making an instance: the environment is resolved (CreateContainerConfigError when it
cannot be), the image ensured (kctl.agent.imagepull: under Never and IfNotPresent only
when the create found no image), the container created (CreateContainerError, with
back-off), its volume files written (kctl.agent.volumesetup), then started
(RunContainerError); a failing postStart hook kills it again (FailedPostStartHook).
Killing runs the preStop hook first, all within the grace period.
"""

from __future__ import annotations

from kctl.agent.containers import container_spec, security_error
from kctl.agent.env import resolve_env
from kctl.agent.imagepull import create_checks_image, ensure_image, image_already_present
from kctl.agent.probes import named_ports
from kctl.agent.syncstate import PodSyncState, stop_grace
from kctl.agent.volumes import mounts_for, named_volumes
from kctl.agent.volumesetup import write_volume_files
from kctl.runtime.interface import ContainerSpec, ContainerState, ImageNotFound, RuntimeError_

#: seconds after starting a container before the sync that reports it ready (the kubelet
#: reports a container it started from its next relist, about a second later)
STARTED_RECHECK_SECONDS = 0.2


def create_and_start(s: PodSyncState, container: dict, kind: str, restart_count: int) -> ContainerState | None:
    """Resolve env, get the image, create, write volume files, start. None when it could not."""
    name = str(container.get("name", ""))
    refusal = security_error(s.pod, container)
    if refusal:
        s.wait(name, kind, ("CreateContainerConfigError", refusal), ("Warning", "Failed", f"Error: {refusal}"))
        return None
    env, errors = resolve_env(s.pod, container, lookup=s.ctx.lookup, node_name=s.ctx.node_name,
                              host_ip=s.ctx.host_ip, pod_ip=s.pod_ip, allocatable=s.allocatable,
                              base=s.ctx.service_env())
    if errors:
        s.wait(name, kind, ("CreateContainerConfigError", errors[0]), ("Warning", "Failed", f"Error: {errors[0]}"))
        return None
    image_known = not create_checks_image(container)
    if image_known and not ensure_image(s, container, kind):
        return None
    spec = container_spec(s.pod, container, kind=kind, env=env,
                          mounts=mounts_for(s.pod, container, named_volumes(s.pod), env=env, claims=s.claims),
                          restart_count=restart_count)
    container_id = _create(s, container, kind, spec, image_known=image_known)
    if container_id is None:
        return None
    try:
        write_volume_files(s, container, container_id, env)
    except RuntimeError_ as error:
        _creation_failed(s, container, kind, f"cannot write volume files: {error}")
        s.runtime.remove_container(container_id)
        return None
    return _start(s, container, kind, container_id)


def _create(s: PodSyncState, container: dict, kind: str, spec: ContainerSpec, *, image_known: bool) -> str | None:
    """Create the instance; unless image_known, a missing image is ensured (pulled, copied), the create retried."""
    name = str(container.get("name", ""))
    warnings: list[str] = []
    try:
        container_id = s.runtime.create_container(s.sandbox.id if s.sandbox else "", spec, warnings=warnings)
    except ImageNotFound as error:
        if image_known:
            _creation_failed(s, container, kind, str(error))
            return None
        if not ensure_image(s, container, kind, present=False):
            return None
        return _create(s, container, kind, spec, image_known=True)
    except RuntimeError_ as error:
        _creation_failed(s, container, kind, str(error))
        return None
    if not image_known:
        image_already_present(s, container, kind)
    s.event("Normal", "Created", f"Created container {name}", kind, name)
    for warning in warnings:  # e.g. limits that rootless Podman on cgroup v1 ignores
        s.event("Warning", "RuntimeWarning", f"Podman: {warning}", kind, name)
    return container_id


def _creation_failed(s: PodSyncState, container: dict, kind: str, message: str) -> None:
    name = str(container.get("name", ""))
    key = (s.uid, name)
    s.ctx.backoff.record(key, s.now)
    s.wait(name, kind, ("CreateContainerError", message), ("Warning", "Failed", f"Error: {message}"))
    s.requeue.append(s.ctx.backoff.remaining(key, s.now))


def start_existing(s: PodSyncState, container: dict, kind: str, current: ContainerState) -> ContainerState | None:
    """A container created but never started (the agent stopped in between): start it now."""
    env, _ = resolve_env(s.pod, container, lookup=s.ctx.lookup, node_name=s.ctx.node_name,
                         host_ip=s.ctx.host_ip, pod_ip=s.pod_ip, allocatable=s.allocatable,
                         base=s.ctx.service_env())
    write_volume_files(s, container, current.id, env)
    return _start(s, container, kind, current.id)


def _start(s: PodSyncState, container: dict, kind: str, container_id: str) -> ContainerState | None:
    name = str(container.get("name", ""))
    try:
        s.runtime.start_container(container_id)
    except RuntimeError_ as error:
        s.ctx.backoff.record((s.uid, name), s.now)
        s.event("Warning", "Failed", f"Error: {error}", kind, name)
        s.requeue.append(s.ctx.backoff.remaining((s.uid, name), s.now))
        state = s.refresh(container_id)
        if state is not None and state.state == "created":  # never ran: do not start it again and again
            s.runtime.remove_container(container_id)
            s.refresh(container_id)
            s.wait(name, kind, ("RunContainerError", str(error)))
        return None
    s.event("Normal", "Started", f"Started container {name}", kind, name)
    s.started.add(container_id)
    s.requeue.append(STARTED_RECHECK_SECONDS)  # readiness from the next look at the runtime
    state = s.refresh(container_id)
    if state is not None and state.state == "running":
        return _post_start(s, container, kind, state)
    return state


def _post_start(s: PodSyncState, container: dict, kind: str, state: ContainerState) -> ContainerState | None:
    """Run lifecycle.postStart; a failure kills the container (restarted per restartPolicy)."""
    hook = ((container.get("lifecycle") or {}).get("postStart")) or None
    if not hook:
        return state
    ok, message = _run_handler(s, container, hook, state.id, timeout=stop_grace(s.pod))
    if ok:
        return state
    name = str(container.get("name", ""))
    s.event("Warning", "FailedPostStartHook", f"PostStartHook failed: {message}", kind, name)
    return kill(s, container, kind, state, f"FailedPostStartHook: container {name} will be killed",
                grace=stop_grace(s.pod), pre_stop=False)


def _run_handler(s: PodSyncState, container: dict, handler: dict, container_id: str, *,
                 timeout: float) -> tuple[bool, str]:
    """A lifecycle hook's exec/httpGet/tcpSocket handler, run as a probe with `timeout`."""
    probe = {**handler, "timeoutSeconds": max(1, int(timeout))}
    return s.ctx.probes.run(probe, runtime=s.runtime, container_id=container_id, pod_ip=s.pod_ip,
                            host_ip=s.ctx.host_ip, remote=s.ctx.remote, ports=named_ports(container))


def kill(s: PodSyncState, container: dict, kind: str, state: ContainerState, message: str, *, grace: int,
         pre_stop: bool = True) -> ContainerState | None:
    """Stop a running instance (preStop hook first), within `grace` seconds in all."""
    name = str(container.get("name", ""))
    s.event("Normal", "Killing", message, kind, name)
    deadline = s.ctx.now() + grace
    hook = (container.get("lifecycle") or {}).get("preStop")
    if pre_stop and hook and grace > 0:
        ok, hook_message = _run_handler(s, container, hook, state.id, timeout=grace)
        if not ok:
            s.event("Warning", "FailedPreStopHook", f"PreStopHook failed: {hook_message}", kind, name)
    s.runtime.stop_container(state.id, timeout=max(0, min(grace, int(deadline - s.ctx.now()))))
    s.ctx.probes.forget(s.uid, name=name)
    return s.refresh(state.id)


__all__ = ["create_and_start", "kill", "start_existing"]
