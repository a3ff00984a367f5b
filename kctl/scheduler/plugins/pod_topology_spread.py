"""PodTopologySpread: spread matching pods evenly over topology domains (zones, hosts ...).

kube-scheduler's podtopologyspread plugin, for spec.topologySpreadConstraints:

- `whenUnsatisfiable: DoNotSchedule` constraints filter: placing the pod on a node must
  keep (pods matching labelSelector in the node's domain + 1) - (the least such count
  over all domains) <= maxSkew. A node without the topologyKey label is rejected
  ("missing required label"). minDomains: with fewer domains than that, the least count
  is taken as 0. nodeAffinityPolicy (default Honor) counts only nodes the pod's
  nodeSelector/affinity allows; nodeTaintsPolicy (default Ignore) can skip nodes with
  taints the pod does not tolerate. matchLabelKeys add the pod's own values to the selector.
- `ScheduleAnyway` constraints score: fewer matching pods in the node's domains score
  higher (weighted by log(number of domains + 2), normalized to 0..100).

Only pods in the incoming pod's namespace count, and terminating pods do not.
Deviation: kube-scheduler's system default constraints (for pods of a Service or a
ReplicaSet that set none) are not applied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kctl.machinery.errors import Invalid
from kctl.machinery.selectors import LabelSelector, Operator, Requirement, from_label_selector_object
from kctl.scheduler.framework import (MAX_NODE_SCORE, SKIP, ClusterEvent, CycleState, Handle, PreFilterResult,
                                      Status, unschedulable)
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo, Snapshot
from kctl.scheduler.plugins.node_affinity import pod_node_selector
from kctl.scheduler.plugins.taint_toleration import FILTER_EFFECTS, untolerated

MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
SKEW = "node(s) didn't match pod topology spread constraints"
HOSTNAME = "kubernetes.io/hostname"
_MISSING = unschedulable(MISSING_LABEL, unresolvable=True)
_SKEW = unschedulable(SKEW)
_FILTER = "PodTopologySpread/filter"
_SCORE = "PodTopologySpread/score"


@dataclass(frozen=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int
    honor_affinity: bool
    honor_taints: bool


def constraints(pod: PodInfo, when: str) -> list[Constraint]:
    """The pod's constraints with whenUnsatisfiable `when`, parsed (once per pod)."""
    key = f"PodTopologySpread/{when}"
    cached = pod.parsed.get(key)
    if cached is not None:
        return cached  # type: ignore[return-value]
    out = []
    for c in (pod.pod.get("spec") or {}).get("topologySpreadConstraints") or ():
        if (c.get("whenUnsatisfiable") or "DoNotSchedule") != when:
            continue
        try:
            selector = from_label_selector_object(c.get("labelSelector"))
        except Invalid:
            selector = LabelSelector(match_nothing=True)
        extra = [Requirement(k, Operator.IN, (pod.labels[k],)) for k in c.get("matchLabelKeys") or ()
                 if k in pod.labels]
        if extra and not selector.match_nothing:
            selector = LabelSelector(selector.requirements + tuple(extra))
        out.append(Constraint(max(1, int(c.get("maxSkew") or 1)), str(c.get("topologyKey") or ""), selector,
                              int(c.get("minDomains") or 1),
                              (c.get("nodeAffinityPolicy") or "Honor") == "Honor",
                              (c.get("nodeTaintsPolicy") or "Ignore") == "Honor"))
    pod.parsed[key] = out
    return out


def _count(node: NodeInfo, pod: PodInfo, selector: LabelSelector) -> int:
    ns = pod.namespace
    return sum(1 for p in node.pods.values()
               if p.namespace == ns and not p.terminating and selector.matches(p.labels))


def _eligible(node: NodeInfo, pod: PodInfo, cons: list[Constraint]) -> bool:
    """Whether the node's pods count toward the domains (all keys present, policies met)."""
    if not all(c.topology_key in node.labels for c in cons):
        return False
    if any(c.honor_affinity for c in cons) and not pod_node_selector(pod).matches(node):
        return False
    if any(c.honor_taints for c in cons) and untolerated(pod.tolerations, node.taints, FILTER_EFFECTS) is not None:
        return False
    return True


class _FilterState:
    __slots__ = ("constraints", "counts", "min_counts", "self_match")

    def __init__(self, cons: list[Constraint], counts: list[dict[str, int]], pod: PodInfo) -> None:
        self.constraints = cons
        self.counts = counts
        self.min_counts = [
            (0 if len(c) < con.min_domains else min(c.values())) if c else None
            for con, c in zip(cons, counts)]
        self.self_match = [1 if con.selector.matches(pod.labels) else 0 for con in cons]


class PodTopologySpread:
    NAME = "PodTopologySpread"
    EVENTS = frozenset({ClusterEvent.ASSIGNED_POD_ADD, ClusterEvent.ASSIGNED_POD_UPDATE,
                        ClusterEvent.ASSIGNED_POD_DELETE, ClusterEvent.NODE_ADD, ClusterEvent.NODE_DELETE,
                        ClusterEvent.NODE_LABEL_CHANGE, ClusterEvent.NODE_TAINT_CHANGE})

    def __init__(self, args: dict | None = None, handle: Handle | None = None) -> None:
        self.handle = handle

    # -- filter -------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        cons = constraints(pod, "DoNotSchedule")
        if not cons:
            return None, SKIP
        counts: list[dict[str, int]] = [{} for _ in cons]
        for node in snapshot.node_info_list:
            if not _eligible(node, pod, cons):
                continue
            for con, c in zip(cons, counts):
                value = node.labels[con.topology_key]
                c[value] = c.get(value, 0) + _count(node, pod, con.selector)
        state.write(_FILTER, _FilterState(cons, counts, pod))
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s: _FilterState | None = state.read(_FILTER)
        if s is None:
            return None
        labels = node.labels
        for con, counts, low, own in zip(s.constraints, s.counts, s.min_counts, s.self_match):
            value = labels.get(con.topology_key)
            if value is None:
                return _MISSING
            if low is None:
                continue  # no domain at all yet: anything goes
            if counts.get(value, 0) + own - low > con.max_skew:
                return _SKEW
        return None

    # -- score --------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        cons = constraints(pod, "ScheduleAnyway")
        if not cons:
            return SKIP
        ignored = [i for i, n in enumerate(nodes) if not all(c.topology_key in n.labels for c in cons)]
        skip = set(ignored)
        considered = [n for i, n in enumerate(nodes) if i not in skip]
        counts: list[dict[str, int]] = [{} for _ in cons]
        weights = []
        for con, c in zip(cons, counts):
            values = {n.labels[con.topology_key] for n in considered}
            weights.append(math.log(len(values) + 2))
            if con.topology_key == HOSTNAME:
                continue  # counted per node in score
            for value in values:
                c[value] = 0
        all_nodes = self.handle.snapshot.node_info_list if self.handle is not None else nodes
        for node in all_nodes:
            if not _eligible(node, pod, cons):
                continue
            for con, c in zip(cons, counts):
                if con.topology_key == HOSTNAME:
                    continue
                value = node.labels[con.topology_key]
                if value in c:
                    c[value] += _count(node, pod, con.selector)
        state.write(_SCORE, (cons, counts, weights, ignored))
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        cons, counts, weights, _ = state.read(_SCORE)
        total = 0.0
        for con, c, weight in zip(cons, counts, weights):
            value = node.labels.get(con.topology_key)
            if value is None:
                return 0
            n = _count(node, pod, con.selector) if con.topology_key == HOSTNAME else c.get(value, 0)
            total += n * weight + (con.max_skew - 1)
        return round(total)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        _, _, _, ignored = state.read(_SCORE)
        skip = set(ignored)
        live = [s for i, s in enumerate(scores) if i not in skip]
        if not live:
            return
        low, high = min(live), max(live)
        for i, s in enumerate(scores):
            if i in skip:
                scores[i] = 0
            elif high == 0:
                scores[i] = MAX_NODE_SCORE
            else:
                scores[i] = MAX_NODE_SCORE * (high + low - s) // high


__all__ = ["Constraint", "PodTopologySpread", "constraints"]
