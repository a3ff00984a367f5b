"""What the scheduler knows about pods and nodes: Resource, PodInfo, NodeInfo, Usage, Snapshot.

kube-scheduler's framework/types.go cut down. The scheduler cache (kctl.scheduler.cache)
builds a NodeInfo per Node from the Node object and the pods placed on it; each
scheduling cycle reads a Snapshot of them (kctl.scheduler.scheduler), which the plugins
(kctl.scheduler.plugins) see through the framework. A PodInfo holds everything the
plugins need from a pod, parsed once: requests, host ports, affinity terms, tolerations.

Quantities are kept as integers, as kube-scheduler keeps them: CPU in millicores,
memory and storage in bytes, other (scalar) resources in their own units.

Not in kube-scheduler: each NodeInfo carries a `Usage`, one shared object per distinct
state of its resources and pod count, so that NodeResourcesFit and BalancedAllocation
answer once per state rather than once per node in a cycle's window (`per_usage`; the
same answers, kube's decisions unchanged).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Callable, NewType, Protocol, TypeVar

from kctl.machinery.quantity import parse_quantity

T = TypeVar("T")
PodKey = NewType("PodKey", str)  # "namespace/name"
NodeName = NewType("NodeName", str)

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
#: requests assumed for scoring when a container sets none (kube's DefaultMilliCPURequest ...)
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
#: the host ports wildcard address
ANY_IP = "0.0.0.0"


def pod_key(pod: dict) -> PodKey:
    meta = pod.get("metadata") or {}
    return PodKey(f'{meta.get("namespace") or "default"}/{meta.get("name", "")}')


#: parsed quantities: the same few strings ("100m", "128Mi") come back on every pod
_PARSED: dict[tuple[object, bool], int] = {}
_PARSED_MAX = 4096


def _to_int(name: str, value: object, *, milli: bool = False) -> int:
    key = (value, milli)
    cacheable = type(value) in (str, int)  # not bool: True == 1 as a dict key
    got = _PARSED.get(key) if cacheable else None
    if got is not None:
        return got
    try:
        q = parse_quantity(value)  # type: ignore[arg-type]
    except ValueError:
        return 0
    result = math.ceil(q * 1000) if milli else math.ceil(q)
    if cacheable and len(_PARSED) < _PARSED_MAX:
        _PARSED[key] = result
    return result


class Resource:
    """Amounts of compute resources (kube's framework.Resource)."""

    __slots__ = ("milli_cpu", "memory", "ephemeral_storage", "allowed_pods", "scalar")

    def __init__(self, milli_cpu: int = 0, memory: int = 0, ephemeral_storage: int = 0, allowed_pods: int = 0,
                 scalar: dict[str, int] | None = None) -> None:
        self.milli_cpu = milli_cpu
        self.memory = memory
        self.ephemeral_storage = ephemeral_storage
        self.allowed_pods = allowed_pods
        self.scalar: dict[str, int] = scalar if scalar is not None else {}

    @classmethod
    def from_list(cls, resources: dict | None) -> Resource:
        """A ResourceList (`{"cpu": "2", "memory": "4Gi", "pods": "110"}`) as integers."""
        r = cls()
        for name, value in (resources or {}).items():
            r.set(name, value)
        return r

    def set(self, name: str, value: object) -> None:
        if name == CPU:
            self.milli_cpu = _to_int(name, value, milli=True)
        elif name == MEMORY:
            self.memory = _to_int(name, value)
        elif name == EPHEMERAL_STORAGE:
            self.ephemeral_storage = _to_int(name, value)
        elif name == PODS:
            self.allowed_pods = _to_int(name, value)
        elif "/" in name or name.startswith("hugepages-"):
            self.scalar[name] = _to_int(name, value)

    def get(self, name: str) -> int:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        if name == PODS:
            return self.allowed_pods
        return self.scalar.get(name, 0)

    def add(self, other: Resource, sign: int = 1) -> None:
        self.milli_cpu += sign * other.milli_cpu
        self.memory += sign * other.memory
        self.ephemeral_storage += sign * other.ephemeral_storage
        for name, value in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + sign * value

    def set_max(self, other: Resource) -> None:
        self.milli_cpu = max(self.milli_cpu, other.milli_cpu)
        self.memory = max(self.memory, other.memory)
        self.ephemeral_storage = max(self.ephemeral_storage, other.ephemeral_storage)
        for name, value in other.scalar.items():
            self.scalar[name] = max(self.scalar.get(name, 0), value)

    def clone(self) -> Resource:
        return Resource(self.milli_cpu, self.memory, self.ephemeral_storage, self.allowed_pods, dict(self.scalar))

    def is_zero(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or any(self.scalar.values()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resource) and (
            (self.milli_cpu, self.memory, self.ephemeral_storage, self.allowed_pods, self.scalar)
            == (other.milli_cpu, other.memory, other.ephemeral_storage, other.allowed_pods, other.scalar))

    def __repr__(self) -> str:
        return (f"Resource(cpu={self.milli_cpu}m, memory={self.memory}, ephemeral={self.ephemeral_storage}, "
                f"pods={self.allowed_pods}, scalar={self.scalar})")


def pod_requests(spec: dict) -> tuple[Resource, Resource]:
    """(requests, non-zero requests) of a pod spec, as kube's resource.PodRequests adds them.

    Containers add up; an init container runs alone, so the pod needs the largest of them
    (restartable "sidecar" init containers keep running and add up too); overhead adds.
    The non-zero form counts 100m CPU and 200Mi memory for a container that requests none
    (scoring uses it, so empty pods still spread).
    """
    total, non_zero = Resource(), Resource()
    for c in spec.get("containers") or ():
        r = Resource.from_list((c.get("resources") or {}).get("requests"))
        total.add(r)
        non_zero.milli_cpu += r.milli_cpu or DEFAULT_MILLI_CPU_REQUEST
        non_zero.memory += r.memory or DEFAULT_MEMORY_REQUEST
    sidecars = Resource()
    for c in spec.get("initContainers") or ():
        r = Resource.from_list((c.get("resources") or {}).get("requests"))
        if c.get("restartPolicy") == "Always":
            sidecars.add(r)
            total.add(r)
            non_zero.add(r)
        else:
            r.add(sidecars)
            total.set_max(r)
            non_zero.set_max(r)
    overhead = spec.get("overhead")
    if overhead:
        o = Resource.from_list(overhead)
        total.add(o)
        non_zero.add(o)
    return total, non_zero


@dataclass(frozen=True, slots=True)
class HostPort:
    """One hostPort a pod takes on its node."""

    ip: str
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        return (self.port == other.port and self.protocol == other.protocol
                and (self.ip == other.ip or self.ip == ANY_IP or other.ip == ANY_IP))


def pod_host_ports(spec: dict) -> tuple[HostPort, ...]:
    ports = []
    for c in list(spec.get("containers") or ()) + list(spec.get("initContainers") or ()):
        for p in c.get("ports") or ():
            if p.get("hostPort"):
                ports.append(HostPort(p.get("hostIP") or ANY_IP, p.get("protocol") or "TCP", int(p["hostPort"])))
    return tuple(ports)


class PodInfo:
    """A pod and what the plugins read from it, parsed once (kube's framework.PodInfo).

    `pod` is the stored object; treat it as read-only (it may be shared with an informer).
    """

    __slots__ = ("pod", "key", "uid", "namespace", "name", "labels", "node_name", "scheduler_name",
                 "priority", "requests", "non_zero_requests", "host_ports", "tolerations", "affinity",
                 "has_affinity", "has_required_anti_affinity", "images", "terminating", "parsed")

    def __init__(self, pod: dict) -> None:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        self.pod = pod
        self.namespace: str = meta.get("namespace") or "default"
        self.name: str = meta.get("name", "")
        self.key = PodKey(f"{self.namespace}/{self.name}")
        self.uid: str = meta.get("uid", "")
        self.labels: dict[str, str] = meta.get("labels") or {}
        self.node_name: str = spec.get("nodeName") or ""
        self.scheduler_name: str = spec.get("schedulerName") or "default-scheduler"
        priority = spec.get("priority")
        self.priority: int = int(priority) if isinstance(priority, (int, float)) else 0
        self.requests, self.non_zero_requests = pod_requests(spec)
        self.host_ports = pod_host_ports(spec)
        self.tolerations: list[dict] = spec.get("tolerations") or []
        self.affinity: dict = spec.get("affinity") or {}
        pod_affinity = self.affinity.get("podAffinity") or {}
        anti = self.affinity.get("podAntiAffinity") or {}
        self.has_affinity = bool(pod_affinity or anti)
        self.has_required_anti_affinity = bool(anti.get("requiredDuringSchedulingIgnoredDuringExecution"))
        self.images: tuple[str, ...] = tuple(
            c["image"] for c in list(spec.get("initContainers") or ()) + list(spec.get("containers") or ())
            if c.get("image"))
        self.terminating = bool(meta.get("deletionTimestamp"))
        #: what plugins parsed from the pod once, by plugin name (affinity terms ...)
        self.parsed: dict[str, object] = {}

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"


class Usage:
    """A token for what a node has and what its pods take: every resource figure, and its pod count.

    Nodes in the same state share one Usage object (interned by `usage_of`), so a plugin
    whose answer depends only on the node's resources (NodeResourcesFit's Filter and
    Score, BalancedAllocation) can work it out once per distinct state over a window of
    nodes (`per_usage`) instead of once per node. `figures` is what it stands for.
    """

    __slots__ = ("figures",)

    def __init__(self, figures: tuple) -> None:
        self.figures = figures

    def __repr__(self) -> str:
        return f"Usage{self.figures}"


#: figures -> their one Usage; cleared when full (later nodes then get new tokens: fewer shared, still right)
_USAGES: dict[tuple, Usage] = {}
_USAGES_MAX = 1 << 16


def _figures(r: Resource) -> tuple:
    return (r.milli_cpu, r.memory, r.ephemeral_storage, r.allowed_pods,
            tuple(sorted(r.scalar.items())) if r.scalar else ())


class CycleStateLike(Protocol):
    """What per_usage needs of kctl.scheduler.framework.CycleState (which imports this module)."""

    def read(self, key: str) -> Any: ...

    def write(self, key: str, value: Any) -> None: ...


def usage_of(figures: tuple) -> Usage:
    """The one Usage of these figures (equal figures, same object)."""
    u = _USAGES.get(figures)
    if u is None:
        if len(_USAGES) >= _USAGES_MAX:
            _USAGES.clear()
        u = _USAGES.setdefault(figures, Usage(figures))
    return u


#: the CycleState key of the last list of nodes per_usage grouped (the Score plugins get the same list)
USAGE_GROUPS = "nodeinfo/usage-groups"


def per_usage(nodes: list[NodeInfo], answer: Callable[[NodeInfo], T], each: Callable[[list[NodeInfo]], list[T]],
              *, state: CycleStateLike | None = None) -> list[T]:
    """answer(node) for each node, asked once per distinct Usage among them (of any one node in it).

    Only for answers that depend on nothing of a node but its Usage. When most nodes
    differ, `each(nodes)` (the same answers, node by node) is cheaper and is used instead.
    With the cycle's `state`, the grouping is kept for the next plugin given the same
    list (same object, same length: the feasible nodes each Score plugin gets).
    """
    groups = state.read(USAGE_GROUPS) if state is not None else None
    if groups is None or groups[0] is not nodes or groups[1] != len(nodes):
        usages = list(map(_USAGE, nodes))
        groups = (nodes, len(nodes), usages, dict(zip(usages, nodes)))
        if state is not None:
            state.write(USAGE_GROUPS, groups)
    _, _, usages, representative = groups
    if 2 * len(representative) > len(usages):
        return each(nodes)
    answers = {u: answer(n) for u, n in representative.items()}
    values = iter(answers.values())
    first = next(values, None)
    if all(v is first for v in values):
        return [first] * len(usages)  # one answer for all (every node fits: None)
    return list(map(answers.__getitem__, usages))


def _taints(node: dict) -> tuple[dict, ...]:
    return tuple(t for t in (node.get("spec") or {}).get("taints") or () if isinstance(t, dict))


class NodeInfo:
    """A node and the pods the scheduler has placed on it (kube's framework.NodeInfo).

    `requested` adds up the pods' requests; `non_zero_requested` their scoring form;
    `used_ports` the host ports taken; `images` maps each image name the node reports
    (node.status.images) to its size. `generation` changes with every change, so a
    snapshot knows which NodeInfos to copy again. `usage` stands for every resource figure
    and the pod count (kept up to date by set_node, add_pod and remove_pod; see Usage).
    """

    __slots__ = ("node", "name", "labels", "taints", "unschedulable", "allocatable", "requested",
                 "non_zero_requested", "pods", "pods_with_affinity", "pods_with_required_anti_affinity",
                 "used_ports", "images", "generation", "usage")

    def __init__(self, node: dict | None = None, *, name: str = "") -> None:
        self.node: dict | None = None
        self.name = NodeName(name)
        self.labels: dict[str, str] = {}
        self.taints: tuple[dict, ...] = ()
        self.unschedulable = False
        self.allocatable = Resource()
        self.requested = Resource()
        self.non_zero_requested = Resource()
        self.pods: dict[PodKey, PodInfo] = {}
        self.pods_with_affinity: dict[PodKey, PodInfo] = {}
        self.pods_with_required_anti_affinity: dict[PodKey, PodInfo] = {}
        self.used_ports: list[HostPort] = []
        self.images: dict[str, int] = {}
        self.generation = 0
        if node is not None:
            self.set_node(node)
        else:
            self._count()

    def _count(self) -> None:
        """Refresh `usage` after a change of allocatable or of the pods."""
        self.usage = usage_of((len(self.pods), _figures(self.allocatable), _figures(self.requested),
                               _figures(self.non_zero_requested)))

    def set_node(self, node: dict) -> None:
        meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
        self.node = node
        self.name = NodeName(meta.get("name", ""))
        self.labels = meta.get("labels") or {}
        self.taints = _taints(node)
        self.unschedulable = bool(spec.get("unschedulable"))
        self.allocatable = Resource.from_list(status.get("allocatable") or status.get("capacity"))
        images: dict[str, int] = {}
        for image in status.get("images") or ():
            for name in image.get("names") or ():
                images[name] = int(image.get("sizeBytes") or 0)
        self.images = images
        self._count()

    def add_pod(self, pi: PodInfo) -> None:
        self.pods[pi.key] = pi
        self.requested.add(pi.requests)
        self.non_zero_requested.add(pi.non_zero_requests)
        if pi.has_affinity:
            self.pods_with_affinity[pi.key] = pi
        if pi.has_required_anti_affinity:
            self.pods_with_required_anti_affinity[pi.key] = pi
        self.used_ports.extend(pi.host_ports)
        self._count()

    def remove_pod(self, key: PodKey) -> PodInfo | None:
        pi = self.pods.pop(key, None)
        if pi is None:
            return None
        self.requested.add(pi.requests, -1)
        self.non_zero_requested.add(pi.non_zero_requests, -1)
        self.pods_with_affinity.pop(key, None)
        self.pods_with_required_anti_affinity.pop(key, None)
        for port in pi.host_ports:
            self.used_ports.remove(port)
        self._count()
        return pi

    def clone(self) -> NodeInfo:
        """A copy a snapshot can keep while the cache goes on changing the original."""
        c = NodeInfo.__new__(NodeInfo)
        c.node, c.name, c.labels, c.taints = self.node, self.name, self.labels, self.taints
        c.unschedulable, c.allocatable, c.images = self.unschedulable, self.allocatable, self.images
        c.requested = self.requested.clone()
        c.non_zero_requested = self.non_zero_requested.clone()
        c.pods = dict(self.pods)
        c.pods_with_affinity = dict(self.pods_with_affinity)
        c.pods_with_required_anti_affinity = dict(self.pods_with_required_anti_affinity)
        c.used_ports = list(self.used_ports)
        c.generation = self.generation
        c.usage = self.usage
        return c

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"


_USAGE = attrgetter("usage")


class Snapshot:
    """The nodes one scheduling cycle sees, unchanged while it runs (kube's cache.Snapshot).

    `node_info_list` is ordered so that consecutive nodes come from different zones
    (kube's node tree); the counters let plugins skip work no node can need (no tainted
    node: no taint to check).
    """

    def __init__(self) -> None:
        self.node_infos: dict[str, NodeInfo] = {}
        self.node_info_list: list[NodeInfo] = []
        #: node name -> its index in node_info_list
        self.positions: dict[str, int] = {}
        self.have_pods_with_affinity: list[NodeInfo] = []
        self.have_pods_with_required_anti_affinity: list[NodeInfo] = []
        #: image name -> how many nodes have it
        self.image_nodes: dict[str, int] = {}
        self.tainted_nodes = 0
        self.prefer_no_schedule_nodes = 0
        self.unschedulable_nodes = 0
        self.generation = 0

    def get(self, name: str) -> NodeInfo | None:
        return self.node_infos.get(name)

    def __len__(self) -> int:
        return len(self.node_info_list)


__all__ = ["CPU", "DEFAULT_MEMORY_REQUEST", "DEFAULT_MILLI_CPU_REQUEST", "EPHEMERAL_STORAGE", "HostPort",
           "MEMORY", "NodeInfo", "NodeName", "PODS", "PodInfo", "PodKey", "Resource", "Snapshot",
           "USAGE_GROUPS", "Usage", "per_usage", "pod_host_ports", "pod_key", "pod_requests", "usage_of"]
