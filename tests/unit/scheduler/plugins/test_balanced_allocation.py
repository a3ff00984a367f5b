"""NodeResourcesBalancedAllocation: favour nodes whose cpu and memory use stay even."""

from __future__ import annotations

from plugin_harness import make_node, make_pod, run_score, snapshot_of

from kctl.scheduler.plugins.balanced_allocation import NodeResourcesBalancedAllocation


def test_balanced_node_wins():
    """A node left at 50%/50% beats one left at 75% cpu / 25% memory."""
    nodes = [make_node("even", cpu="4", memory="4Gi"), make_node("skewed", cpu="4", memory="4Gi")]
    placed = [make_pod("q", cpu="2", memory="0", node_name="skewed")]
    pod = make_pod("p", cpu="1", memory="1Gi")
    scores = run_score(NodeResourcesBalancedAllocation(), pod, snapshot_of(nodes, placed))
    # even: 25% cpu, 25% memory -> 100; skewed: 75% cpu, 25% memory -> (1 - 0.25) x 100
    assert scores == {"even": 100, "skewed": 75}


def test_fractions_are_capped_at_one():
    """A resource over capacity counts as 100% used, not more."""
    nodes = [make_node("n", cpu="1", memory="4Gi")]
    pod = make_pod("p", cpu="3", memory="2Gi")  # cpu 300% -> 1.0, memory 50%
    assert run_score(NodeResourcesBalancedAllocation(), pod, snapshot_of(nodes)) == {"n": 75}
