"""NodeResourcesFit: a pod's requests must fit in what the node has left; scoring by strategy.

kube-scheduler's noderesources/fit.go. Filter: the pods count, CPU, memory,
ephemeral-storage and extended resources the pod requests (containers added up, the
largest init container, overhead) against the node's allocatable minus what the pods
already placed there request; each shortfall is a reason ("Insufficient cpu", "Too many
pods"), so a node short of two things counts in both. Score: the `scoringStrategy`
argument picks LeastAllocated (default; least_allocated.py), MostAllocated
(most_allocated.py) or RequestedToCapacityRatio (requested_to_capacity_ratio.py),
over `resources` (default cpu and memory, weight 1 each), counting 100m CPU / 200Mi
memory for containers that request none, as kube-scheduler does.
Arguments `ignoredResources` and `ignoredResourceGroups` leave extended resources out.
"""

from __future__ import annotations

from kctl.scheduler.framework import ClusterEvent, Code, CycleState, Handle, Status
from kctl.scheduler.nodeinfo import CPU, MEMORY, NodeInfo, PodInfo, Resource, per_usage
from kctl.scheduler.plugins.least_allocated import least_allocated_scores
from kctl.scheduler.plugins.most_allocated import most_allocated_scores
from kctl.scheduler.plugins.requested_to_capacity_ratio import requested_to_capacity_ratio

DEFAULT_RESOURCES = ((CPU, 1), (MEMORY, 1))
TOO_MANY_PODS = "Too many pods"


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


def fit_reasons(pod: Resource, node: NodeInfo, *, ignored: frozenset[str] = frozenset(),
                ignored_groups: frozenset[str] = frozenset()) -> list[str]:
    """Every resource the node cannot give the pod (kube's fitsRequest)."""
    alloc, used = node.allocatable, node.requested
    reasons = []
    if len(node.pods) + 1 > alloc.allowed_pods:
        reasons.append(TOO_MANY_PODS)
    if pod.milli_cpu and pod.milli_cpu > alloc.milli_cpu - used.milli_cpu:
        reasons.append("Insufficient cpu")
    if pod.memory and pod.memory > alloc.memory - used.memory:
        reasons.append("Insufficient memory")
    if pod.ephemeral_storage and pod.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage:
        reasons.append("Insufficient ephemeral-storage")
    for name, amount in pod.scalar.items():
        if not amount or name in ignored or name.split("/", 1)[0] in ignored_groups:
            continue
        if amount > alloc.scalar.get(name, 0) - used.scalar.get(name, 0):
            reasons.append(insufficient(name))
    return reasons


def requested_and_allocatable(pod: PodInfo, node: NodeInfo, resources: tuple[tuple[str, int], ...], *,
                              non_zero: bool) -> tuple[list[int], list[int]]:
    """Per scored resource: (what the node would have requested with the pod, allocatable)."""
    requested, allocatable = [], []
    for name, _ in resources:
        if non_zero and name in (CPU, MEMORY):
            req = node.non_zero_requested.get(name) + pod.non_zero_requests.get(name)
            cap = node.allocatable.get(name)
        else:
            want = pod.requests.get(name)
            if not want and name not in (CPU, MEMORY):
                req = cap = 0  # an extended resource the pod does not ask for is not scored
            else:
                req = node.requested.get(name) + want
                cap = node.allocatable.get(name)
        requested.append(req)
        allocatable.append(cap)
    return requested, allocatable


class NodeResourcesFit:
    NAME = "NodeResourcesFit"
    EVENTS = frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_ALLOCATABLE_CHANGE,
                        ClusterEvent.ASSIGNED_POD_DELETE, ClusterEvent.ASSIGNED_POD_UPDATE})

    def __init__(self, args: dict | None = None, handle: Handle | None = None) -> None:
        args = args or {}
        strategy = args.get("scoringStrategy") or {}
        self.strategy = strategy.get("type") or "LeastAllocated"
        resources = strategy.get("resources")
        self.resources = (tuple((str(r["name"]), int(r.get("weight", 1))) for r in resources)
                          if resources else DEFAULT_RESOURCES)
        self.weights = [w for _, w in self.resources]
        if self.strategy == "LeastAllocated":
            self._scorer = None
        elif self.strategy == "MostAllocated":
            self._scorer = lambda requested, allocatable, weights: -1  # per-node path below
        elif self.strategy == "RequestedToCapacityRatio":
            shape = (strategy.get("requestedToCapacityRatio") or {}).get("shape") or []
            self._scorer = requested_to_capacity_ratio(shape)
        else:
            raise ValueError(f'NodeResourcesFit: unknown scoringStrategy type "{self.strategy}": use '
                             "LeastAllocated, MostAllocated or RequestedToCapacityRatio")
        self.ignored = frozenset(args.get("ignoredResources") or ())
        self.ignored_groups = frozenset(args.get("ignoredResourceGroups") or ())
        self._fast = self.strategy == "LeastAllocated" and self.resources == DEFAULT_RESOURCES

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        r, alloc, used = pod.requests, node.allocatable, node.requested
        # the common case first, without building a list: everything fits
        if (len(node.pods) < alloc.allowed_pods and r.milli_cpu <= alloc.milli_cpu - used.milli_cpu
                and r.memory <= alloc.memory - used.memory
                and r.ephemeral_storage <= alloc.ephemeral_storage - used.ephemeral_storage and not r.scalar):
            return None
        reasons = fit_reasons(r, node, ignored=self.ignored, ignored_groups=self.ignored_groups)
        return Status(Code.UNSCHEDULABLE, tuple(reasons)) if reasons else None

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[Status | None]:
        """filter() for many nodes at once (the scheduler prefers it): the hot path of a cycle.

        The answer depends on nothing but the node's resources and pod count, so nodes in
        the same state (NodeInfo.usage) share it.
        """
        return per_usage(nodes, lambda n: self.filter(state, pod, n), lambda ns: self._filter_each(state, pod, ns),
                         state=state)

    def _filter_each(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[Status | None]:
        r = pod.requests
        f = self.filter
        if r.scalar or r.ephemeral_storage:
            return [f(state, pod, n) for n in nodes]
        c, m = r.milli_cpu, r.memory
        return [None if (len(n.pods) < n.allocatable.allowed_pods
                         and c <= n.allocatable.milli_cpu - n.requested.milli_cpu
                         and m <= n.allocatable.memory - n.requested.memory) else f(state, pod, n)
                for n in nodes]

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        """score() for many nodes at once (the framework prefers it), once per distinct NodeInfo.usage."""
        return per_usage(nodes, lambda n: self.score(state, pod, n), lambda ns: self._score_each(state, pod, ns),
                         state=state)

    def _score_each(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        if not self._fast:
            return [self.score(state, pod, n) for n in nodes]
        pc, pm = pod.non_zero_requests.milli_cpu, pod.non_zero_requests.memory
        out = []
        append = out.append
        for n in nodes:
            a, nz = n.allocatable, n.non_zero_requested
            cap_c, cap_m = a.milli_cpu, a.memory
            req_c, req_m = nz.milli_cpu + pc, nz.memory + pm
            if cap_c and cap_m:
                append(((0 if req_c > cap_c else (cap_c - req_c) * 100 // cap_c)
                        + (0 if req_m > cap_m else (cap_m - req_m) * 100 // cap_m)) // 2)
            else:
                append(self.score(state, pod, n))
        return out

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        if self._fast:
            # LeastAllocated over cpu and memory, weight 1 each, inlined (the hot path)
            a, nz, p = node.allocatable, node.non_zero_requested, pod.non_zero_requests
            score = n = 0
            cap = a.milli_cpu
            if cap:
                req = nz.milli_cpu + p.milli_cpu
                score += 0 if req > cap else (cap - req) * 100 // cap
                n += 1
            cap = a.memory
            if cap:
                req = nz.memory + p.memory
                score += 0 if req > cap else (cap - req) * 100 // cap
                n += 1
            return score // n if n else 0
        if self.strategy == "LeastAllocated":
            return least_allocated_scores(pod, [node], self.resources)[0]
        if self.strategy == "MostAllocated":
            return most_allocated_scores(pod, [node], self.resources)[0]
        requested, allocatable = requested_and_allocatable(pod, node, self.resources, non_zero=True)
        return self._scorer(requested, allocatable, self.weights)


__all__ = ["NodeResourcesFit", "fit_reasons", "insufficient", "requested_and_allocatable"]
