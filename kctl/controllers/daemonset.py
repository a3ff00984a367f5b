"""The DaemonSet controller: one pod per eligible node, rolled out with maxUnavailable.

Run by the controller manager in `kctl daemon`; written after Kubernetes'
pkg/controller/daemon (daemon_controller.go, update.go). For each DaemonSet it:

- decides per Node whether a daemon pod should run there (`node_should_run`): the
  template's nodeName, nodeSelector and required node affinity must match, and every
  NoSchedule/NoExecute taint must be tolerated, counting the tolerations Kubernetes adds
  to every daemon pod (not-ready and unreachable NoExecute; disk-, memory-, pid-pressure
  and unschedulable NoSchedule; network-unavailable for hostNetwork pods). A pod already
  on a node with a new untolerated NoSchedule taint keeps running; NoExecute evicts it.
- creates the missing pods already bound: `spec.nodeName` is set (so no scheduler is
  needed) and, as Kubernetes does, the required node affinity becomes one term
  `matchFields: metadata.name In [node]`; creations go in slow-start batches (1, 2, 4,
  ...) and are tracked with expectations so a stale cache never causes a double create.
- deletes pods on nodes that should not run one (or that no longer exist), extra pods on
  a node (the oldest stays), and Failed/Succeeded pods (replaced on the next pass).
- rolls out a changed template: pods carry `controller-revision-hash` (a hash of the
  template) and `pod-template-generation`. RollingUpdate deletes old pods only while
  the number of unavailable daemon pods stays within maxUnavailable (absolute or a
  percentage of desiredNumberScheduled, rounded up); a node's new pod is created once
  its old one is gone. OnDelete replaces a pod only when someone deletes it.
- adopts orphan pods that match its selector and releases owned pods that no longer do.
- always writes status: desiredNumberScheduled, currentNumberScheduled, numberReady,
  numberAvailable (minReadySeconds), numberUnavailable, updatedNumberScheduled,
  numberMisscheduled, observedGeneration.

kctl has no ControllerRevision kind, so there is no revision history for DaemonSets
(the hash label alone tells new pods from old); maxSurge is not honoured (treated as 0).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kctl.machinery.errors import AlreadyExists, APIError, NotFound
from kctl.client import pods as podutil
from kctl.client.claim import ClaimIncomplete, ControllerRefManager
from kctl.client.statuswriter import StatusWriter
from kctl.client.tolerations import tolerates
from kctl.controllers.base import clock_now, controller_ref, key_of, owner_key

if TYPE_CHECKING:
    from kctl.machinery.selectors import LabelSelector
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.daemonset")

HASH_LABEL = "controller-revision-hash"
GENERATION_LABEL = "pod-template-generation"
COMPONENT = "daemonset-controller"

#: tolerations Kubernetes adds to every daemon pod (util.AddOrUpdateDaemonPodTolerations)
DEFAULT_TOLERATIONS: tuple[dict, ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
NETWORK_UNAVAILABLE = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
                       "effect": "NoSchedule"}
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True)
class DaemonSetSettings:
    """Bounds on one reconcile's work."""

    #: most pods created or deleted by one reconcile (the rest on the next pass)
    burst: int = 250


# -- node eligibility ---------------------------------------------------------------------

def daemon_tolerations(pod_spec: dict) -> list[dict]:
    """The pod's tolerations plus the defaults Kubernetes adds to daemon pods (no duplicates)."""
    tolerations = [dict(t) for t in pod_spec.get("tolerations") or () if isinstance(t, dict)]
    defaults = list(DEFAULT_TOLERATIONS)
    if pod_spec.get("hostNetwork"):
        defaults.append(NETWORK_UNAVAILABLE)
    for default in defaults:
        if not any(t.get("key") == default["key"] and t.get("effect") == default["effect"] for t in tolerations):
            tolerations.append(dict(default))
    return tolerations


def _requirement_matches(req: dict, value: str | None) -> bool:
    operator = req.get("operator")
    values = [str(v) for v in req.get("values") or ()]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        try:
            have, want = int(value or ""), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > want if operator == "Gt" else have < want
    return False


def node_selector_term_matches(term: dict, node: dict) -> bool:
    """One NodeSelectorTerm: all its matchExpressions (labels) and matchFields (metadata.name)."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no node
    labels = (node.get("metadata") or {}).get("labels") or {}
    for req in expressions:
        if not _requirement_matches(req, labels.get(req.get("key"))):
            return False
    for req in fields:
        value = node["metadata"].get("name") if req.get("key") == "metadata.name" else None
        if not _requirement_matches(req, value):
            return False
    return True


def node_affinity_matches(pod_spec: dict, node: dict) -> bool:
    """nodeSelector and requiredDuringSchedulingIgnoredDuringExecution both hold for node."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required:
        terms = required.get("nodeSelectorTerms") or []
        if not any(node_selector_term_matches(t, node) for t in terms):
            return False
    return True


def node_should_run(ds: dict, node: dict) -> tuple[bool, bool]:
    """(should run a daemon pod here, may keep one already running here), as Kubernetes decides."""
    pod_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    name = node["metadata"]["name"]
    if pod_spec.get("nodeName") and pod_spec["nodeName"] != name:
        return False, False
    if not node_affinity_matches(pod_spec, node):
        return False, False
    tolerations = daemon_tolerations(pod_spec)
    should_run = True
    for taint in (node.get("spec") or {}).get("taints") or ():
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if any(tolerates(t, taint) for t in tolerations):
            continue
        if taint.get("effect") == "NoExecute":
            return False, False
        should_run = False
    return should_run, True


# -- pods ---------------------------------------------------------------------------------

def template_hash(ds: dict) -> str:
    """controller.ComputeHash: fnv-32a of the template (and collisionCount), safe-encoded."""
    template = (ds.get("spec") or {}).get("template") or {}
    data = json.dumps(template, sort_keys=True, separators=(",", ":"))
    collisions = (ds.get("status") or {}).get("collisionCount")
    if collisions:
        data += str(collisions)
    value = 0x811C9DC5
    for byte in data.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in str(value))


def new_pod(ds: dict, node_name: str, hash_: str) -> dict:
    """The daemon pod for one node: the template, labelled, owned, tolerant and bound."""
    meta = ds["metadata"]
    template = copy.deepcopy((ds.get("spec") or {}).get("template") or {})
    tmeta = template.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    labels[HASH_LABEL] = hash_
    labels[GENERATION_LABEL] = str(meta.get("generation", 1))
    pod_meta: dict = {
        "generateName": f"{meta['name']}-", "namespace": meta.get("namespace", "default"), "labels": labels,
        "ownerReferences": [{"apiVersion": ds.get("apiVersion", "apps/v1"), "kind": "DaemonSet",
                             "name": meta["name"], "uid": meta["uid"], "controller": True,
                             "blockOwnerDeletion": True}],
    }
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    spec = template.get("spec") or {}
    spec["tolerations"] = daemon_tolerations(spec)
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
    spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


def pod_available(pod: dict, min_ready_seconds: int, now: dt.datetime) -> bool:
    """IsPodAvailable (kctl.client.pods) for a pod not being deleted: a terminating pod counts as unavailable."""
    return not podutil.pod_terminating(pod) and podutil.pod_available(pod, min_ready_seconds, now)


def _created(pod: dict) -> tuple[str, str]:
    meta = pod["metadata"]
    return meta.get("creationTimestamp") or "", meta.get("name", "")


def scaled_value(value: int | str | None, total: int, *, round_up: bool, default: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent."""
    if value is None:
        return default
    if isinstance(value, str) and value.endswith("%"):
        try:
            percent = int(value[:-1])
        except ValueError:
            return default
        scaled = percent * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


# -- the controller -------------------------------------------------------------------------

class DaemonSetController:
    """Keeps one daemon pod on every eligible node, and rolls them out."""

    name = "daemonset"

    def __init__(self, *, settings: DaemonSetSettings = DaemonSetSettings()) -> None:
        self.settings = settings

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        from kctl.client.expectations import Expectations

        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.expectations = Expectations()
        self.daemonsets = ctx.informers.informer("daemonsets")
        self.pods = ctx.informers.informer("pods")
        self.nodes = ctx.informers.informer("nodes")
        self.daemonsets.add_handler(self._enqueue, lambda old, new: self._enqueue(new), self._on_ds_delete)
        self.pods.add_handler(self._on_pod_add, self._on_pod_update, self._on_pod_delete)
        self.nodes.add_handler(self._on_node_change, self._on_node_update, self._on_node_change)
        self._pod_rt = self.api.resource("pods")
        self._ds_rt = self.api.resource("daemonsets")
        self.status_writer = StatusWriter(self.api)

    def object_for(self, key: str) -> dict | None:
        """The cached DaemonSet of a key (a permanent failure's Warning Event goes on it)."""
        namespace, _, name = key.rpartition("/")
        return self.daemonsets.get(namespace, name)

    # -- event handlers ------------------------------------------------------------------

    def _enqueue(self, ds: dict) -> None:
        self.queue.add(key_of(ds))

    def _on_ds_delete(self, ds: dict) -> None:
        key = key_of(ds)
        self.expectations.delete(key)
        self.queue.add(key)

    def _owner_key(self, pod: dict) -> str | None:
        return owner_key(pod, "DaemonSet")

    def _on_pod_add(self, pod: dict) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.creation_observed(key)
            self.queue.add(key)
        elif pod["metadata"].get("labels"):
            self._enqueue_matching(pod)

    def _on_pod_update(self, old: dict, new: dict) -> None:
        key = self._owner_key(new)
        if new["metadata"].get("deletionTimestamp") and not old["metadata"].get("deletionTimestamp") and key:
            self.expectations.deletion_observed(key, new["metadata"]["uid"])
        old_key = self._owner_key(old)
        if old_key and old_key != key:
            self.queue.add(old_key)
        if key is not None:
            self.queue.add(key)
        elif (old["metadata"].get("labels") != new["metadata"].get("labels")
              or old["metadata"].get("ownerReferences") != new["metadata"].get("ownerReferences")):
            self._enqueue_matching(new)

    def _on_pod_delete(self, pod: dict) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.deletion_observed(key, pod["metadata"]["uid"])
            self.queue.add(key)

    def _enqueue_matching(self, pod: dict) -> None:
        """An orphan pod: the DaemonSets whose selector it matches may adopt it."""
        from kctl.machinery.selectors import from_label_selector_object

        ns = pod["metadata"].get("namespace")
        labels = pod["metadata"].get("labels") or {}
        for ds in self.daemonsets.list(ns):
            try:
                if from_label_selector_object((ds.get("spec") or {}).get("selector")).matches(labels):
                    self._enqueue(ds)
            except APIError:
                continue

    def _on_node_change(self, node: dict) -> None:
        for ds in self.daemonsets.list():
            self._enqueue(ds)

    def _on_node_update(self, old: dict, new: dict) -> None:
        om, nm = old.get("metadata") or {}, new.get("metadata") or {}
        if om.get("labels") != nm.get("labels") or (old.get("spec") or {}) != (new.get("spec") or {}):
            self._on_node_change(new)  # status-only changes (heartbeats) cannot change placement

    # -- reconcile -----------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        namespace, _, name = key.rpartition("/")
        ds = self.daemonsets.get(namespace, name)
        if ds is None:
            self.expectations.delete(key)
            return None
        if ds["metadata"].get("deletionTimestamp"):
            return None
        from kctl.machinery.selectors import from_label_selector_object

        try:
            selector = from_label_selector_object((ds.get("spec") or {}).get("selector"))
        except APIError as exc:
            self._event(ds, "Warning", "InvalidSelector", str(exc))
            return None
        pods = self._claim_pods(ds, selector)
        nodes = self.nodes.list()
        hash_ = template_hash(ds)
        now = clock_now(getattr(self.ctx, "clock", None))
        requeue = None
        if self.expectations.satisfied(key):
            creates, deletes = self._manage(ds, nodes, pods)
            if not creates and not deletes:
                deletes = self._rolling_update(ds, nodes, pods, hash_, now)
            self._act(key, ds, creates, deletes, hash_)
            requeue = self._min_ready_requeue(ds, pods, now)
        self._update_status(ds, nodes, self._claimed(ds), hash_, now)
        return requeue

    def _claimed(self, ds: dict) -> list[dict]:
        """The cached pods whose controller reference is this DaemonSet (no adoption or release)."""
        uid = ds["metadata"]["uid"]
        return [p for p in self.pods.by_index("owner", uid)
                if (controller_ref(p) or {}).get("uid") == uid]

    def _claim_pods(self, ds: dict, selector: "LabelSelector") -> list[dict]:
        """Owned pods, after adopting matching orphans and releasing owned pods that stopped matching.

        Raises ClaimIncomplete (the key is retried with back-off) when an adoption or
        release conflicted or the DaemonSet read fresh may not adopt: act on nothing this
        pass rather than on a wrong picture of the nodes.
        """
        manager = ControllerRefManager(self.api, ds, kind="DaemonSet", owner_rt=self._ds_rt, selector=selector)
        # a pod being deleted that stopped matching is left alone (it goes anyway)
        owned = [p for p in self._claimed(ds) if manager.matches(p) or not p["metadata"].get("deletionTimestamp")]
        orphans = [p for p in self.pods.list(ds["metadata"].get("namespace"), selector=selector)
                   if controller_ref(p) is None]
        result = manager.claim([*owned, *orphans])
        if not result.complete:
            raise ClaimIncomplete(f'daemonset "{ds["metadata"]["name"]}": {result.problem}')
        return result.claimed

    def _node_pods(self, pods: list[dict]) -> dict[str, list[dict]]:
        by_node: dict[str, list[dict]] = {}
        for pod in pods:
            by_node.setdefault((pod.get("spec") or {}).get("nodeName") or "", []).append(pod)
        for members in by_node.values():
            members.sort(key=_created)
        return by_node

    def _manage(self, ds: dict, nodes: list[dict], pods: list[dict]) -> tuple[list[str], list[dict]]:
        """Nodes that need a pod, and pods to delete (podsShouldBeOnNode over every node)."""
        by_node = self._node_pods(pods)
        creates: list[str] = []
        deletes: list[dict] = []
        known = set()
        for node in nodes:
            name = node["metadata"]["name"]
            known.add(name)
            should_run, should_continue = node_should_run(ds, node)
            on_node = by_node.get(name, [])
            live = [p for p in on_node if not p["metadata"].get("deletionTimestamp")]
            if should_continue:
                running = []
                for pod in live:
                    if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
                        deletes.append(pod)  # replaced once it is gone
                    else:
                        running.append(pod)
                if len(running) > 1:
                    deletes.extend(running[1:])  # keep the oldest
                if should_run and not on_node:
                    creates.append(name)
            elif live:
                deletes.extend(live)
        for name, on_node in by_node.items():
            if name not in known:  # the node is gone (or the pod was never bound)
                deletes.extend(p for p in on_node if not p["metadata"].get("deletionTimestamp"))
        return creates, deletes

    def _rolling_update(self, ds: dict, nodes: list[dict], pods: list[dict], hash_: str,
                        now: dt.datetime) -> list[dict]:
        """Old pods to delete now without exceeding maxUnavailable (update.go rollingUpdate)."""
        strategy = (ds.get("spec") or {}).get("updateStrategy") or {}
        if (strategy.get("type") or "RollingUpdate") != "RollingUpdate":
            return []
        min_ready = int((ds.get("spec") or {}).get("minReadySeconds") or 0)
        by_node = self._node_pods(pods)
        eligible = [n for n in nodes if node_should_run(ds, n)[0]]
        max_unavailable = scaled_value((strategy.get("rollingUpdate") or {}).get("maxUnavailable"), len(eligible),
                                       round_up=True, default=1)
        unavailable = 0
        replace_now: list[dict] = []
        candidates: list[dict] = []
        for node in eligible:
            on_node = [p for p in by_node.get(node["metadata"]["name"], [])
                       if not p["metadata"].get("deletionTimestamp")]
            new = [p for p in on_node if (p["metadata"].get("labels") or {}).get(HASH_LABEL) == hash_]
            old = [p for p in on_node if (p["metadata"].get("labels") or {}).get(HASH_LABEL) != hash_]
            if len(new) > 1 or len(old) > 1 or (new and old) or not on_node:
                unavailable += 1  # manage handles it; count it as unavailable
            elif new:
                if not pod_available(new[0], min_ready, now):
                    unavailable += 1
            elif not pod_available(old[0], min_ready, now):
                replace_now.append(old[0])  # already unavailable: replacing costs nothing
            elif unavailable < max_unavailable:
                candidates.append(old[0])
        budget = max(0, min(max_unavailable - unavailable, len(candidates)))
        return replace_now + candidates[:budget]

    def _act(self, key: str, ds: dict, creates: list[str], deletes: list[dict], hash_: str) -> None:
        burst = self.settings.burst
        creates, deletes = creates[:burst], deletes[:burst]
        if deletes:
            self.expectations.expect_deletions(key, [p["metadata"]["uid"] for p in deletes])
            for pod in deletes:
                meta = pod["metadata"]
                try:
                    self.api.delete(self._pod_rt, meta["name"], namespace=meta.get("namespace"))
                    self._event(ds, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}")
                except NotFound:
                    self.expectations.deletion_observed(key, meta["uid"])
                except APIError as exc:
                    self.expectations.deletion_observed(key, meta["uid"])
                    self._event(ds, "Warning", "FailedDelete", f"Error deleting: {exc}")
        if creates:
            self.expectations.expect_creations(key, len(creates))
            done, batch = 0, 1
            while done < len(creates):
                chunk = creates[done:done + batch]
                failed = False
                for node_name in chunk:
                    try:
                        pod = self.api.create(new_pod(ds, node_name, hash_))
                        self._event(ds, "Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")
                    except AlreadyExists:
                        self.expectations.creation_observed(key)
                    except APIError as exc:
                        failed = True
                        self.expectations.creation_observed(key)
                        self._event(ds, "Warning", "FailedCreate", f"Error creating: {exc}")
                done += len(chunk)
                if failed:
                    for _ in creates[done:]:  # slow start: stop after a failing batch
                        self.expectations.creation_observed(key)
                    break
                batch *= 2

    def _min_ready_requeue(self, ds: dict, pods: list[dict], now: dt.datetime) -> float | None:
        """With minReadySeconds, look again when a ready pod becomes available."""
        min_ready = int((ds.get("spec") or {}).get("minReadySeconds") or 0)
        if min_ready <= 0:
            return None
        waits = []
        for pod in pods:
            if podutil.pod_ready(pod) and not pod_available(pod, min_ready, now):
                since = podutil.pod_ready_since(pod)
                if since is not None:
                    waits.append(max(0.0, min_ready - (now - since).total_seconds()))
        return min(waits) + 0.01 if waits else None

    def _update_status(self, ds: dict, nodes: list[dict], pods: list[dict], hash_: str,
                       now: dt.datetime) -> None:
        by_node = self._node_pods(pods)
        min_ready = int((ds.get("spec") or {}).get("minReadySeconds") or 0)
        desired = current = ready = available = updated = misscheduled = 0
        generation = str(ds["metadata"].get("generation", 1))
        for node in nodes:
            should_run, _ = node_should_run(ds, node)
            on_node = by_node.get(node["metadata"]["name"], [])
            if should_run:
                desired += 1
                if on_node:
                    current += 1
                    pod = on_node[0]
                    if podutil.pod_ready(pod):
                        ready += 1
                        if pod_available(pod, min_ready, now):
                            available += 1
                    labels = pod["metadata"].get("labels") or {}
                    if labels.get(HASH_LABEL) == hash_ or (
                            HASH_LABEL not in labels and labels.get(GENERATION_LABEL) == generation):
                        updated += 1
            elif on_node:
                misscheduled += 1
        computed = {
            "desiredNumberScheduled": desired, "currentNumberScheduled": current, "numberReady": ready,
            "numberAvailable": available, "numberUnavailable": max(0, desired - available),
            "updatedNumberScheduled": updated, "numberMisscheduled": misscheduled,
            "observedGeneration": ds["metadata"].get("generation", 1),
        }
        # storeDaemonSetStatus: the counts go onto the DaemonSet as read (again, on a Conflict)
        self.status_writer.write(ds, lambda live: {**(live.get("status") or {}), **computed})

    def _event(self, ds: dict, type_: str, reason: str, message: str) -> None:
        recorder = getattr(self.ctx, "recorder", None)
        if recorder is not None:
            recorder.event(ds, type_, reason, message)


__all__ = ["DaemonSetController", "DaemonSetSettings", "node_should_run", "new_pod", "template_hash",
           "daemon_tolerations", "HASH_LABEL", "DEFAULT_TOLERATIONS"]
