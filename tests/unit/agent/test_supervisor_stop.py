"""Stopping a NodeAgentSupervisor returns at once, not after its retry interval.

`kctl daemon` stops its supervisor on SIGINT/SIGTERM (kctl.daemon.server); the supervisor's
thread sleeps up to `retry` seconds between reconciles, and a stop must wake it: a user's
Ctrl-C (and every test that stops a daemon) would otherwise wait out that sleep.
"""

from __future__ import annotations

import time

import pytest

from kctl.agent.node import ANNOTATION_PODMAN_URL
from kctl.agent.supervisor import NodeAgentSupervisor

#: far longer than a stop may take; a stop that sleeps out the retry interval fails the bound below
RETRY = 40.0
#: a generous bound for a loaded 2-core machine (a stop that works takes a few milliseconds)
STOP_BOUND = 20.0


class RecordingAgent:
    """Stands in for NodeAgent: records start/stop."""

    def __init__(self, api, name, runtime, **options) -> None:
        self.node_name, self.runtime = name, runtime
        self.started = self.stopped = False

    def start(self) -> None:
        self.started = True

    def stop(self, timeout: float = 10.0) -> None:
        self.stopped = True


def _wait_for(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


@pytest.mark.parametrize("nodes", [[], ["h1"], ["h1", "h2"]], ids=["no-node", "one-node", "two-nodes"])
def test_stop_wakes_the_reconcile_loop_and_stops_every_agent(api, nodes):
    """stop() returns well before the retry interval, ends the supervisor's threads and stops each agent."""
    for name in nodes:
        api.create({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "annotations": {ANNOTATION_PODMAN_URL: f"unix:///{name}.sock"}}})
    supervisor = NodeAgentSupervisor(api, runtime_for_node=lambda n: n, agent_factory=RecordingAgent, retry=RETRY)
    supervisor.start()
    thread = supervisor._thread
    try:
        assert _wait_for(lambda: set(supervisor.agents) == set(nodes) and supervisor.nodes.has_synced())
        agents = list(supervisor.agents.values())
        time.sleep(0.2)  # the loop is asleep in its retry wait now
    finally:
        started = time.monotonic()
        supervisor.stop(timeout=2 * RETRY)
        took = time.monotonic() - started
    assert took < STOP_BOUND, f"stop took {took:.1f} s (retry interval {RETRY:g} s)"
    assert thread is not None and not thread.is_alive()
    assert all(agent.started and agent.stopped for agent in agents)
    assert supervisor.agents == {}
