"""DefaultPreemption: when a pod fits nowhere, evict lower-priority pods to make room.

The PostFilter of kube's defaultpreemption, cut down. For each node the Filter phase
rejected as Unschedulable (not UnschedulableAndUnresolvable: evicting cannot help
there), it removes every pod of lower priority than the preemptor from a copy of the
node, checks with the profile's own Filter plugins that the pod would fit, then puts
victims back from the highest priority down while the pod still fits (the "reprieve").
PodDisruptionBudgets count as in kube: victims whose eviction would take a budget below
zero (status.disruptionsAllowed, pods already in its disruptedPods aside) are reprieved
first, and among the nodes that work it picks, as kube does, the one with the fewest such
budget-violating victims, then whose most important victim has the lowest priority, then
the lowest sum of victim priorities, then the fewest victims (victims are still deleted
when every choice violates a budget: preemption is best effort, as kube's). The budgets come
from the scheduler's shared informer (handle.informers), else an API list. It deletes
the victims through the API (a Warning "Preempted" event on each), writes
status.nominatedNodeName on the preemptor, and returns that node: the pod stays in the
queue and is tried again when the victims' deletion frees the node.

Not done: the PreFilter AddPod/RemovePod extensions (inter-pod affinity and topology
spread judge the what-if node with the counts of the real one), and lowering other pods'
nominations.
Args: minCandidateNodesPercentage (default 10), minCandidateNodesAbsolute (default 100)
bound how many nodes are tried. Built by plugins.registry; needs handle.framework,
handle.snapshot and (to evict) handle.api.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kctl.scheduler.framework import Code, CycleState, Handle, Status, is_ok, unschedulable
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo

log = logging.getLogger("kctl.scheduler.preemption")

COMPONENT = "default-scheduler"


@dataclass(frozen=True)
class Candidate:
    """A node where evicting `victims` lets the pod fit."""

    node_name: str
    victims: tuple[PodInfo, ...]
    pdb_violations: int = 0

    def rank(self) -> tuple[int, int, int, int]:
        """Lower is better: budget-violating victims, highest victim priority, sum of priorities, number of victims."""
        priorities = [v.priority for v in self.victims]
        return (self.pdb_violations, max(priorities, default=-(2 ** 31)), sum(priorities), len(priorities))


def preemption_policy(pod: PodInfo) -> str:
    return (pod.pod.get("spec") or {}).get("preemptionPolicy") or "PreemptLowerPriority"


def split_by_pdb_violation(pods: list[PodInfo], budgets: list[dict]) -> tuple[list[PodInfo], list[PodInfo]]:
    """kube's filterPodsWithPDBViolation: (victims whose eviction takes a budget below zero, the others), in order.

    Each budget's disruptionsAllowed is spent by the pods it selects, in the order given; a pod
    already in a budget's status.disruptedPods spends nothing (the API server counted it). A nil
    or empty selector selects nothing here, as in kube's scheduler.
    """
    from kctl.machinery.disruption import selects

    allowed = [int((b.get("status") or {}).get("disruptionsAllowed") or 0) for b in budgets]
    violating: list[PodInfo] = []
    others: list[PodInfo] = []
    for info in pods:
        violated = False
        if (info.pod.get("metadata") or {}).get("labels"):
            for i, budget in enumerate(budgets):
                if not ((budget.get("spec") or {}).get("selector") or {}) or not selects(budget, info.pod):
                    continue
                if info.name in ((budget.get("status") or {}).get("disruptedPods") or {}):
                    continue
                allowed[i] -= 1
                violated = violated or allowed[i] < 0
        (violating if violated else others).append(info)
    return violating, others


class DefaultPreemption:
    """PostFilter: pick victims of lower priority and evict them."""

    NAME = "DefaultPreemption"

    def __init__(self, args: dict | None = None, handle: Handle | None = None) -> None:
        args = args or {}
        self.handle = handle if handle is not None else Handle()
        self.min_percentage = int(args.get("minCandidateNodesPercentage", 10))
        self.min_absolute = int(args.get("minCandidateNodesAbsolute", 100))

    # -- the extension point ---------------------------------------------------------------

    def post_filter(self, state: CycleState, pod: PodInfo,
                    node_to_status: dict[str, Status]) -> tuple[str | None, Status | None]:
        if preemption_policy(pod) == "Never":
            return None, unschedulable("not eligible due to preemptionPolicy=Never.")
        candidate = self.find_candidate(state, pod, node_to_status)
        if candidate is None:
            return None, unschedulable("No preemption victims found for incoming pod.")
        self.evict(pod, candidate)
        return candidate.node_name, None

    # -- the parts, for tests and for reading --------------------------------------------

    def candidate_limit(self, num_nodes: int) -> int:
        """How many candidate nodes to look for (kube's calculateNumCandidates)."""
        n = num_nodes * self.min_percentage // 100
        return min(max(n, self.min_absolute), num_nodes)

    def find_candidate(self, state: CycleState, pod: PodInfo,
                       node_to_status: dict[str, Status]) -> Candidate | None:
        """The best node to preempt on, or None when evicting lower-priority pods helps nowhere."""
        snapshot = self.handle.snapshot
        potential = [name for name, status in node_to_status.items() if status.code is Code.UNSCHEDULABLE]
        limit = self.candidate_limit(len(snapshot) or len(potential))
        budgets = self.budgets() if potential else []
        candidates: list[Candidate] = []
        for name in potential:
            node = snapshot.get(name)
            if node is None:
                continue
            chosen = self._victims(state, pod, node, budgets)
            if chosen is not None:
                candidates.append(Candidate(name, tuple(chosen[0]), chosen[1]))
                if len(candidates) >= limit:
                    break
        if not candidates:
            return None
        return min(candidates, key=Candidate.rank)

    def _fits(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> bool:
        framework = self.handle.framework
        if framework is None:
            return False
        return is_ok(framework.run_filter(state, pod, node))

    def budgets(self) -> list[dict]:
        """The PodDisruptionBudgets (kube's pdbLister): the shared informer's cache once it has listed, else an
        API list, else none (no API: plugin unit tests)."""
        from kctl.machinery.errors import APIError

        informers = getattr(self.handle, "informers", None)
        if informers is not None:
            informer = informers.informer("poddisruptionbudgets")
            if informer.has_synced():
                return informer.list()
        api = self.handle.api
        if api is None:
            return []
        try:
            return api.list(api.resource("poddisruptionbudgets"))[0]
        except APIError as exc:
            log.warning("preemption: cannot list PodDisruptionBudgets: %s", exc)
            return []

    def select_victims(self, state: CycleState, pod: PodInfo, node: NodeInfo,
                       budgets: list[dict] | None = None) -> list[PodInfo] | None:
        """The fewest lower-priority pods to evict from `node` so the pod fits (None: not enough)."""
        chosen = self._victims(state, pod, node, budgets or [])
        return None if chosen is None else chosen[0]

    def _victims(self, state: CycleState, pod: PodInfo, node: NodeInfo,
                 budgets: list[dict]) -> tuple[list[PodInfo], int] | None:
        """kube's selectVictimsOnNode: the victims and how many of them violate a budget (None: not enough)."""
        lower = [p for p in node.pods.values() if p.priority < pod.priority and not p.terminating]
        if not lower:
            return None
        what_if = node.clone()
        for p in lower:
            what_if.remove_pod(p.key)
        if not self._fits(state, pod, what_if):
            return None
        victims: list[PodInfo] = []
        violations = 0
        # reprieve the most important pods first (kube: by priority, then the longest running), those whose
        # eviction would violate a budget before the others
        violating, others = split_by_pdb_violation(sorted(lower, key=lambda p: -p.priority), budgets)
        for group, counts in ((violating, True), (others, False)):
            for p in group:
                what_if.add_pod(p)
                if not self._fits(state, pod, what_if):
                    what_if.remove_pod(p.key)
                    victims.append(p)
                    violations += counts
        return victims, violations

    def evict(self, pod: PodInfo, candidate: Candidate) -> None:
        """Delete the victims and nominate the node on the preemptor (best effort, logged)."""
        api = self.handle.api
        if api is None:
            return
        from kctl.client import events
        from kctl.machinery.errors import APIError, NotFound

        pods = api.resource("pods")
        for victim in candidate.victims:
            events.record(api, victim.pod, type="Normal", reason="Preempted",
                          message=f"Preempted by pod {pod.uid} on node {candidate.node_name}", component=COMPONENT)
            try:
                api.delete(pods, victim.name, namespace=victim.namespace)
            except NotFound:
                pass
            except APIError as exc:
                log.warning("preempting %s for %s: %s", victim.key, pod.key, exc)
        try:
            api.patch(pods, pod.name, {"status": {"nominatedNodeName": candidate.node_name}},
                      patch_type="merge", namespace=pod.namespace, subresource="status")
        except APIError as exc:
            log.warning("nominating %s for %s: %s", candidate.node_name, pod.key, exc)


__all__ = ["Candidate", "DefaultPreemption", "preemption_policy", "split_by_pdb_violation"]
