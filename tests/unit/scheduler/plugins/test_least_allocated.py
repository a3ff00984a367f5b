"""LeastAllocated and MostAllocated: the per-node arithmetic of NodeResourcesFit's strategies."""

from __future__ import annotations

import pytest
from plugin_harness import make_node, make_pod, snapshot_of

from kctl.scheduler.nodeinfo import PodInfo
from kctl.scheduler.plugins.least_allocated import least_allocated_scores
from kctl.scheduler.plugins.most_allocated import most_allocated_scores

CASES = [
    # (node cpu, node memory, pod cpu, pod memory, least, most)
    ("empty-pod-counts-defaults", "1", "1Gi", None, None, (90 + 80) // 2, (10 + 19) // 2),
    ("half-and-quarter", "4", "8Gi", "2", "2Gi", (50 + 75) // 2, (50 + 25) // 2),
    ("over-capacity-scores-zero", "1", "1Gi", "2", "2Gi", 0, 100),
]


@pytest.mark.parametrize("ncpu,nmem,pcpu,pmem,least,most", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_scores(ncpu, nmem, pcpu, pmem, least, most):
    """(free or used share x 100) per resource, averaged with weight 1 each."""
    snapshot = snapshot_of([make_node("n", cpu=ncpu, memory=nmem)])
    pod = PodInfo(make_pod("p", cpu=pcpu, memory=pmem))
    nodes = [snapshot.get("n")]
    assert least_allocated_scores(pod, nodes) == [least]
    assert most_allocated_scores(pod, nodes) == [most]


def test_weights():
    """A resource weighted 3 counts three times as much as one weighted 1."""
    snapshot = snapshot_of([make_node("n", cpu="4", memory="4Gi")])
    pod = PodInfo(make_pod("p", cpu="3", memory="1Gi"))  # cpu 25 free, memory 75 free
    assert least_allocated_scores(pod, [snapshot.get("n")], (("cpu", 3), ("memory", 1))) == [(25 * 3 + 75) // 4]
