"""DefaultPreemption: when a pod fits nowhere, evict lower-priority pods to make room.

The PostFilter of kube's defaultpreemption, cut down. For each node the Filter phase
rejected as Unschedulable (not UnschedulableAndUnresolvable: evicting cannot help
there), it removes every pod of lower priority than the preemptor from a copy of the
node, checks with the profile's own Filter plugins that the pod would fit, then puts
victims back from the highest priority down while the pod still fits (the "reprieve").
Among the nodes that work it picks, as kube does, the one whose most important victim
has the lowest priority, then the lowest sum of victim priorities, then the fewest
victims. It deletes the victims through the API (a Warning "Preempted" event on each),
writes status.nominatedNodeName on the preemptor, and returns that node: the pod
stays in the queue and is tried again when the victims' deletion frees the node.

Not done: PodDisruptionBudgets (kctl has none), the PreFilter AddPod/RemovePod
extensions (inter-pod affinity and topology spread judge the what-if node with the
counts of the real one), and lowering other pods' nominations.
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

    def rank(self) -> tuple[int, int, int]:
        """Lower is better: highest victim priority, sum of priorities, number of victims."""
        priorities = [v.priority for v in self.victims]
        return (max(priorities, default=-(2 ** 31)), sum(priorities), len(priorities))


def preemption_policy(pod: PodInfo) -> str:
    return (pod.pod.get("spec") or {}).get("preemptionPolicy") or "PreemptLowerPriority"


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
        candidates: list[Candidate] = []
        for name in potential:
            node = snapshot.get(name)
            if node is None:
                continue
            victims = self.select_victims(state, pod, node)
            if victims is not None:
                candidates.append(Candidate(name, tuple(victims)))
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

    def select_victims(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> list[PodInfo] | None:
        """The fewest lower-priority pods to evict from `node` so the pod fits (None: not enough)."""
        lower = [p for p in node.pods.values() if p.priority < pod.priority and not p.terminating]
        if not lower:
            return None
        what_if = node.clone()
        for p in lower:
            what_if.remove_pod(p.key)
        if not self._fits(state, pod, what_if):
            return None
        victims = []
        # reprieve the most important pods first (kube: by priority, then the longest running)
        for p in sorted(lower, key=lambda p: -p.priority):
            what_if.add_pod(p)
            if not self._fits(state, pod, what_if):
                what_if.remove_pod(p.key)
                victims.append(p)
        return victims

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


__all__ = ["Candidate", "DefaultPreemption", "preemption_policy"]
