"""Pod garbage collection: pods no node agent will ever finish are force-deleted.

Run by the controller manager in `kctl daemon`; written after Kubernetes'
pkg/controller/podgc (gc_controller.go), cut down to two of its rules. Queue keys are
pod keys; a pod is looked at when it changes, when its node is deleted, and when its
node's taints change. A pod is force-deleted (grace period 0: removed from the store at
once) when:

- it is bound to a node that does not exist, in the store (not only the cache) and
  still 40 s later (Kubernetes' quarantine, so a node registered just after its pods
  is not too late): no agent is left to stop it (gcOrphaned);
- it is terminating on a node that is not Ready and is tainted
  `node.kubernetes.io/out-of-service` (any effect): the administrator says the node is
  down for good, so the pod's name is freed without waiting for its agent
  (gcTerminating, the non-graceful node shutdown).

Not done: the threshold of terminated pods kept (terminated-pod-gc-threshold), the
DisruptionTarget condition Kubernetes writes before the delete. Unbound terminating pods need no rule:
the API layer deletes them at once.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from kctl.machinery.errors import NotFound
from kctl.controllers.base import clock_now, key_of
from kctl.controllers.nodelifecycle import ready_status

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.podgc")

TAINT_OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
#: how long a pod's node must stay missing before the pod is deleted
QUARANTINE_SECONDS = 40.0


def out_of_service(node: dict) -> bool:
    """Not Ready and tainted node.kubernetes.io/out-of-service."""
    taints = (node.get("spec") or {}).get("taints") or ()
    return ready_status(node) != "True" and any(t.get("key") == TAINT_OUT_OF_SERVICE for t in taints)


class PodGCController:
    """Force-deletes pods of deleted nodes, and terminating pods of out-of-service nodes."""

    name = "podgc"

    def __init__(self, *, quarantine_seconds: float = QUARANTINE_SECONDS) -> None:
        self.quarantine_seconds = quarantine_seconds

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self._lock = threading.Lock()
        #: pod uid -> controller time its node was first found missing
        self._missing_since: dict[str, float] = {}
        self.nodes = ctx.informers.informer("nodes")
        self.pods = ctx.informers.informer("pods")
        self.pods.add_handler(self._on_pod, lambda old, new: self._on_pod(new), self._on_pod_delete)
        self.nodes.add_handler(None, self._on_node_update, self._enqueue_pods)
        self._pod_rt = self.api.resource("pods")
        self._node_rt = self.api.resource("nodes")

    def _on_pod(self, pod: dict) -> None:
        if (pod.get("spec") or {}).get("nodeName"):
            self.queue.add(key_of(pod))

    def _on_pod_delete(self, pod: dict) -> None:
        with self._lock:
            self._missing_since.pop(pod["metadata"].get("uid") or "", None)

    def _on_node_update(self, old: dict, new: dict) -> None:
        if out_of_service(new) and not out_of_service(old):
            self._enqueue_pods(new)

    def _enqueue_pods(self, node: dict) -> None:
        for pod in self.pods.by_index("node", node["metadata"]["name"]):
            self.queue.add(key_of(pod))

    def reconcile(self, key: str) -> float | None:
        namespace, _, name = key.partition("/")
        pod = self.pods.get(namespace, name)
        node_name = ((pod or {}).get("spec") or {}).get("nodeName")
        if not node_name:
            return None
        node = self.nodes.get("", node_name)
        uid = pod["metadata"].get("uid") or ""
        if node is None:
            return self._orphaned(pod, node_name)
        with self._lock:
            self._missing_since.pop(uid, None)
        if pod["metadata"].get("deletionTimestamp") and out_of_service(node):
            self._force_delete(pod, f"node {node_name} is out of service")
        return None

    def _orphaned(self, pod: dict, node_name: str) -> float | None:
        """Delete a pod whose node is missing from the store for the quarantine; else look again then."""
        uid = pod["metadata"].get("uid") or ""
        now = clock_now(self.ctx.clock).timestamp()
        try:
            self.api.get(self._node_rt, node_name)
            return None  # the cache is behind: the node exists
        except NotFound:
            pass
        with self._lock:
            since = self._missing_since.setdefault(uid, now)
            left = since + self.quarantine_seconds - now
            if left <= 0:
                self._missing_since.pop(uid, None)
        if left > 0:
            return left + 0.01
        self._force_delete(pod, f"node {node_name} does not exist")
        return None

    def _force_delete(self, pod: dict, why: str) -> None:
        meta = pod["metadata"]
        try:
            self.api.delete(self._pod_rt, meta["name"], namespace=meta.get("namespace"), grace_period=0,
                            resource_version=meta.get("resourceVersion"))
        except NotFound:
            return
        log.info("force-deleted pod %s/%s: %s", meta.get("namespace"), meta["name"], why)


__all__ = ["PodGCController", "QUARANTINE_SECONDS", "TAINT_OUT_OF_SERVICE", "out_of_service"]
