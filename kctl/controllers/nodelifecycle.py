"""The node lifecycle controller: a silent node turns Unknown and is tainted; a live one is cleared.

Run by the controller manager in `kctl daemon`; written after Kubernetes'
pkg/controller/nodelifecycle (node_lifecycle_controller.go). Each node agent's
Heartbeat (kctl/agent/node.py) renews the Lease `kube-node-lease/<node>` only while it
reaches its host, and posts the Node's Ready condition. For each Node this controller:

- notes the controller clock's time whenever the node's heartbeat changes (Kubernetes'
  probeTimestamp; the first sight of a node counts as a change). The heartbeat is the
  Lease's renewTime when the node has a Lease, else the Ready condition's
  lastHeartbeatTime. A status written without a Lease renewal (an agent's late post
  during a partition) is therefore no sign of life. Comparing the host's own timestamps
  with this clock would mark a node whose clock is behind as dead; a change seen here is
  immune to skew;
- once nothing changed for longer than `grace_period` (node-monitor-grace-period,
  default 40 s), sets every condition the agent posted to Unknown, reason
  NodeStatusUnknown, message "Kubelet stopped posting node status." (a node that never
  posted one gets Ready Unknown, NodeStatusNeverUpdated, "Kubelet never posted node
  status."). When the agent said why it cannot reach the host (the Node annotations
  `kctl.io/unreachable-reason` / `-message`, docs/node-lifecycle.md), the Ready
  condition carries that reason and message instead, and follows them while it stays
  Unknown. A status posted meanwhile without a heartbeat is set back to Unknown;
- MarkPodsNotReady: whenever the node's Ready condition changes to anything but True,
  whoever wrote it (True->False by the agent, True->Unknown by this controller,
  False->Unknown, ...), and at the first sight of a node that is not Ready, each pod on
  it whose Ready condition is True gets Ready False with a NodeNotReady Event; leaving
  True also records NodeNotReady on the Node. A pod bound to (or created on) a node that
  is not Ready is marked too (the pod handler; its queue keys are "namespace/name",
  node keys have no slash);
- keeps the node's taints in line with its Ready condition: False ->
  `node.kubernetes.io/not-ready`, Unknown -> `node.kubernetes.io/unreachable`, each with
  effects NoSchedule and NoExecute (NoExecute carries timeAdded); True -> neither. Going
  from one to the other keeps the NoExecute taint's timeAdded, so pods' toleration
  seconds count from when the node first went bad;
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

from kctl.client.retry import retry_on_conflict
from kctl.machinery.errors import APIError, Conflict, NotFound
from kctl.machinery.times import format_time
from kctl.controllers.base import clock_now, key_of, split_key

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

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
#: why the agent cannot reach its host, and how to fix it (written by kctl/agent/node.py)
ANNOTATION_UNREACHABLE_REASON = "kctl.io/unreachable-reason"
ANNOTATION_UNREACHABLE_MESSAGE = "kctl.io/unreachable-message"
#: longest reason / message taken from those annotations onto the Ready condition
_MAX_REASON, _MAX_MESSAGE = 128, 1024
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


def unreachable_cause(node: dict) -> tuple[str, str] | None:
    """(reason, message) the agent gave for not reaching the node's host, None when it gave none."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    reason = str(annotations.get(ANNOTATION_UNREACHABLE_REASON) or "").strip()
    if not reason:
        return None
    message = str(annotations.get(ANNOTATION_UNREACHABLE_MESSAGE) or "").strip() or STATUS_UNKNOWN_MESSAGE
    return reason[:_MAX_REASON], message.splitlines()[0][:_MAX_MESSAGE]


def unknown_conditions(status: dict, now: dt.datetime, *, cause: tuple[str, str] | None = None) -> list[dict]:
    """The node's conditions all set to Unknown (Ready added if it was never posted).

    `cause` (reason, message) is why the host cannot be reached: it replaces the generic
    reason and message of the Ready condition.
    """
    stamp = format_time(now)
    conditions = []
    for cond in status.get("conditions") or ():
        cond = dict(cond)
        if cond.get("status") != "Unknown":
            cond.update({"status": "Unknown", "reason": STATUS_UNKNOWN_REASON, "message": STATUS_UNKNOWN_MESSAGE,
                         "lastTransitionTime": stamp})
        if cause is not None and cond.get("type") == "Ready":
            cond.update({"reason": cause[0], "message": cause[1]})
        conditions.append(cond)
    if not any(c.get("type") == "Ready" for c in conditions):
        reason, message = cause or (NEVER_UPDATED_REASON, NEVER_UPDATED_MESSAGE)
        conditions.append({"type": "Ready", "status": "Unknown", "reason": reason, "message": message,
                           "lastTransitionTime": stamp})
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
        #: node name -> the Ready status its pods were last brought in line with (MarkPodsNotReady)
        self._ready_seen: dict[str, str] = {}
        #: whether every node was not Ready at the last look (master disruption mode)
        self._disrupted = False
        self.nodes.add_handler(self._enqueue, self._on_node_update, self._on_node_delete)
        self.leases.add_handler(self._on_lease, lambda old, new: self._on_lease(new), None)
        self.pods.add_handler(self._on_pod, self._on_pod_update, None)
        self._node_rt = self.api.resource("nodes")
        self._pod_rt = self.api.resource("pods")

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
            self._ready_seen.pop(node["metadata"]["name"], None)
        for other in self.nodes.list():
            self.queue.add(key_of(other))

    def _on_lease(self, lease: dict) -> None:
        if (lease.get("metadata") or {}).get("namespace") == LEASE_NAMESPACE:
            self._observe(lease["metadata"]["name"])
            self.queue.add(lease["metadata"]["name"])

    def _on_pod(self, pod: dict) -> None:
        """A pod put on a node that is not Ready is marked not ready (Kubernetes' podUpdated)."""
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or pod["metadata"].get("deletionTimestamp"):
            return
        node = self.nodes.get("", node_name)
        if node is not None and condition(node, "Ready") is not None and ready_status(node) != "True":
            self.queue.add(key_of(pod))

    def _on_pod_update(self, old: dict, new: dict) -> None:
        if (old.get("spec") or {}).get("nodeName") != (new.get("spec") or {}).get("nodeName"):
            self._on_pod(new)

    # -- reconcile -----------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        if "/" in key:  # a pod's key (namespace/name): the pod handler's work
            self._reconcile_pod(key)
            return None
        node = self.nodes.get("", key)
        if node is None:
            return None
        now = clock_now(self.ctx.clock)
        left = self._observe(key, now) + self.settings.grace_period - now.timestamp()
        if left < 0 and not all_unknown(node) and self._renewed_meanwhile(key, now):
            left = self.settings.grace_period  # the Lease's informer had not caught up with the Node's
        if left < 0 and not all_unknown(node):  # silent for longer than the grace period
            node = self._mark_unknown(node, now)
        elif ready_status(node) == "Unknown" and condition(node, "Ready") is not None:
            node = self._follow_cause(node)
        if node is None:
            return None
        self._follow_ready(node, now)
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
        if lease is not None:  # the Lease is the heartbeat: a status post alone is no sign of life
            signature = ((lease.get("spec") or {}).get("renewTime"), None)
        else:
            signature = (None, (condition(node, "Ready") or {}).get("lastHeartbeatTime"))
        with self._lock:
            seen = self._probes.get(name)
            if seen is None or seen[0] != signature:
                seen = self._probes[name] = (signature, now.timestamp())
        return seen[1]

    def _renewed_meanwhile(self, name: str, now: dt.datetime) -> bool:
        """Whether the stored Lease was renewed since the cache's copy (noted as a heartbeat if so).

        Nodes and Leases come through separate informers: an agent that renews, then posts
        Ready, may have its post seen here before its renewal. Asked only before a node is
        marked Unknown, so it costs one read per overdue node.
        """
        try:
            lease = self.api.get(self.api.resource("leases"), name, namespace=LEASE_NAMESPACE)
        except NotFound:
            return False
        signature = ((lease.get("spec") or {}).get("renewTime"), None)
        with self._lock:
            seen = self._probes.get(name)
            if seen is not None and seen[0] == signature:
                return False
            self._probes[name] = (signature, now.timestamp())
        return True

    def heartbeat_seen(self, name: str) -> tuple[str | None, str | None, float] | None:
        """(lease renewTime, Ready lastHeartbeatTime, controller time first seen) of a node; the
        heartbeat time is None when the node has a Lease (then only the Lease counts)."""
        with self._lock:
            seen = self._probes.get(name)
        return None if seen is None else (*seen[0], seen[1])

    def _mark_unknown(self, node: dict, now: dt.datetime) -> dict | None:
        """Write every condition Unknown (the Ready one with the agent's cause, if it gave one)."""
        with self._lock:
            was = self._ready_seen.get(node["metadata"]["name"])
        new = copy.deepcopy(node)
        status = new.setdefault("status", {})
        status["conditions"] = unknown_conditions(status, now, cause=unreachable_cause(node))
        try:
            written = self.api.update_status(new)  # Conflict: raised, retried with back-off
        except NotFound:
            return None
        name = node["metadata"]["name"]
        if was == "Unknown":  # it was Unknown already: a status was posted without a heartbeat
            log.info("node %s: Ready=%s posted without a Lease renewal; Ready=Unknown again", name,
                     ready_status(node))
        else:
            log.warning("node %s: no heartbeat for %.0f s: Ready=Unknown", name, self.settings.grace_period)
        return written

    def _follow_cause(self, node: dict) -> dict | None:
        """An Unknown Ready condition takes up the agent's latest cause (reason, message)."""
        cause = unreachable_cause(node)
        ready = condition(node, "Ready") or {}
        if cause is None or (ready.get("reason"), ready.get("message")) == cause:
            return node
        new = copy.deepcopy(node)
        for cond in new["status"]["conditions"]:
            if cond.get("type") == "Ready":
                cond.update({"reason": cause[0], "message": cause[1]})
        try:
            return self.api.update_status(new)  # Conflict: raised, retried with back-off
        except NotFound:
            return None

    def _follow_ready(self, node: dict, now: dt.datetime) -> None:
        """MarkPodsNotReady once per change of the Ready status to anything but True (see module doc)."""
        name = node["metadata"]["name"]
        ready = ready_status(node) if condition(node, "Ready") is not None else None
        if ready is None:
            return  # never posted: nothing to follow yet
        with self._lock:
            before = self._ready_seen.get(name)
        if ready == before:
            return
        if ready != "True":
            if before == "True":
                self.ctx.recorder.event(node, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady")
            failed = [p["metadata"]["name"] for p in self.pods.by_index("node", name)
                      if not self._mark_pod_not_ready(p, name, now)]
            if failed:  # retried with back-off ("" is no status: the Event above is not repeated)
                with self._lock:
                    self._ready_seen[name] = ""
                raise APIError(f"node {name}: could not mark pods not ready: {', '.join(failed)}")
        with self._lock:
            self._ready_seen[name] = ready

    def _reconcile_pod(self, key: str) -> None:
        """A pod on a node that is not Ready gets Ready False (Kubernetes' processPod)."""
        namespace, name = split_key(key)
        pod = self.pods.get(namespace, name)
        if pod is None:
            return
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        node = self.nodes.get("", node_name)
        if node is None or condition(node, "Ready") is None or ready_status(node) == "True":
            return
        if not self._mark_pod_not_ready(pod, node_name, clock_now(self.ctx.clock)):
            raise APIError(f"pod {key}: could not mark it not ready")

    def _mark_pod_not_ready(self, pod: dict, node_name: str, now: dt.datetime) -> bool:
        """MarkPodsNotReady for one pod: Ready True -> False, with a NodeNotReady Event. False: failed."""
        meta = pod["metadata"]
        reread = False

        def mark() -> dict | None:
            """One read-modify-write: the pod as cached, then (after a Conflict) as stored now."""
            nonlocal reread
            current = self.api.get(self._pod_rt, meta["name"], namespace=meta.get("namespace")) if reread else pod
            reread = True
            if (current["metadata"].get("deletionTimestamp")
                    or (current.get("spec") or {}).get("nodeName") != node_name):
                return None
            conditions = (current.get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                return None
            new = copy.deepcopy(current)
            for cond in new["status"]["conditions"]:
                if cond.get("type") == "Ready":
                    cond.update({"status": "False", "lastTransitionTime": format_time(now)})
            return self.api.update_status(new)

        try:
            # a Conflict: written meanwhile (the agent, or our own last write): judge the new one
            written = retry_on_conflict(mark, attempts=2)
        except NotFound:
            return True
        except Conflict:
            log.info("node %s: cannot mark pod %s/%s not ready: it keeps changing", node_name,
                     meta.get("namespace"), meta["name"])
            return False
        except APIError as exc:
            log.info("node %s: cannot mark pod %s not ready: %s", node_name, meta["name"], exc)
            return False
        if written is not None:
            self.ctx.recorder.event(written, "Warning", "NodeNotReady", "Node is not ready")
        return True

    def _taint(self, node: dict, now: dt.datetime) -> None:
        """Set the not-ready/unreachable taints the node's Ready condition calls for."""
        if condition(node, "Ready") is None:
            return  # never posted and not yet overdue: leave it alone
        disrupted = self._all_disrupted(node, now)
        name = node["metadata"]["name"]
        reread = False

        def taint() -> list[dict] | None:
            """One read-modify-write: the node as cached, then (after a Conflict, most often our own
            last write not yet in the cache) as stored now; the taints written, or None."""
            nonlocal reread
            current = self.api.get(self._node_rt, name) if reread else node
            reread = True
            taints = list((current.get("spec") or {}).get("taints") or [])
            wanted = lifecycle_taints(taints, wanted_taint_key(ready_status(current)), now=now,
                                      no_execute=not disrupted)
            if wanted == taints:
                return None
            new = copy.deepcopy(current)
            new.setdefault("spec", {})["taints"] = wanted
            if not wanted:
                new["spec"].pop("taints")
            self.api.update(new)
            return wanted

        try:
            wanted = retry_on_conflict(taint, attempts=2)  # still conflicting: retried with back-off
        except NotFound:
            return
        if wanted is not None:
            log.info("node %s: taints now %s", name,
                     [f"{t['key']}:{t['effect']}" for t in wanted if t.get("key") in LIFECYCLE_TAINT_KEYS]
                     or "cleared")

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


__all__ = ["ANNOTATION_UNREACHABLE_MESSAGE", "ANNOTATION_UNREACHABLE_REASON", "EFFECTS", "LEASE_NAMESPACE",
           "LIFECYCLE_TAINT_KEYS", "NodeLifecycleController", "NodeLifecycleSettings",
           "STATUS_UNKNOWN_MESSAGE", "all_unknown", "STATUS_UNKNOWN_REASON", "TAINT_NOT_READY", "TAINT_UNREACHABLE",
           "lifecycle_taints", "ready_status", "unknown_conditions",
           "unreachable_cause", "wanted_taint_key"]
