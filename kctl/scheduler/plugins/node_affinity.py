"""NodeAffinity: spec.nodeSelector and node affinity (required terms filter, preferred score).

kube-scheduler's nodeaffinity plugin. Required: the node's labels must match every
nodeSelector entry and at least one of the required nodeSelectorTerms (a term matches
when all its matchExpressions and matchFields do; an empty term matches nothing).
Operators: In, NotIn, Exists, DoesNotExist, Gt, Lt; matchFields knows metadata.name.
Preferred: a node scores the sum of the weights of the preferred terms it matches,
scaled to 0..100. The plugin argument `addedAffinity` (a NodeAffinity) applies to
every pod of the profile. When every required term pins metadata.name, PreFilter
narrows the search to those nodes.

`NodeSelector` / `pod_node_selector` are also used by PodTopologySpread
(nodeAffinityPolicy: Honor).
"""

from __future__ import annotations

from dataclasses import dataclass

from kctl.scheduler.framework import (SKIP, ClusterEvent, CycleState, Handle, PreFilterResult, Status,
                                      default_normalize_score, unschedulable)
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo, Snapshot

REASON = "node(s) didn't match Pod's node affinity/selector"
_MISMATCH = unschedulable(REASON, unresolvable=True)
_REQUIRED = "NodeAffinity/required"
_PREFERRED = "NodeAffinity/preferred"


def _int(text: object) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


@dataclass(frozen=True)
class Requirement:
    """One matchExpressions / matchFields entry."""

    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, labels: dict[str, str]) -> bool:
        op, present = self.operator, self.key in labels
        if op == "In":
            return present and labels[self.key] in self.values
        if op == "NotIn":
            return not present or labels[self.key] not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt"):
            if not present or len(self.values) != 1:
                return False
            have, bound = _int(labels[self.key]), _int(self.values[0])
            if have is None or bound is None:
                return False
            return have > bound if op == "Gt" else have < bound
        return False


@dataclass(frozen=True)
class Term:
    """A nodeSelectorTerm: all of its requirements (labels) and field requirements must hold."""

    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]

    @classmethod
    def parse(cls, term: dict | None) -> Term:
        term = term or {}

        def reqs(items) -> tuple[Requirement, ...]:
            return tuple(Requirement(str(r.get("key", "")), str(r.get("operator", "")),
                                     tuple(str(v) for v in r.get("values") or ()))
                         for r in items or () if isinstance(r, dict))

        return cls(reqs(term.get("matchExpressions")), reqs(term.get("matchFields")))

    def matches(self, node: NodeInfo) -> bool:
        if not self.expressions and not self.fields:
            return False
        labels = node.labels
        if not all(r.matches(labels) for r in self.expressions):
            return False
        if self.fields:
            fields = {"metadata.name": node.name}
            if not all(r.key == "metadata.name" and r.matches(fields) for r in self.fields):
                return False
        return True

    def node_names(self) -> frozenset[str] | None:
        """The names this term pins with matchFields metadata.name In (None: not pinned)."""
        names: frozenset[str] | None = None
        for r in self.fields:
            if r.key == "metadata.name" and r.operator == "In":
                names = frozenset(r.values) if names is None else names & frozenset(r.values)
        return names


@dataclass(frozen=True)
class NodeSelector:
    """What a pod requires of a node: nodeSelector labels AND (any of the required terms)."""

    labels: tuple[tuple[str, str], ...] = ()
    terms: tuple[Term, ...] | None = None  # None: no required affinity

    @classmethod
    def of(cls, pod_spec: dict) -> NodeSelector:
        selector = pod_spec.get("nodeSelector") or {}
        required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution"))
        terms = None if required is None else tuple(Term.parse(t) for t in required.get("nodeSelectorTerms") or ())
        return cls(tuple((str(k), str(v)) for k, v in selector.items()), terms)

    @property
    def is_empty(self) -> bool:
        return not self.labels and self.terms is None

    def matches(self, node: NodeInfo) -> bool:
        labels = node.labels
        for key, value in self.labels:
            if labels.get(key) != value:
                return False
        return self.terms is None or any(t.matches(node) for t in self.terms)


def pod_node_selector(pod: PodInfo) -> NodeSelector:
    """The pod's NodeSelector, parsed once per pod."""
    parsed = pod.parsed.get("NodeSelector")
    if parsed is None:
        parsed = pod.parsed["NodeSelector"] = NodeSelector.of(pod.pod.get("spec") or {})
    return parsed  # type: ignore[return-value]


def _preferred(node_affinity: dict) -> tuple[tuple[int, Term], ...]:
    out = []
    for item in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
        weight = int(item.get("weight") or 0)
        if weight:
            out.append((weight, Term.parse(item.get("preference"))))
    return tuple(out)


class NodeAffinity:
    NAME = "NodeAffinity"
    EVENTS = frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_LABEL_CHANGE})

    def __init__(self, args: dict | None = None, handle: Handle | None = None) -> None:
        added = (args or {}).get("addedAffinity") or {}
        required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
        self.added_required: NodeSelector | None = None
        if required is not None:
            terms = tuple(Term.parse(t) for t in required.get("nodeSelectorTerms") or ())
            self.added_required = NodeSelector((), terms)
        self.added_preferred = _preferred(added)

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        selector = pod_node_selector(pod)
        if selector.is_empty and self.added_required is None:
            return None, SKIP
        state.write(_REQUIRED, selector)
        result = None
        if selector.terms:
            pinned = [t.node_names() for t in selector.terms]
            if all(p is not None for p in pinned):
                result = PreFilterResult(frozenset().union(*pinned))  # type: ignore[arg-type]
        return result, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        selector = state.read(_REQUIRED) or pod_node_selector(pod)
        if not selector.matches(node):
            return _MISMATCH
        if self.added_required is not None and not self.added_required.matches(node):
            return _MISMATCH
        return None

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        preferred = _preferred(pod.affinity.get("nodeAffinity") or {}) + self.added_preferred
        if not preferred:
            return SKIP
        state.write(_PREFERRED, preferred)
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        preferred = state.read(_PREFERRED)
        if preferred is None:
            preferred = _preferred(pod.affinity.get("nodeAffinity") or {}) + self.added_preferred
        return sum(weight for weight, term in preferred if term.matches(node))

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        default_normalize_score(scores)


__all__ = ["NodeAffinity", "NodeSelector", "Requirement", "Term", "pod_node_selector"]
