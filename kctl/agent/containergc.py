"""Container garbage collection (the kubelet's kuberuntime_gc): old instances and orphans.

kctl.agent.podsync calls `remove_old_instances` at the end of every sync: each container
keeps its two newest instances (`kctl logs --previous` reads the one before last). The
node agent (kctl.agent.agent) calls `cleanup_orphans` after its first list and in the
fence before its node reports Ready: every kctl-made Podman pod, container and volume
whose pod uid is not bound to the node is removed. A stuck orphan is warned about once.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from kctl.agent.containers import KIND_APP
from kctl.agent.status import instances
from kctl.agent.syncstate import PodSyncState, managed
from kctl.runtime.interface import LABEL_CONTAINER, LABEL_CONTAINER_KIND, LABEL_MANAGED, LABEL_POD_UID, Runtime, \
    RuntimeError_

log = logging.getLogger(__name__)

#: instances kept per container: the newest and the one before it (for `kctl logs --previous`)
KEEP_INSTANCES = 2


def remove_old_instances(s: PodSyncState) -> None:
    """Keep each container's two newest instances (the one before serves `kctl logs --previous`)."""
    groups: dict[tuple[str, str], None] = {}
    for state in s.containers:
        groups[(state.labels.get(LABEL_CONTAINER_KIND, KIND_APP), state.labels.get(LABEL_CONTAINER, ""))] = None
    for kind, name in groups:
        for state in instances(s.containers, kind, name)[KEEP_INSTANCES:]:
            if state.state != "running":
                try:
                    s.runtime.remove_container(state.id)
                except RuntimeError_ as error:
                    log.warning("pod %s: cannot remove old container %s: %s", s.uid, state.name, error)


def cleanup_orphans(runtime: Runtime, *, keep_uids: set[str]) -> list[str]:
    """Remove kctl-made Podman pods, stray containers and volumes of pods not in keep_uids.

    Only objects labelled io.kctl.managed=true with a pod uid label are touched (volumes:
    also named kctl_...). Returns the names removed: Podman pods, then containers, then
    volumes. A failure to remove one is logged and the others are still tried.
    """
    removed: list[str] = []
    labels = {LABEL_MANAGED: "true"}
    for sandbox in runtime.list_pods(labels):
        uid = sandbox.labels.get(LABEL_POD_UID)
        if managed(sandbox.labels) and uid and uid not in keep_uids:
            if _remove(runtime.remove_pod, sandbox.id, sandbox.name):
                removed.append(sandbox.name)
    for state in runtime.list_containers(labels):
        uid = state.labels.get(LABEL_POD_UID)
        if managed(state.labels) and uid and uid not in keep_uids:
            if _remove(runtime.remove_container, state.id, state.name):
                removed.append(state.name)
    volumes = set(runtime.list_volumes(labels))
    if volumes:
        kept = {name for uid in keep_uids for name in runtime.list_volumes({**labels, LABEL_POD_UID: uid})}
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


__all__ = ["KEEP_INSTANCES", "cleanup_orphans", "remove_old_instances"]
