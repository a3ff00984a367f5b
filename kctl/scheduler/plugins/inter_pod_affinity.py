"""InterPodAffinity: pod affinity and anti-affinity, required (filter) and preferred (score).

kube-scheduler's interpodaffinity plugin. A term selects pods (labelSelector, in
`namespaces`, or the pod's own namespace, or those a namespaceSelector picks) and names
a topologyKey; "the node's domain" is the set of nodes sharing its value of that key.

- Required affinity: every term must find a matching pod in the node's domain, except
  for the first pod of a group (no pod matches anywhere, and the pod matches its own
  terms). Required anti-affinity: no term may find one there. And the pods already
  placed keep their own required anti-affinity: a node in the domain of an existing pod
  whose anti-affinity term matches the incoming pod is rejected.
- Preferred terms (the pod's own, and existing pods' terms that match it, plus their
  required affinity at `hardPodAffinityWeight`, default 1) add or subtract their weight
  for each domain; the node's score is its domains' sum, scaled to 0..100.

A namespaceSelector other than `{}` (all namespaces) is resolved against the Namespace
objects through the API once per cycle; without an API it matches no namespace.
"""

from __future__ import annotations

from dataclasses import dataclass

from kctl.machinery.errors import Invalid
from kctl.machinery.selectors import LabelSelector, from_label_selector_object
from kctl.scheduler.framework import (MAX_NODE_SCORE, SKIP, ClusterEvent, CycleState, Handle, PreFilterResult,
                                      Status, unschedulable)
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo, Snapshot

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
_AFFINITY = unschedulable(AFFINITY, unresolvable=True)
_ANTI = unschedulable(ANTI_AFFINITY)
_EXISTING = unschedulable(EXISTING_ANTI_AFFINITY)
_FILTER = "InterPodAffinity/filter"
_SCORE = "InterPodAffinity/score"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True)
class Term:
    """A parsed PodAffinityTerm; namespaces None means all namespaces."""

    selector: LabelSelector
    namespaces: frozenset[str] | None
    topology_key: str
    weight: int = 0

    def matches(self, pod: PodInfo) -> bool:
        return (self.namespaces is None or pod.namespace in self.namespaces) and self.selector.matches(pod.labels)


def _parse_term(term: dict, owner: PodInfo, namespace_labels: dict[str, dict] | None, weight: int = 0) -> Term:
    try:
        selector = from_label_selector_object(term.get("labelSelector"))
    except Invalid:
        selector = LabelSelector(match_nothing=True)
    namespaces: set[str] | None = set(term.get("namespaces") or ())
    ns_selector = term.get("namespaceSelector")
    if ns_selector is not None:
        try:
            sel = from_label_selector_object(ns_selector)
        except Invalid:
            sel = LabelSelector(match_nothing=True)
        if sel.is_empty:
            namespaces = None
        else:
            namespaces |= {name for name, labels in (namespace_labels or {}).items() if sel.matches(labels)}
    elif not namespaces:
        namespaces = {owner.namespace}
    return Term(selector, None if namespaces is None else frozenset(namespaces),
                str(term.get("topologyKey") or ""), weight)


class _Terms:
    """One pod's four lists of terms."""

    __slots__ = ("required_affinity", "required_anti", "preferred_affinity", "preferred_anti")

    def __init__(self, pod: PodInfo, namespace_labels: dict[str, dict] | None) -> None:
        affinity = pod.affinity.get("podAffinity") or {}
        anti = pod.affinity.get("podAntiAffinity") or {}
        self.required_affinity = [_parse_term(t, pod, namespace_labels) for t in affinity.get(REQUIRED) or ()]
        self.required_anti = [_parse_term(t, pod, namespace_labels) for t in anti.get(REQUIRED) or ()]
        self.preferred_affinity = [_parse_term(t.get("podAffinityTerm") or {}, pod, namespace_labels,
                                               int(t.get("weight") or 0)) for t in affinity.get(PREFERRED) or ()]
        self.preferred_anti = [_parse_term(t.get("podAffinityTerm") or {}, pod, namespace_labels,
                                           int(t.get("weight") or 0)) for t in anti.get(PREFERRED) or ()]


def _uses_namespace_selector(pod: PodInfo) -> bool:
    for kind in ("podAffinity", "podAntiAffinity"):
        section = pod.affinity.get(kind) or {}
        for t in section.get(REQUIRED) or ():
            if t.get("namespaceSelector"):
                return True
        for t in section.get(PREFERRED) or ():
            if (t.get("podAffinityTerm") or {}).get("namespaceSelector"):
                return True
    return False


class _FilterState:
    __slots__ = ("terms", "existing_anti", "affinity_counts", "anti_counts")

    def __init__(self, terms: _Terms) -> None:
        self.terms = terms
        self.existing_anti: dict[tuple[str, str], int] = {}
        self.affinity_counts: dict[tuple[str, str], int] = {}
        self.anti_counts: dict[tuple[str, str], int] = {}


class InterPodAffinity:
    NAME = "InterPodAffinity"
    EVENTS = frozenset({ClusterEvent.ASSIGNED_POD_ADD, ClusterEvent.ASSIGNED_POD_UPDATE,
                        ClusterEvent.ASSIGNED_POD_DELETE, ClusterEvent.NODE_ADD, ClusterEvent.NODE_LABEL_CHANGE})

    def __init__(self, args: dict | None = None, handle: Handle | None = None) -> None:
        self.hard_weight = int((args or {}).get("hardPodAffinityWeight", 1))
        self.handle = handle

    def _namespace_labels(self, pods: list[PodInfo]) -> dict[str, dict] | None:
        if self.handle is None or self.handle.api is None or not any(_uses_namespace_selector(p) for p in pods):
            return None
        api = self.handle.api
        items, _ = api.list(api.resource("namespaces"))
        return {ns["metadata"]["name"]: ns["metadata"].get("labels") or {} for ns in items}

    def _terms(self, pod: PodInfo, namespace_labels: dict[str, dict] | None) -> _Terms:
        if namespace_labels is not None:
            return _Terms(pod, namespace_labels)
        cached = pod.parsed.get(self.NAME)
        if cached is None:
            cached = pod.parsed[self.NAME] = _Terms(pod, None)
        return cached  # type: ignore[return-value]

    # -- filter -------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        affinity = pod.affinity.get("podAffinity") or {}
        anti = pod.affinity.get("podAntiAffinity") or {}
        has_required = bool(affinity.get(REQUIRED) or anti.get(REQUIRED))
        if not has_required and not snapshot.have_pods_with_required_anti_affinity:
            return None, SKIP
        existing = [p for n in snapshot.have_pods_with_required_anti_affinity
                    for p in n.pods_with_required_anti_affinity.values()]
        ns_labels = self._namespace_labels([pod, *existing])
        s = _FilterState(self._terms(pod, ns_labels))
        for node in snapshot.have_pods_with_required_anti_affinity:
            for other in node.pods_with_required_anti_affinity.values():
                for term in self._terms(other, ns_labels).required_anti:
                    value = node.labels.get(term.topology_key)
                    if value is not None and term.matches(pod):
                        pair = (term.topology_key, value)
                        s.existing_anti[pair] = s.existing_anti.get(pair, 0) + 1
        if s.terms.required_affinity or s.terms.required_anti:
            for node in snapshot.node_info_list:
                for other in node.pods.values():
                    for term in s.terms.required_affinity:
                        value = node.labels.get(term.topology_key)
                        if value is not None and term.matches(other):
                            pair = (term.topology_key, value)
                            s.affinity_counts[pair] = s.affinity_counts.get(pair, 0) + 1
                    for term in s.terms.required_anti:
                        value = node.labels.get(term.topology_key)
                        if value is not None and term.matches(other):
                            pair = (term.topology_key, value)
                            s.anti_counts[pair] = s.anti_counts.get(pair, 0) + 1
        state.write(_FILTER, s)
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s: _FilterState | None = state.read(_FILTER)
        if s is None:
            return None
        labels = node.labels
        for (key, value), n in s.existing_anti.items():
            if n > 0 and labels.get(key) == value:
                return _EXISTING
        if s.terms.required_affinity and not self._satisfies_affinity(s, pod, labels):
            return _AFFINITY
        for term in s.terms.required_anti:
            value = labels.get(term.topology_key)
            if value is not None and s.anti_counts.get((term.topology_key, value), 0) > 0:
                return _ANTI
        return None

    @staticmethod
    def _satisfies_affinity(s: _FilterState, pod: PodInfo, labels: dict[str, str]) -> bool:
        pods_exist = True
        for term in s.terms.required_affinity:
            value = labels.get(term.topology_key)
            if value is None:
                return False  # every topology label must exist on the node
            if s.affinity_counts.get((term.topology_key, value), 0) <= 0:
                pods_exist = False
        if pods_exist:
            return True
        # the first pod of a group that has affinity to itself
        return not s.affinity_counts and all(t.matches(pod) for t in s.terms.required_affinity)

    # -- score --------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        affinity = pod.affinity.get("podAffinity") or {}
        anti = pod.affinity.get("podAntiAffinity") or {}
        has_preferred = bool(affinity.get(PREFERRED) or anti.get(PREFERRED))
        snapshot = self.handle.snapshot if self.handle is not None else None
        with_affinity = snapshot.have_pods_with_affinity if snapshot is not None else \
            [n for n in nodes if n.pods_with_affinity]
        if not has_preferred and not with_affinity:
            return SKIP
        scan = (snapshot.node_info_list if snapshot is not None else nodes) if has_preferred else with_affinity
        ns_labels = self._namespace_labels([pod, *(p for n in with_affinity for p in n.pods_with_affinity.values())])
        mine = self._terms(pod, ns_labels)
        scores: dict[str, dict[str, int]] = {}

        def add(key: str, labels: dict[str, str], weight: int) -> None:
            value = labels.get(key)
            if value is not None and weight:
                domain = scores.setdefault(key, {})
                domain[value] = domain.get(value, 0) + weight

        for node in scan:
            others = node.pods.values() if has_preferred else node.pods_with_affinity.values()
            for other in others:
                for term in mine.preferred_affinity:
                    if term.matches(other):
                        add(term.topology_key, node.labels, term.weight)
                for term in mine.preferred_anti:
                    if term.matches(other):
                        add(term.topology_key, node.labels, -term.weight)
                if not other.has_affinity:
                    continue
                theirs = self._terms(other, ns_labels)
                for term in theirs.preferred_affinity:
                    if term.matches(pod):
                        add(term.topology_key, node.labels, term.weight)
                for term in theirs.preferred_anti:
                    if term.matches(pod):
                        add(term.topology_key, node.labels, -term.weight)
                if self.hard_weight:
                    for term in theirs.required_affinity:
                        if term.matches(pod):
                            add(term.topology_key, node.labels, self.hard_weight)
        if not scores:
            return SKIP
        state.write(_SCORE, scores)
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        scores: dict[str, dict[str, int]] = state.read(_SCORE) or {}
        labels = node.labels
        return sum(domain.get(labels[key], 0) for key, domain in scores.items() if key in labels)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        if not scores:
            return
        low, high = min(scores), max(scores)
        diff = high - low
        scores[:] = [MAX_NODE_SCORE * (s - low) // diff if diff > 0 else 0 for s in scores]


__all__ = ["InterPodAffinity", "Term"]
