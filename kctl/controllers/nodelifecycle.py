"""The node lifecycle controller: a silent node turns Unknown and is tainted; a live one is cleared.

Run by the controller manager in `kctl daemon`; written after Kubernetes'
pkg/controller/nodelifecycle (node_lifecycle_controller.go). Each node agent's
Heartbeat (kctl/agent/node.py) renews the Lease `kube-node-lease/<node>` only while the
host's Podman answers, and posts the Node's Ready condition. For each Node this
controller:

- notes the controller clock's time whenever the Lease's renewTime or the Ready
  condition's lastHeartbeatTime changes (Kubernetes' probeTimestamp; the first sight of
  a node counts as a change). Comparing the host's own timestamps with this clock would
  mark a node whose clock is behind as dead; a change seen here is immune to skew;
- once nothing changed for longer than `grace_period` (node-monitor-grace-period,
  default 40 s), sets every condition the agent posted to Unknown, reason
  NodeStatusUnknown, message "Kubelet stopped posting node status." (a node that never
  posted one gets Ready Unknown, NodeStatusNeverUpdated, "Kubelet never posted node
  status."), and records NodeNotReady on the Node; its pods' Ready condition turns False,
  each with a NodeNotReady Event (MarkPodsNotReady);
- keeps the node's taints in line with its Ready condition: False ->
  `node.kubernetes.io/not-ready`, Unknown -> `node.kubernetes.io/unreachable`, each with
  effects NoSchedule and NoExecute (NoExecute carries timeAdded); True -> neither. Going
  from not-ready to unreachable keeps the NoExecute taint's timeAdded, so pods' toleration
  seconds count from when the node first went bad, as Kubernetes' taint manager counts;
- asks to be called again at the moment the node would be silent too long: no polling.

When every node is not Ready at once, the trouble is most likely this control host's own
network: as Kubernetes' "master disruption mode", no NoExecute taints are added and
those present are removed (nothing is evicted) until a node is Ready again. The
NoExecute taints are acted on by the taint manager (kctl/controllers/taintmanager.py).

Not done (Kubernetes has them): node-startup-grace-period (a new node gets the same
grace), partial-disruption and per-zone eviction rate limits, MemoryPressure/DiskPressure/
PIDPressure taints (kctl's agents post only Ready), the unschedulable taint.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kctl.api.errors import APIError, Conflict, NotFound
from kctl.api.times import format_time
from kctl.controllers.base import clock_now, key_of

if TYPE_CHECKING:
    from kctl.controllers.base import ControllerContext
    from kctl.controllers.workqueue import WorkQueue

log = logging.getLogger("kctl.controllers.nodelifecycle")

LEASE_NAMESPACE = "kube-node-lease"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
LIFECYCLE_TAINT_KEYS = (TAINT_NOT_READY, TAINT_UNREACHABLE)
EFFECTS = ("NoSchedule", "NoExecute")
STATUS_UNKNOWN_REASON = "NodeStatusUnknown"
STATUS_UNKNOWN_MESSAGE = "Kubelet stopped posting node status."
NEVER_UPDATED_REASON = "NodeStatusNeverUpdated"
NEVER_UPDATED_MESSAGE = "Kubelet never posted node status."
DEFAULT_GRACE_SECONDS = 40.0
#: a requeue lands this much after the expiry, so the clock has passed it
_EPSILON = 0.01


@dataclass(frozen=True)
class NodeLifecycleSettings:
    """How long a node may be silent before it is Unknown (node-monitor-grace-period)."""

    grace_period: float = DEFAULT_GRACE_SECONDS


def condition(node: dict, type_: str) -> dict | None:
    for cond in (node.get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def ready_status(node: dict) -> str:
    """The Ready condition's status: "True", "False", or "Unknown" (also when there is none)."""
    cond = condition(node, "Ready")
    return (cond or {}).get("status") or "Unknown"


def all_unknown(node: dict) -> bool:
    """Whether the node has a Ready condition and every condition it has is Unknown."""
    conditions = (node.get("status") or {}).get("conditions") or ()
    return condition(node, "Ready") is not None and all(c.get("status") == "Unknown" for c in conditions)


def wanted_taint_key(ready: str) -> str | None:
    """The lifecycle taint a node with this Ready status carries (None when Ready)."""
    return {"True": None, "False": TAINT_NOT_READY}.get(ready, TAINT_UNREACHABLE)


def lifecycle_taints(taints: list[dict], key: str | None, *, now: dt.datetime, no_execute: bool) -> list[dict]:
    """`taints` with the not-ready/unreachable taints set to `key` (both effects; NoExecute only if
    `no_execute`). Taints already right are kept as they are; a swapped NoExecute keeps timeAdded."""
    others = [t for t in taints if t.get("key") not in LIFECYCLE_TAINT_KEYS]
    ours = [t for t in taints if t.get("key") in LIFECYCLE_TAINT_KEYS]
    if key is None:
        return others
    wanted = [effect for effect in EFFECTS if no_execute or effect != "NoExecute"]
    result = list(others)
    for effect in wanted:
        same = next((t for t in ours if t.get("key") == key and t.get("effect") == effect), None)
        if same is not None:
            result.append(same)
            continue
        taint = {"key": key, "effect": effect}
        if effect == "NoExecute":
            swapped = next((t for t in ours if t.get("effect") == "NoExecute" and t.get("timeAdded")), None)
            taint["timeAdded"] = swapped["timeAdded"] if swapped else format_time(now)
        result.append(taint)
    return result


def unknown_conditions(status: dict, now: dt.datetime) -> list[dict]:
    """The node's conditions all set to Unknown (Ready added if it was never posted)."""
    stamp = format_time(now)
    conditions = []
    for cond in status.get("conditions") or ():
        cond = dict(cond)
        if cond.get("status") != "Unknown":
            cond.update({"status": "Unknown", "reason": STATUS_UNKNOWN_REASON, "message": STATUS_UNKNOWN_MESSAGE,
                         "lastTransitionTime": stamp})
        conditions.append(cond)
    if not any(c.get("type") == "Ready" for c in conditions):
        conditions.append({"type": "Ready", "status": "Unknown", "reason": NEVER_UPDATED_REASON,
                           "message": NEVER_UPDATED_MESSAGE, "lastTransitionTime": stamp})
    return conditions


class NodeLifecycleController:
    """Marks silent nodes Unknown and keeps not-ready/unreachable taints in line (see module doc)."""

    name = "nodelifecycle"

    def __init__(self, *, settings: NodeLifecycleSettings = NodeLifecycleSettings()) -> None:
        self.settings = settings

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.nodes = ctx.informers.informer("nodes")
        self.leases = ctx.informers.informer("leases")
        self.pods = ctx.informers.informer("pods")
        self._lock = threading.Lock()
        #: node name -> (heartbeat signature, controller time it was first seen)
        self._probes: dict[str, tuple[tuple, float]] = {}
        #: whether every node was not Ready at the last look (master disruption mode)
        self._disrupted = False
        self.nodes.add_handler(self._enqueue, self._on_node_update, self._on_node_delete)
        self.leases.add_handler(self._on_lease, lambda old, new: self._on_lease(new), None)
        self._node_rt = self.api.resource("nodes")

    # -- event handlers ------------------------------------------------------------------

    def _enqueue(self, node: dict) -> None:
        self._observe(node["metadata"]["name"])
        self.queue.add(key_of(node))

    def _on_node_update(self, old: dict, new: dict) -> None:
        self._enqueue(new)
        if ready_status(old) != ready_status(new):  # the disruption mode may change for all
            for node in self.nodes.list():
                self.queue.add(key_of(node))

    def _on_node_delete(self, node: dict) -> None:
        with self._lock:
            self._probes.pop(node["metadata"]["name"], None)
        for other in self.nodes.list():
            self.queue.add(key_of(other))

    def _on_lease(self, lease: dict) -> None:
        if (lease.get("metadata") or {}).get("namespace") == LEASE_NAMESPACE:
            self._observe(lease["metadata"]["name"])
            self.queue.add(lease["metadata"]["name"])

    # -- reconcile -----------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        node = self.nodes.get("", key)
        if node is None:
            return None
        now = clock_now(self.ctx.clock)
        left = self._observe(key, now) + self.settings.grace_period - now.timestamp()
        if left < 0 and not all_unknown(node):  # silent for longer than the grace period
            node = self._mark_unknown(node, now)
            if node is None:
                return None
        self._taint(node, now)
        return left + _EPSILON if left >= 0 else None

    def _observe(self, name: str, now: dt.datetime | None = None) -> float:
        """Note the node's heartbeat (Lease renewTime, Ready lastHeartbeatTime) as the caches hold it;
        the controller time it was first seen (called by the handlers, so that is when it came)."""
        now = now or clock_now(self.ctx.clock)
        node = self.nodes.get("", name)
        if node is None:  # a Lease without its Node: nothing to note
            return now.timestamp()
        lease = self.leases.get(LEASE_NAMESPACE, name)
        renew = ((lease or {}).get("spec") or {}).get("renewTime")
        signature = (renew, (condition(node, "Ready") or {}).get("lastHeartbeatTime"))
        with self._lock:
            seen = self._probes.get(name)
            if seen is None or seen[0] != signature:
                seen = self._probes[name] = (signature, now.timestamp())
        return seen[1]

    def heartbeat_seen(self, name: str) -> tuple[str | None, str | None, float] | None:
        """(lease renewTime, Ready lastHeartbeatTime, controller time they were first seen) of a node."""
        with self._lock:
            seen = self._probes.get(name)
        return None if seen is None else (*seen[0], seen[1])

    def _mark_unknown(self, node: dict, now: dt.datetime) -> dict | None:
        """Write every condition Unknown; NodeNotReady Event and pods not ready if it was Ready."""
        was_ready = ready_status(node) == "True"
        new = copy.deepcopy(node)
        status = new.setdefault("status", {})
        status["conditions"] = unknown_conditions(status, now)
        try:
            written = self.api.update_status(new)  # Conflict: raised, retried with back-off
        except NotFound:
            return None
        name = node["metadata"]["name"]
        log.warning("node %s: no heartbeat for %.0f s: Ready=Unknown", name, self.settings.grace_period)
        if was_ready:
            self.ctx.recorder.event(written, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady")
            self._mark_pods_not_ready(name, now)
        return written

    def _mark_pods_not_ready(self, node_name: str, now: dt.datetime) -> None:
        """MarkPodsNotReady: each pod on the node whose Ready is True gets Ready False."""
        for pod in self.pods.by_index("node", node_name):
            if pod["metadata"].get("deletionTimestamp"):
                continue
            conditions = (pod.get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                continue
            new = copy.deepcopy(pod)
            for cond in new["status"]["conditions"]:
                if cond.get("type") == "Ready":
                    cond.update({"status": "False", "lastTransitionTime": format_time(now)})
            try:
                written = self.api.update_status(new)
            except APIError as exc:  # a Conflict: the agent wrote it meanwhile, so it speaks again
                log.info("node %s: cannot mark pod %s not ready: %s", node_name, pod["metadata"]["name"], exc)
                continue
            self.ctx.recorder.event(written, "Warning", "NodeNotReady", "Node is not ready")

    def _taint(self, node: dict, now: dt.datetime) -> None:
        """Set the not-ready/unreachable taints the node's Ready condition calls for."""
        if condition(node, "Ready") is None:
            return  # never posted and not yet overdue: leave it alone
        disrupted = self._all_disrupted(node, now)
        for attempt in range(2):
            key = wanted_taint_key(ready_status(node))
            taints = list((node.get("spec") or {}).get("taints") or [])
            wanted = lifecycle_taints(taints, key, now=now, no_execute=not disrupted)
            if wanted == taints:
                return
            new = copy.deepcopy(node)
            new.setdefault("spec", {})["taints"] = wanted
            if not wanted:
                new["spec"].pop("taints")
            try:
                self.api.update(new)
                break
            except NotFound:
                return
            except Conflict:
                if attempt:
                    raise  # retried with back-off
                try:  # most often our own last write, not yet in the cache
                    node = self.api.get(self._node_rt, node["metadata"]["name"])
                except NotFound:
                    return
        log.info("node %s: taints now %s", node["metadata"]["name"],
                 [f"{t['key']}:{t['effect']}" for t in wanted if t.get("key") in LIFECYCLE_TAINT_KEYS] or "cleared")

    def _all_disrupted(self, node: dict, now: dt.datetime) -> bool:
        """Whether every node is not Ready, or silent past its grace though not marked yet (this
        node as just written): master disruption mode."""
        name = node["metadata"]["name"]
        with self._lock:
            overdue = {n for n, (_, seen) in self._probes.items()
                       if seen + self.settings.grace_period < now.timestamp()}
        others = [n for n in self.nodes.list() if n["metadata"]["name"] != name]
        disrupted = ready_status(node) != "True" and all(
            ready_status(n) != "True" or n["metadata"]["name"] in overdue for n in others)
        if disrupted != self._disrupted:
            self._disrupted = disrupted
            if disrupted:
                log.warning("every node is not Ready: entering master disruption mode (no evictions)")
            else:
                log.info("a node is Ready again: leaving master disruption mode")
        return disrupted


def node_lifecycle_controllers(*, node_monitor_grace_period: float = DEFAULT_GRACE_SECONDS,
                               default_toleration_seconds: float = 300.0) -> list:
    """The node lifecycle controller, the taint manager (NoExecute eviction) and pod GC."""
    from kctl.controllers.podgc import PodGCController
    from kctl.controllers.taintmanager import TaintManager, TaintManagerSettings

    return [NodeLifecycleController(settings=NodeLifecycleSettings(grace_period=node_monitor_grace_period)),
            TaintManager(settings=TaintManagerSettings(default_toleration_seconds=default_toleration_seconds)),
            PodGCController()]


__all__ = ["EFFECTS", "LEASE_NAMESPACE", "LIFECYCLE_TAINT_KEYS", "NodeLifecycleController", "NodeLifecycleSettings",
           "STATUS_UNKNOWN_MESSAGE", "all_unknown", "STATUS_UNKNOWN_REASON", "TAINT_NOT_READY", "TAINT_UNREACHABLE",
           "lifecycle_taints", "node_lifecycle_controllers", "ready_status", "unknown_conditions",
           "wanted_taint_key"]
