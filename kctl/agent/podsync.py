"""The kubelet's pod logic: make one Pod true on a runtime, stop it, clean up what no Pod owns.

The node agent (kctl.agent.agent) calls, for each Pod bound to its node:
- `sync_pod` on every change and periodically (level-triggered: it compares the Pod with
  what the runtime shows and acts only on the difference, so calling it twice does
  nothing more the second time);
- `terminate_pod` when the Pod is being deleted (or left the node; kctl.agent.termination);
- `cleanup_orphans` once after its first list (kctl.agent.containergc).
Each returns the Pod's recomputed status and the Events to record (the caller writes
both), and never raises: a failure becomes a waiting reason, a Warning event and a
`requeue_after`.

What sync_pod does, in order (see docs/agent.md); each step is a module working on the
sync's shared state (kctl.agent.syncstate.PodSyncState):
1. find the Podman pod by the pod-uid label (adopting one made before an agent restart),
   or create it (its containers are listed only when it was not made just now); a dead
   one is removed and made again (SandboxChanged), except under restartPolicy Never once
   containers ran (the pod then ends as they did) (kctl.agent.sandbox);
2. create the pod's named volumes and compute the files of configMap/secret/downwardAPI
   volumes (a missing source keeps containers from being created: FailedMount)
   (kctl.agent.volumesetup);
3. run the init containers one at a time, each to exit 0 (a failure fails the pod under
   restartPolicy Never, else is retried with back-off) (kctl.agent.containersync);
4. create and start each app container (image pulled per imagePullPolicy, environment
   and volume files prepared first: kctl.agent.lifecycle, kctl.agent.imagepull); restart
   exited ones per restartPolicy with back-off (CrashLoopBackOff); recreate a running one
   whose image changed in the Pod (kctl.agent.containersync);
5. run the probes that are due (liveness/startup failures kill and restart);
6. rewrite configMap/secret volume files whose content changed (through a never-started
   "volume writer" container, as the app mounts them read-only); remove old exited
   instances (keeping the two newest: `kctl logs --previous` reads the one before last)
   (kctl.agent.containergc);
7. compute the status (kctl.agent.status).
A pod that has ended, or ran past activeDeadlineSeconds, only has what runs stopped
(kctl.agent.termination.finish_terminal).
"""

from __future__ import annotations

import logging
from typing import Callable

from kctl.agent.containergc import cleanup_orphans, remove_old_instances
from kctl.agent.containers import KIND_APP
from kctl.agent.containersync import go_duration, run_probes, should_restart, sync_app, sync_init_containers
from kctl.agent.sandbox import ensure_sandbox
from kctl.agent.status import TERMINAL_PHASES
from kctl.agent.syncstate import ERROR_RETRY_SECONDS, EventSpec, PodSyncState, SyncContext, SyncResult, meta
from kctl.agent.termination import deadline_exceeded, finish_terminal, terminate_pod
from kctl.agent.volumesetup import ensure_volumes, refresh_volume_files
from kctl.runtime.interface import Runtime, RuntimeError_

log = logging.getLogger(__name__)


def sync_pod(pod: dict, runtime: Runtime, ctx: SyncContext) -> SyncResult:
    """Make the pod true on the runtime (see the module docstring); never raises."""
    s = PodSyncState(pod, runtime, ctx)
    try:
        return _run(s)
    except Exception as error:  # one pod's trouble must not stop the agent
        log.error("pod %s/%s: sync failed: %s: %s", meta(pod).get("namespace"), meta(pod).get("name"),
                  type(error).__name__, error, exc_info=not isinstance(error, RuntimeError_))
        status = dict(pod.get("status") or {})
        return SyncResult(status=status, events=[*s.events, EventSpec("Warning", "FailedSync",
                                                                      f"error syncing pod: {error}")],
                          requeue_after=ERROR_RETRY_SECONDS)


def _run(s: PodSyncState) -> SyncResult:
    """The steps of one sync, in order."""
    terminal = s.previous.get("phase") in TERMINAL_PHASES
    if terminal or deadline_exceeded(s):
        return finish_terminal(s, terminal)
    s.sandbox = ensure_sandbox(s)
    if s.sandbox is None:
        return s.result()
    s.containers = [] if s.new_sandbox else s.list_containers()  # a sandbox just made holds none
    if not s.sandbox.running:  # restartPolicy Never: what ran stays as it ended
        return s.result()
    ensure_volumes(s)
    if sync_init_containers(s):
        for container in s.spec.get("containers") or ():
            _guarded(s, container, sync_app)
        run_probes(s)
    refresh_volume_files(s)
    remove_old_instances(s)
    s.containers = s.list_containers()
    return s.result()


def _guarded(s: PodSyncState, container: dict, step: Callable[[PodSyncState, dict, str], None]) -> None:
    """Run one app container's step; a runtime error becomes an event and a retry, not a raise."""
    try:
        step(s, container, KIND_APP)
    except RuntimeError_ as error:
        s.event("Warning", "Failed", f"Error: {error}", KIND_APP, container.get("name", ""))
        s.requeue.append(ERROR_RETRY_SECONDS)


__all__ = ["EventSpec", "SyncContext", "SyncResult", "cleanup_orphans", "go_duration", "should_restart",
           "sync_pod", "terminate_pod"]
