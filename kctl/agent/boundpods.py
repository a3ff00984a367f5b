"""The Pods bound to one node, by uid: the agent's view of its pod informer.

The node agent (kctl.agent.agent) reads its pods through a `BoundPods`. The objects come
from a kctl.client.informer.Informer of pods filtered server-side to
`spec.nodeName=<node>` (indexed here by uid, the agent's work-queue key), overlaid with
the Pods the agent itself wrote or re-read that the informer's watch has not brought
back yet (the kubelet's status manager keeps the same cache): a sync that follows a
status write at once sees that status, not the one before it. An overlaid object is
dropped as soon as the informer holds its version or a newer one, and whenever the
informer no longer holds the pod at all (deleted, or moved off the node): the informer
alone says which pods exist.

`get` hands out a copy; `get_ref` and `values` the shared objects (read, never change).
"""

from __future__ import annotations

import copy
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kctl.client.informer import Informer

#: the informer index the agent finds pods by
UID_INDEX = "uid"


def uid_index(obj: dict) -> list[str]:
    uid = (obj.get("metadata") or {}).get("uid")
    return [uid] if isinstance(uid, str) and uid else []


def _rv(obj: dict) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


class BoundPods:
    """Pods by uid from an informer, with the agent's own newer writes laid over (see the module doc)."""

    def __init__(self, informer: Informer) -> None:
        self.informer = informer
        informer.add_index(UID_INDEX, uid_index)
        self._written: dict[str, dict] = {}  # uid -> a Pod newer than the informer's copy
        self._lock = threading.Lock()

    def _cached(self, uid: str) -> dict | None:
        found = self.informer.by_index(UID_INDEX, uid)
        return found[0] if found else None

    def get_ref(self, uid: str) -> dict | None:
        """The newest Pod with this uid known here (shared: never change it), None when there is none."""
        cached = self._cached(uid)
        with self._lock:
            written = self._written.get(uid)
            if written is None:
                return cached
            if cached is not None and _rv(written) > _rv(cached):
                return written
            del self._written[uid]  # the informer caught up, or the pod is gone
            return cached

    def get(self, uid: str) -> dict | None:
        """A copy of the newest Pod with this uid, None when there is none."""
        obj = self.get_ref(uid)
        return copy.deepcopy(obj) if obj is not None else None

    def offer(self, pod: dict) -> None:
        """A Pod the agent wrote or read itself: served instead of the informer's until that catches up."""
        uid = (pod.get("metadata") or {}).get("uid")
        if not uid:
            return
        with self._lock:
            known = self._written.get(uid)
            if known is None or _rv(pod) > _rv(known):
                self._written[uid] = pod

    def forget(self, uid: str) -> None:
        """Drop what the agent laid over a pod that is gone."""
        with self._lock:
            self._written.pop(uid, None)

    def uids(self) -> list[str]:
        """Every pod uid the informer holds."""
        return self.informer.index_values(UID_INDEX)

    def values(self) -> list[dict]:
        """The newest version of every pod (shared: never change them)."""
        out = []
        for pod in self.informer.list():
            uid = (pod.get("metadata") or {}).get("uid", "")
            with self._lock:
                written = self._written.get(uid)
            out.append(written if written is not None and _rv(written) > _rv(pod) else pod)
        return out

    def __len__(self) -> int:
        return len(self.informer)


__all__ = ["UID_INDEX", "BoundPods", "uid_index"]
