"""The scheduler cache: a NodeInfo per node, the pods placed on it, and assumed pods.

Fed by the scheduler's informer handlers (kctl.scheduler.scheduler) through
`add_node/update_node/remove_node` and `add_pod/update_pod/remove_pod` (assigned pods
only); read by each scheduling cycle through `update_snapshot`. As kube-scheduler's
internal/cache:

- A pod is **assumed** on its chosen node as soon as the cycle picks it, before the
  binding is written, so the next cycle already counts its requests and ports.
- A binding that fails **forgets** the pod; the informer seeing the pod bound
  **confirms** it (moving it if it landed elsewhere); an assumed pod whose binding
  finished but that the informer never confirms **expires** after a TTL.
- Pods that finished (Succeeded/Failed) free their node, as deleted ones do.

`update_snapshot` copies only the NodeInfos that changed since the previous call, so a
cycle costs O(changes), not O(nodes).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from kctl.scheduler.nodeinfo import NodeInfo, PodInfo, PodKey, Snapshot, pod_key

log = logging.getLogger("kctl.scheduler.cache")

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
#: how long an assumed pod whose binding finished may stay unconfirmed (kube's durationToExpireAssumedPod)
DEFAULT_ASSUMED_TTL = 15 * 60.0


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _zone(labels: dict[str, str]) -> str:
    region, zone = labels.get(REGION_LABEL, ""), labels.get(ZONE_LABEL, "")
    return f"{region}:\x00:{zone}" if region or zone else ""


class _PodState:
    __slots__ = ("pod_info", "node_name", "assumed", "deadline")

    def __init__(self, pod_info: PodInfo, node_name: str, *, assumed: bool) -> None:
        self.pod_info = pod_info
        self.node_name = node_name
        self.assumed = assumed
        self.deadline: float | None = None  # set when an assumed pod's binding finished


class SchedulerCache:
    """Nodes and placed pods, thread-safe; see the module docstring for the pod life cycle."""

    def __init__(self, *, assumed_ttl: float = DEFAULT_ASSUMED_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.assumed_ttl = assumed_ttl
        self._clock = clock
        self._lock = threading.RLock()
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[PodKey, _PodState] = {}
        #: assumed pods whose binding finished, in that order (what cleanup_expired looks at)
        self._finished: dict[PodKey, None] = {}
        self._dirty: set[str] = set()
        self._node_set_changed = True
        self._generation = 0
        self._image_nodes: dict[str, int] = {}

    # -- nodes ---------------------------------------------------------------------------

    def _node_info(self, name: str) -> NodeInfo:
        ni = self._nodes.get(name)
        if ni is None:
            ni = self._nodes[name] = NodeInfo(name=name)
        return ni

    def _touch(self, ni: NodeInfo) -> None:
        self._generation += 1
        ni.generation = self._generation
        self._dirty.add(ni.name)

    def _count_images(self, ni: NodeInfo, sign: int) -> None:
        for name in ni.images:
            left = self._image_nodes.get(name, 0) + sign
            if left > 0:
                self._image_nodes[name] = left
            else:
                self._image_nodes.pop(name, None)

    def add_node(self, node: dict) -> None:
        self.update_node(node)

    def update_node(self, node: dict) -> None:
        name = (node.get("metadata") or {}).get("name", "")
        with self._lock:
            ni = self._node_info(name)
            before = None if ni.node is None else _shape(ni)
            if ni.node is not None:
                self._count_images(ni, -1)
            ni.set_node(node)
            self._count_images(ni, +1)
            if before != _shape(ni):
                # order, counters or image spread change: the next snapshot recounts them
                self._node_set_changed = True
            self._touch(ni)

    def remove_node(self, node: dict | str) -> None:
        """The node is gone; its pods stay accounted (as in kube) until they are deleted."""
        name = node if isinstance(node, str) else (node.get("metadata") or {}).get("name", "")
        with self._lock:
            ni = self._nodes.get(name)
            if ni is None or ni.node is None:
                return
            self._count_images(ni, -1)
            if ni.pods:
                ni.node = None
                self._touch(ni)
            else:
                del self._nodes[name]
                self._dirty.add(name)
            self._node_set_changed = True

    # -- pods the informer sees ---------------------------------------------------------

    def add_pod(self, pod: dict) -> None:
        """An assigned pod appeared (or was seen bound): add it, or confirm its assumption."""
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            return
        if is_terminal(pod):
            self.remove_pod(pod)
            return
        pi = PodInfo(pod)
        with self._lock:
            state = self._pods.get(pi.key)
            if state is not None and state.assumed:
                if state.node_name != node_name:
                    log.info("pod %s was assumed on %s but is bound to %s", pi.key, state.node_name, node_name)
                    self._place(pi, node_name, state)
                else:
                    # same node: the requests are already counted; keep the newer object
                    ni = self._nodes[node_name]
                    ni.pods[pi.key] = pi
                    state.pod_info = pi
                state.assumed, state.deadline = False, None
                return
            if state is not None:
                old = state.pod_info
                if state.node_name == node_name and _same_placement(old, pi):
                    # a status update (the node agent's): nothing the plugins count changed
                    self._nodes[node_name].pods[pi.key] = pi
                    state.pod_info = pi
                    return
                self._place(pi, node_name, state)
                return
            state = self._pods[pi.key] = _PodState(pi, node_name, assumed=False)
            self._place(pi, node_name, state, fresh=True)

    def update_pod(self, pod: dict) -> None:
        self.add_pod(pod)

    def remove_pod(self, pod: dict | str) -> None:
        key = PodKey(pod) if isinstance(pod, str) else pod_key(pod)
        with self._lock:
            state = self._pods.pop(key, None)
            if state is not None:
                self._unplace(key, state.node_name)

    def _place(self, pi: PodInfo, node_name: str, state: _PodState, *, fresh: bool = False) -> None:
        if not fresh:
            self._unplace(pi.key, state.node_name)
        ni = self._node_info(node_name)
        ni.add_pod(pi)
        self._touch(ni)
        state.pod_info, state.node_name = pi, node_name

    def _unplace(self, key: PodKey, node_name: str) -> None:
        ni = self._nodes.get(node_name)
        if ni is None:
            return
        ni.remove_pod(key)
        if ni.node is None and not ni.pods:
            del self._nodes[node_name]
            self._dirty.add(node_name)
        else:
            self._touch(ni)

    # -- assumed pods -------------------------------------------------------------------

    def assume_pod(self, pi: PodInfo, node_name: str) -> None:
        """Count the pod on node_name now, before its binding is written."""
        with self._lock:
            if pi.key in self._pods:
                raise ValueError(f"pod {pi.key} is already in the scheduler cache")
            state = self._pods[pi.key] = _PodState(pi, node_name, assumed=True)
            self._place(pi, node_name, state, fresh=True)

    def finish_binding(self, key: str) -> None:
        """The binding was written: the assumption now expires unless confirmed within the TTL."""
        with self._lock:
            state = self._pods.get(PodKey(key))
            if state is not None and state.assumed:
                state.deadline = self._clock() + self.assumed_ttl
                self._finished.pop(PodKey(key), None)
                self._finished[PodKey(key)] = None  # at the end: deadlines stay in order

    def forget_pod(self, key: str) -> None:
        """The binding failed: drop the assumed pod."""
        with self._lock:
            state = self._pods.get(PodKey(key))
            if state is not None and state.assumed:
                del self._pods[PodKey(key)]
                self._unplace(PodKey(key), state.node_name)

    def is_assumed(self, key: str) -> bool:
        with self._lock:
            state = self._pods.get(PodKey(key))
            return state is not None and state.assumed

    def has_pod(self, key: str) -> bool:
        with self._lock:
            return PodKey(key) in self._pods

    def cleanup_expired(self) -> list[str]:
        """Drop assumed pods whose binding finished longer than the TTL ago; their keys.

        Only the pods whose binding finished unconfirmed are looked at (kept in binding
        order, so the look stops at the first one not yet due), not every cached pod.
        """
        now = self._clock()
        expired = []
        with self._lock:
            while self._finished:
                key = next(iter(self._finished))
                state = self._pods.get(key)
                if state is None or not state.assumed or state.deadline is None:
                    del self._finished[key]  # confirmed, forgotten or removed meanwhile
                    continue
                if state.deadline > now:
                    break
                del self._finished[key]
                log.warning("assumed pod %s expired: its binding was never seen", key)
                del self._pods[key]
                self._unplace(key, state.node_name)
                expired.append(key)
        return expired

    # -- reading --------------------------------------------------------------------------

    def node_names(self) -> list[str]:
        with self._lock:
            return [n for n, ni in self._nodes.items() if ni.node is not None]

    def node_info(self, name: str) -> NodeInfo | None:
        """A copy of one node's info (for tests and debugging)."""
        with self._lock:
            ni = self._nodes.get(name)
            return None if ni is None else ni.clone()

    def pod_count(self) -> int:
        with self._lock:
            return len(self._pods)

    def update_snapshot(self, snapshot: Snapshot) -> None:
        """Bring `snapshot` up to date, copying only the NodeInfos changed since its last update."""
        with self._lock:
            if not self._dirty and not self._node_set_changed:
                return
            infos = snapshot.node_infos
            positions = snapshot.positions
            affinity_changed = False
            for name in self._dirty:
                ni = self._nodes.get(name)
                old = infos.get(name)
                if ni is None or ni.node is None:
                    if old is not None:
                        del infos[name]
                        self._node_set_changed = True
                        affinity_changed = True
                    continue
                if old is not None and old.generation == ni.generation:
                    continue
                clone = ni.clone()
                infos[name] = clone
                if old is None:
                    self._node_set_changed = True
                elif not self._node_set_changed:
                    snapshot.node_info_list[positions[name]] = clone
                if (old is None or bool(old.pods_with_affinity) != bool(clone.pods_with_affinity)
                        or bool(old.pods_with_required_anti_affinity) != bool(clone.pods_with_required_anti_affinity)
                        or old.pods_with_affinity or old.pods_with_required_anti_affinity):
                    affinity_changed = True
            if self._node_set_changed:
                # in the order nodes were added (a set of dirty names has none)
                snapshot.node_info_list = _zone_interleaved([infos[n] for n in self._nodes if n in infos])
                positions.clear()
                positions.update((ni.name, i) for i, ni in enumerate(snapshot.node_info_list))
                affinity_changed = True
            if affinity_changed:
                snapshot.have_pods_with_affinity = [ni for ni in snapshot.node_info_list if ni.pods_with_affinity]
                snapshot.have_pods_with_required_anti_affinity = [
                    ni for ni in snapshot.node_info_list if ni.pods_with_required_anti_affinity]
            if self._node_set_changed:
                tainted = prefer = unschedulable = 0
                for ni in snapshot.node_info_list:
                    effects = {t.get("effect") for t in ni.taints}
                    tainted += bool(effects & {"NoSchedule", "NoExecute"})
                    prefer += "PreferNoSchedule" in effects
                    unschedulable += ni.unschedulable
                snapshot.tainted_nodes, snapshot.prefer_no_schedule_nodes = tainted, prefer
                snapshot.unschedulable_nodes = unschedulable
                snapshot.image_nodes = dict(self._image_nodes)
            snapshot.generation = self._generation
            self._dirty.clear()
            self._node_set_changed = False


def _same_placement(old: PodInfo, new: PodInfo) -> bool:
    """Whether a pod's update leaves everything a NodeInfo counts of it as it was."""
    return (old.requests == new.requests and old.non_zero_requests == new.non_zero_requests
            and old.host_ports == new.host_ports and old.labels == new.labels and old.affinity == new.affinity
            and old.terminating == new.terminating and old.namespace == new.namespace)


def _shape(ni: NodeInfo) -> tuple:
    """What of a node the snapshot's order and counters depend on."""
    return (_zone(ni.labels), tuple(sorted(str(t.get("effect")) for t in ni.taints)), ni.unschedulable,
            frozenset(ni.images))


def _zone_interleaved(nodes: list[NodeInfo]) -> list[NodeInfo]:
    """Nodes ordered one zone at a time, round robin (kube's nodeTree), so a partial search spreads."""
    zones: dict[str, list[NodeInfo]] = {}
    for ni in nodes:
        zones.setdefault(_zone(ni.labels), []).append(ni)
    if len(zones) <= 1:
        return nodes
    out: list[NodeInfo] = []
    lists = list(zones.values())
    for i in range(max(len(z) for z in lists)):
        out.extend(z[i] for z in lists if i < len(z))
    return out


__all__ = ["DEFAULT_ASSUMED_TTL", "SchedulerCache", "is_terminal"]
