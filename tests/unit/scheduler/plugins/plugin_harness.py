"""Builders for the scheduler plugin tests: Node and Pod objects, a Snapshot, and runners
that drive one plugin through its extension points as the framework would."""

from __future__ import annotations

from kctl.scheduler.cache import SchedulerCache
from kctl.scheduler.framework import Code, CycleState, Handle, Status
from kctl.scheduler.nodeinfo import PodInfo, Snapshot

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def make_node(name: str, *, cpu: str = "4", memory: str = "8Gi", pods: int = 110, labels: dict | None = None,
              taints: list[dict] | None = None, unschedulable: bool = False,
              images: list[tuple[str, int]] | None = None, extra: dict | None = None) -> dict:
    """A Node object with allocatable resources, labels (hostname added), taints and images."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods), **(extra or {})}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {HOSTNAME: name, **(labels or {})}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable,
                   "images": [{"names": [n], "sizeBytes": size} for n, size in images or ()]},
    }


def make_pod(name: str, *, namespace: str = "default", cpu: str | None = None, memory: str | None = None,
             labels: dict | None = None, node_name: str | None = None, host_ports: list[int] | None = None,
             tolerations: list[dict] | None = None, affinity: dict | None = None,
             node_selector: dict | None = None, spread: list[dict] | None = None, priority: int | None = None,
             image: str = "nginx", extra: dict | None = None) -> dict:
    """A Pod object with one container and whatever scheduling fields are given."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra or {})
    container: dict = {"name": "c", "image": image, "resources": {"requests": requests} if requests else {}}
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in host_ports]
    spec: dict = {"containers": [container]}
    for key, value in (("nodeName", node_name), ("tolerations", tolerations), ("affinity", affinity),
                       ("nodeSelector", node_selector), ("topologySpreadConstraints", spread),
                       ("priority", priority)):
        if value is not None:
            spec[key] = value
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                         "labels": labels or {}},
            "spec": spec, "status": {"phase": "Pending"}}


def snapshot_of(nodes: list[dict], pods: list[dict] | None = None) -> Snapshot:
    """A Snapshot through the real scheduler cache (pods must carry spec.nodeName)."""
    cache = SchedulerCache()
    for n in nodes:
        cache.add_node(n)
    for p in pods or ():
        cache.add_pod(p)
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    return snapshot


def handle_for(snapshot: Snapshot) -> Handle:
    return Handle(snapshot=snapshot)


def run_filter(plugin, pod: dict, snapshot: Snapshot, node: str) -> Status | None:
    """PreFilter (if any) then Filter on one node; Skip at PreFilter means the node passes.

    A PreFilterResult that leaves the node out counts as UnschedulableAndUnresolvable.
    """
    pi = PodInfo(pod)
    state = CycleState()
    pre = getattr(plugin, "pre_filter", None)
    if pre is not None:
        result, status = pre(state, pi, snapshot)
        if status is not None and status.code is Code.SKIP:
            return None
        if status is not None and status.code is not Code.SUCCESS:
            return status
        if result is not None and result.node_names is not None and node not in result.node_names:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("left out by PreFilter",))
    status = plugin.filter(state, pi, snapshot.get(node))
    return None if status is None or status.code is Code.SUCCESS else status


def reasons(status: Status | None) -> tuple[str, ...]:
    return () if status is None else status.reasons


def run_score(plugin, pod: dict, snapshot: Snapshot, nodes: list[str] | None = None) -> dict[str, int]:
    """PreFilter, PreScore, Score (per node) and NormalizeScore as the framework runs them.

    Skip at PreScore gives every node 0, as the framework leaves that plugin out.
    """
    pi = PodInfo(pod)
    state = CycleState()
    infos = [snapshot.get(n) for n in nodes] if nodes else list(snapshot.node_info_list)
    pre = getattr(plugin, "pre_score", None)
    if pre is not None:
        status = pre(state, pi, infos)
        if status is not None and status.code is Code.SKIP:
            return {ni.name: 0 for ni in infos}
        assert status is None or status.code is Code.SUCCESS, status
    scores = [plugin.score(state, pi, ni) for ni in infos]
    normalize = getattr(plugin, "normalize_score", None)
    if normalize is not None:
        normalize(state, pi, scores)
    return {ni.name: s for ni, s in zip(infos, scores)}
