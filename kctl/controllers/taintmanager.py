"""The taint manager: pods on a node with NoExecute taints they do not tolerate are evicted.

Run by the controller manager in `kctl daemon`; written after Kubernetes'
pkg/controller/tainteviction (taint_eviction.go). Queue keys are pod keys. A pod bound
to a node (spec.nodeName) is looked at when it changes and whenever its node's NoExecute
taints change. For each NoExecute taint on the node:

- no toleration of the pod tolerates it: the pod is evicted now;
- some tolerate it and one of them has tolerationSeconds: the pod is evicted once the
  shortest of those seconds has passed since the taint's timeAdded (a taint without
  timeAdded counts from when this controller first saw it);
- the tolerations that tolerate it have no tolerationSeconds: it never evicts the pod.

The pod is evicted at the earliest of these times; until then the reconcile asks to be
called again at that time (no polling), and a taint removed meanwhile cancels it. An
eviction marks the pod's status with the DisruptionTarget condition (reason
DeletionByTaintManager), records TaintManagerEviction on the pod and deletes it
gracefully: the pod gets a deletionTimestamp, its ReplicaSet replaces it at once
(terminating pods do not count), and the node agent finishes the deletion, stopping its
containers, when its host answers again (that is the fence).

Deviation: Kubernetes' DefaultTolerationSeconds admission plugin writes tolerations of
300 s for not-ready and unreachable NoExecute into every pod at creation. kctl applies
that default here instead, to a pod with no toleration for those taints, for
`default_toleration_seconds` (a `kctl daemon` setting), so the daemon's setting applies
to pods written by any CLI, old or new, and the pod's stored spec is left as written.
DaemonSet pods already carry tolerations of these taints without seconds
(kctl/controllers/daemonset.py), so they stay.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kctl.machinery.errors import Conflict, NotFound
from kctl.machinery.times import format_time, parse_time
from kctl.client.tolerations import tolerates
from kctl.controllers.base import clock_now, key_of
from kctl.controllers.nodelifecycle import TAINT_NOT_READY, TAINT_UNREACHABLE

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.taintmanager")

DEFAULT_TOLERATION_SECONDS = 300.0
#: a requeue lands this much after the eviction time, so the clock has passed it
_EPSILON = 0.01


@dataclass(frozen=True)
class TaintManagerSettings:
    """How long pods without their own toleration stay on a not-ready or unreachable node."""

    default_toleration_seconds: float = DEFAULT_TOLERATION_SECONDS


def no_execute_taints(node: dict | None) -> list[dict]:
    return [t for t in ((node or {}).get("spec") or {}).get("taints") or ()
            if isinstance(t, dict) and t.get("effect") == "NoExecute"]


def effective_tolerations(pod: dict, default_seconds: float) -> list[dict]:
    """The pod's tolerations plus DefaultTolerationSeconds' not-ready/unreachable ones it lacks."""
    tolerations = [t for t in (pod.get("spec") or {}).get("tolerations") or () if isinstance(t, dict)]
    extra = []
    for key in (TAINT_NOT_READY, TAINT_UNREACHABLE):
        # the admission plugin's test: a toleration of this key (or of every key) for NoExecute
        if not any((t.get("key") or "") in (key, "") and (t.get("effect") or "") in ("NoExecute", "")
                   for t in tolerations):
            extra.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                          "tolerationSeconds": default_seconds})
    return tolerations + extra


def eviction_time(taints: list[dict], tolerations: list[dict], *,
                  added: "dict[tuple, dt.datetime]") -> dt.datetime | None:
    """When the pod must go: the earliest time any NoExecute taint allows (None: never).

    `added` maps (key, value) of each taint to when it was added; `dt.datetime.min` as a
    result means at once (a taint no toleration tolerates).
    """
    when: dt.datetime | None = None
    for taint in taints:
        matching = [t for t in tolerations if tolerates(t, taint)]
        if not matching:
            return dt.datetime.min.replace(tzinfo=dt.timezone.utc)
        seconds = [max(0.0, float(t["tolerationSeconds"])) for t in matching
                   if t.get("tolerationSeconds") is not None]
        if not seconds:
            continue
        due = added[(taint.get("key"), taint.get("value"))] + dt.timedelta(seconds=min(seconds))
        when = due if when is None else min(when, due)
    return when


class TaintManager:
    """Evicts pods from nodes with NoExecute taints they do not (or no longer) tolerate."""

    name = "taintmanager"

    def __init__(self, *, settings: TaintManagerSettings = TaintManagerSettings()) -> None:
        self.settings = settings

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.nodes = ctx.informers.informer("nodes")
        self.pods = ctx.informers.informer("pods")
        self._lock = threading.Lock()
        #: (node uid, taint key, value) -> when first seen, for taints without timeAdded
        self._first_seen: dict[tuple, dt.datetime] = {}
        self.pods.add_handler(self._on_pod, lambda old, new: self._on_pod(new), None)
        self.nodes.add_handler(self._on_node, self._on_node_update, self._on_node_delete)
        self._pod_rt = self.api.resource("pods")

    # -- event handlers ------------------------------------------------------------------

    def _on_pod(self, pod: dict) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not pod["metadata"].get("deletionTimestamp") and no_execute_taints(self.nodes.get("", node)):
            self.queue.add(key_of(pod))

    def _on_node(self, node: dict) -> None:
        if no_execute_taints(node):
            self._enqueue_pods(node)

    def _on_node_update(self, old: dict, new: dict) -> None:
        if no_execute_taints(old) != no_execute_taints(new):
            self._enqueue_pods(new)

    def _on_node_delete(self, node: dict) -> None:
        uid = node["metadata"].get("uid")
        with self._lock:
            for key in [k for k in self._first_seen if k[0] == uid]:
                del self._first_seen[key]

    def _enqueue_pods(self, node: dict) -> None:
        for pod in self.pods.by_index("node", node["metadata"]["name"]):
            self.queue.add(key_of(pod))

    # -- reconcile -----------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        namespace, _, name = key.partition("/")
        pod = self.pods.get(namespace, name)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return None
        node = self.nodes.get("", (pod.get("spec") or {}).get("nodeName") or "")
        taints = no_execute_taints(node)
        if not taints:
            return None
        now = clock_now(self.ctx.clock)
        tolerations = effective_tolerations(pod, self.settings.default_toleration_seconds)
        when = eviction_time(taints, tolerations, added=self._added(node, taints, now))
        if when is None:
            return None
        if when > now:
            return (when - now).total_seconds() + _EPSILON
        self._evict(pod, node, now)
        return None

    def _added(self, node: dict, taints: list[dict], now: dt.datetime) -> dict[tuple, dt.datetime]:
        """When each taint was added: its timeAdded, else when this controller first saw it."""
        uid = node["metadata"].get("uid")
        added = {}
        with self._lock:
            for taint in taints:
                key = (taint.get("key"), taint.get("value"))
                when = parse_time(taint.get("timeAdded"))
                if when is None:
                    when = self._first_seen.setdefault((uid, *key), now)
                added[key] = when
        return added

    def _evict(self, pod: dict, node: dict, now: dt.datetime) -> None:
        meta = pod["metadata"]
        pod_name = f"{meta.get('namespace')}/{meta['name']}"
        try:
            pod = self._mark_disruption_target(pod, now)
            self.api.delete(self._pod_rt, meta["name"], namespace=meta.get("namespace"),
                            resource_version=pod["metadata"].get("resourceVersion"))
        except NotFound:
            return
        except Conflict:
            self.queue.add(key_of(pod))  # changed meanwhile: judge the new version
            return
        log.info("evicted pod %s from node %s (NoExecute taint)", pod_name, node["metadata"]["name"])
        self.ctx.recorder.event(pod, "Normal", "TaintManagerEviction", f"Marking for deletion Pod {pod_name}")

    def _mark_disruption_target(self, pod: dict, now: dt.datetime) -> dict:
        """The pod with condition DisruptionTarget (DeletionByTaintManager) written to its status."""
        new = copy.deepcopy(pod)
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "DisruptionTarget"]
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                           "message": "Taint manager: deleting due to NoExecute taint",
                           "lastTransitionTime": format_time(now)})
        status["conditions"] = conditions
        return self.api.update_status(new)


__all__ = ["DEFAULT_TOLERATION_SECONDS", "TaintManager", "TaintManagerSettings", "effective_tolerations",
           "eviction_time", "no_execute_taints"]
