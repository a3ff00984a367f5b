"""Which agents a daemon with leader election runs (kctl.agent.supervisor, "Ownership"): ssh:// Nodes only while
it leads, their runtimes made for the term (fenced) and revoked the moment leadership ends or moves; a unix://
Node only in the daemon whose own node name it has; without leadership, every Node as before."""

from __future__ import annotations

import threading
import time

import pytest

from kctl.agent.node import ANNOTATION_PODMAN_URL
from kctl.agent.supervisor import NodeAgentSupervisor

WAIT = 30.0


class FakeLeadership:
    """Stands in for kctl.client.leader.LeaderElector: a term and listeners, changed by the test."""

    def __init__(self) -> None:
        self.term: int | None = None
        self.listeners: list = []

    def add_listener(self, callback) -> None:
        self.listeners.append(callback)
        if self.term is not None:
            callback(self.term)

    def remove_listener(self, callback) -> None:
        self.listeners.remove(callback)

    def set(self, term: int | None) -> None:
        self.term = term
        for callback in list(self.listeners):
            callback(term)


class FakeRuntime:
    def __init__(self, node: dict, term: int | None) -> None:
        self.node, self.term = node["metadata"]["name"], term
        self.revoked = ""
        self.closed = False

    def revoke(self, reason: str) -> None:
        self.revoked = reason

    def close(self) -> None:
        self.closed = True


class RecordingAgent:
    def __init__(self, api, name, runtime, **options) -> None:
        self.node_name, self.runtime = name, runtime
        self.started = self.stopped = False

    def start(self) -> None:
        self.started = True

    def stop(self, timeout: float = 10.0) -> None:
        self.stopped = True


def wait_until(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


NODES = {"here": "unix:///run/podman/podman.sock", "elsewhere": "unix:///run/other.sock",
         "far": "ssh://root@10.0.0.9:22/run/podman/podman.sock"}


@pytest.fixture
def supervised(api):
    """A supervisor for host node `here` over the three NODES, with a FakeLeadership (or none); stopped after."""
    for name, url in NODES.items():
        api.create({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "annotations": {ANNOTATION_PODMAN_URL: url}}})
    made: list[FakeRuntime] = []
    lock = threading.Lock()

    def runtime_for_node(node: dict, *, term: int | None = None) -> FakeRuntime:
        runtime = FakeRuntime(node, term)
        with lock:
            made.append(runtime)
        return runtime

    started: list[NodeAgentSupervisor] = []

    def start(leadership: FakeLeadership | None) -> tuple[NodeAgentSupervisor, list[FakeRuntime]]:
        supervisor = NodeAgentSupervisor(api, runtime_for_node=runtime_for_node, agent_factory=RecordingAgent,
                                         retry=WAIT, leadership=leadership,
                                         host_node="here" if leadership is not None else None)
        supervisor.start()
        started.append(supervisor)
        wait_until(lambda: supervisor.nodes is not None and supervisor.nodes.has_synced(), "nodes listed")
        return supervisor, made

    yield start
    for supervisor in started:
        supervisor.stop()


def test_without_leadership_every_node_has_an_agent_unfenced(supervised):
    """No leader election (no control plane): today's behaviour, every Node's agent, no term."""
    supervisor, made = supervised(None)
    wait_until(lambda: set(supervisor.agents) == set(NODES), "all three agents")
    assert {runtime.term for runtime in made} == {None}


def test_a_follower_runs_only_its_own_unix_node(supervised):
    """Not leading: the own-named unix:// Node's agent only; no ssh:// agent, no other host's unix:// agent."""
    supervisor, made = supervised(FakeLeadership())
    wait_until(lambda: set(supervisor.agents) == {"here"}, "the own node's agent")
    time.sleep(0.3)  # a reconcile pass more: still no other agent
    assert set(supervisor.agents) == {"here"} and [r.node for r in made] == ["here"]


def test_leading_starts_ssh_agents_fenced_and_losing_it_revokes_them_at_once(supervised):
    """Leading with term 4 starts the ssh agent on a term-4 runtime; the end of leadership revokes the runtime
    and stops the agent before the listener returns; a later term 6 gets a new term-6 runtime."""
    leadership = FakeLeadership()
    supervisor, made = supervised(leadership)
    wait_until(lambda: "here" in supervisor.agents, "the own node's agent")
    leadership.set(4)
    wait_until(lambda: "far" in supervisor.agents, "the ssh node's agent")
    far = supervisor.agents["far"]
    assert far.runtime.term == 4 and far.started
    leadership.set(None)  # the elector's thread calls this before it releases the Lease
    assert far.runtime.revoked and "no longer leads" in far.runtime.revoked
    assert far.stopped and "far" not in supervisor.agents
    assert "here" in supervisor.agents and not supervisor.agents["here"].stopped
    leadership.set(6)
    wait_until(lambda: "far" in supervisor.agents, "the ssh node's agent of term 6")
    assert supervisor.agents["far"].runtime.term == 6
    assert [r.term for r in made if r.node == "far"] == [4, 6]


def test_a_term_change_while_leading_replaces_the_ssh_runtime(supervised):
    """Leadership moving from term 1 straight to term 2 revokes term 1's runtime and makes a term-2 one."""
    leadership = FakeLeadership()
    leadership.term = 1
    supervisor, _made = supervised(leadership)
    wait_until(lambda: "far" in supervisor.agents, "the ssh node's agent of term 1")
    first = supervisor.agents["far"]
    leadership.set(2)
    assert first.runtime.revoked and first.stopped
    wait_until(lambda: "far" in supervisor.agents and supervisor.agents["far"].runtime.term == 2, "term 2 agent")
