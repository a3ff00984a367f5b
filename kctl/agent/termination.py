"""Stopping a Pod: on deletion (terminate_pod), and when it is done or past activeDeadlineSeconds.

The node agent (kctl.agent.agent) calls `terminate_pod` through kctl.agent.podsync for a
Pod being deleted (with its grace period) or gone from the node (grace 0): its running
containers are stopped in parallel (preStop hooks first, kctl.agent.lifecycle), then its
Podman pod and named volumes are removed and what the agent remembered of it (back-off,
probe results, volume hashes) is forgotten. kctl.agent.podsync calls `finish_terminal`
for a pod that has ended (Succeeded/Failed) or ran longer than activeDeadlineSeconds:
nothing starts again and what still runs is stopped.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from kctl.agent.containers import KIND_APP, KIND_INIT
from kctl.agent.lifecycle import kill
from kctl.agent.sandbox import find_sandboxes
from kctl.agent.status import instances
from kctl.agent.syncstate import (ERROR_RETRY_SECONDS, EventSpec, PodSyncState, SyncContext, SyncResult, meta,
                                  stop_grace)
from kctl.machinery.times import parse_seconds
from kctl.runtime.interface import LABEL_POD_UID, ContainerState, Runtime, RuntimeError_

log = logging.getLogger(__name__)


def terminate_pod(pod: dict, runtime: Runtime, ctx: SyncContext, *, grace_seconds: int) -> SyncResult:
    """Stop the pod within grace_seconds (preStop hooks first), then remove its Podman pod and volumes.

    Status keeps the phase it had. requeue_after is None when all is gone, else the time
    to try again (the runtime failed). Never raises.
    """
    s = PodSyncState(pod, runtime, ctx)
    try:
        return _terminate(s, max(0, grace_seconds))
    except Exception as error:
        log.error("pod %s/%s: stopping failed: %s: %s", meta(pod).get("namespace"), meta(pod).get("name"),
                  type(error).__name__, error, exc_info=not isinstance(error, RuntimeError_))
        return SyncResult(status=dict(pod.get("status") or {}),
                          events=[*s.events, EventSpec("Warning", "FailedKillPod", f"error killing pod: {error}")],
                          requeue_after=ERROR_RETRY_SECONDS)


def _terminate(s: PodSyncState, grace: int) -> SyncResult:
    sandboxes = find_sandboxes(s)
    s.sandbox = next((p for p in sandboxes if p.running), sandboxes[0] if sandboxes else None)
    s.containers = s.list_containers() if sandboxes else []
    running = [(container, kind, state) for key, kind in (("initContainers", KIND_INIT), ("containers", KIND_APP))
               for container in s.spec.get(key) or ()
               for state in instances(s.containers, kind, str(container.get("name", "")))
               if state.state == "running"]
    if len(running) == 1:
        _stop_one(s, *running[0], grace=grace)
    elif running:
        with ThreadPoolExecutor(max_workers=len(running), thread_name_prefix="kctl-stop") as pool:
            for future in [pool.submit(_stop_one, s, *item, grace=grace) for item in running]:
                future.result()
    s.containers = s.list_containers() if sandboxes else []
    s.phase = s.previous.get("phase") or None
    result = s.result()
    for sandbox in sandboxes:
        s.runtime.remove_pod(sandbox.id)
    for volume in s.runtime.list_volumes({LABEL_POD_UID: s.uid}):
        s.runtime.remove_volume(volume)
    _forget(s.ctx, s.uid)
    result.requeue_after = None
    return result


def _stop_one(s: PodSyncState, container: dict, kind: str, state: ContainerState, *, grace: int) -> None:
    kill(s, container, kind, state, f"Stopping container {container.get('name')}", grace=grace)


def _forget(ctx: SyncContext, uid: str) -> None:
    """Drop what the agent remembers of a pod that is gone."""
    ctx.backoff.forget(uid)
    ctx.probes.forget(uid)
    for key in [k for k in list(ctx.volume_hashes) if k[0] == uid]:
        ctx.volume_hashes.pop(key, None)


# -- a pod that is done ---------------------------------------------------------------------------

def deadline_exceeded(s: PodSyncState) -> bool:
    """Whether the pod has run longer than its activeDeadlineSeconds."""
    deadline = s.spec.get("activeDeadlineSeconds")
    started = parse_seconds(s.previous.get("startTime"))
    return isinstance(deadline, int) and started is not None and s.now - started >= deadline


def finish_terminal(s: PodSyncState, already: bool) -> SyncResult:
    """A pod that is done (or past activeDeadlineSeconds): nothing starts; what runs is stopped."""
    found = find_sandboxes(s)
    s.sandbox = next((p for p in found if p.running), found[0] if found else None)
    s.containers = s.list_containers() if s.sandbox is not None else []
    if not already:
        s.phase, s.reason = "Failed", "DeadlineExceeded"
        s.message = "Pod was active on the node longer than the specified deadline"
        s.event("Normal", "DeadlineExceeded", s.message)
    for key, kind in (("initContainers", KIND_INIT), ("containers", KIND_APP)):
        for container in s.spec.get(key) or ():
            current = s.newest(kind, str(container.get("name", "")))
            if current is not None and current.state == "running":
                kill(s, container, kind, current, f"Stopping container {container.get('name')}",
                     grace=stop_grace(s.pod))
    return s.result()


__all__ = ["deadline_exceeded", "finish_terminal", "terminate_pod"]
