"""Node mode in the agent: which Nodes a supervisor runs agents for, and how a Node is marked.

A control host's daemon runs no agent for a Node annotated kctl.io/agent=node (its own
host runs it, `kctl daemon --server`); a node-mode daemon runs only its own Node's.
"""

from __future__ import annotations

import pytest

from kctl.agent.supervisor import NodeAgentSupervisor
from kctl.agent.node import (AGENT_NODE_MODE, ANNOTATION_AGENT, ANNOTATION_PODMAN_URL, ANNOTATION_SSH_IDENTITY,
                             register_node)


class RecordingAgent:
    """Stands in for NodeAgent: records its node and start/stop."""

    def __init__(self, api, name, runtime, **options) -> None:
        self.node_name, self.runtime = name, runtime
        self.started = self.stopped = False

    def start(self) -> None:
        self.started = True

    def stop(self, timeout: float = 10.0) -> None:
        self.stopped = True


def node(name: str, url: str, *, mode: str | None = None) -> dict:
    annotations = {ANNOTATION_PODMAN_URL: url}
    if mode:
        annotations[ANNOTATION_AGENT] = mode
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations}}


NODES = [node("ctl", "unix:///run/podman/podman.sock"),
         node("far", "ssh://root@10.0.0.2/run/podman/podman.sock"),
         node("self-run", "unix:///run/podman/podman.sock", mode=AGENT_NODE_MODE),
         node("other-mode", "unix:///x.sock", mode="something-else")]


@pytest.mark.parametrize("own_node,expected", [
    (None, {"ctl", "far", "other-mode"}),
    ("self-run", {"self-run"}),
    ("far", {"far"}),
    ("missing", set()),
], ids=["control-host", "node-mode", "node-mode-of-a-plain-node", "node-mode-not-registered"])
def test_which_nodes_get_an_agent(api, own_node, expected):
    """Control host: every Node but node-mode ones (one Podman URL shared is fine then); node mode: its own only."""
    supervisor = NodeAgentSupervisor(api, runtime_for_node=lambda n: n["metadata"]["name"],
                                     agent_factory=RecordingAgent, own_node=own_node)
    supervisor.reconcile(NODES)
    assert set(supervisor.agents) == expected
    assert all(a.started for a in supervisor.agents.values())
    supervisor.stop(1)


def test_a_node_turning_to_node_mode_loses_its_control_host_agent(api):
    """When a Node gets the node-mode annotation, the control host's agent for it stops."""
    supervisor = NodeAgentSupervisor(api, runtime_for_node=lambda n: n, agent_factory=RecordingAgent)
    supervisor.reconcile([node("n1", "unix:///a.sock")])
    first = supervisor.agents["n1"]
    supervisor.reconcile([node("n1", "unix:///a.sock", mode=AGENT_NODE_MODE)])
    assert supervisor.agents == {} and first.stopped


def test_register_node_mode_creates_the_node_marked(api):
    """A new Node is created already marked, so no control host ever starts an agent for it."""
    created = register_node(api, "n1", podman_url="unix:///run/podman/podman.sock", node_mode=True)
    annotations = created["metadata"]["annotations"]
    assert annotations[ANNOTATION_AGENT] == AGENT_NODE_MODE
    assert annotations[ANNOTATION_PODMAN_URL] == "unix:///run/podman/podman.sock"


def test_register_node_mode_marks_an_existing_node(api):
    """A Node the control host reached over SSH becomes node mode: URL now local, identity dropped."""
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "annotations": {
        ANNOTATION_PODMAN_URL: "ssh://root@h1/run/podman/podman.sock", ANNOTATION_SSH_IDENTITY: "/k/id"}}})
    marked = register_node(api, "n1", podman_url="unix:///run/podman/podman.sock", node_mode=True)
    assert marked["metadata"]["annotations"] == {ANNOTATION_PODMAN_URL: "unix:///run/podman/podman.sock",
                                                 ANNOTATION_AGENT: AGENT_NODE_MODE}
    rv = marked["metadata"]["resourceVersion"]
    again = register_node(api, "n1", podman_url="unix:///run/podman/podman.sock", node_mode=True)
    assert again["metadata"]["resourceVersion"] == rv  # nothing to change: nothing written


def test_register_node_without_node_mode_leaves_a_node_alone(api):
    """The control host's registration never touches an existing Node."""
    api.create(node("n1", "unix:///a.sock", mode=AGENT_NODE_MODE))
    kept = register_node(api, "n1", podman_url="unix:///b.sock")
    assert kept["metadata"]["annotations"][ANNOTATION_PODMAN_URL] == "unix:///a.sock"


class _NodeReads:
    """The API, recording the Nodes its list and watch answers hand the supervisor, and each reconcile."""

    def __init__(self, api) -> None:
        self._api = api
        self.names: set[str] = set()

    def __getattr__(self, name):
        return getattr(self._api, name)

    def list(self, rt, **kwargs):
        items, rev = self._api.list(rt, **kwargs)
        self.names.update(o["metadata"]["name"] for o in items if o.get("kind") == "Node")
        return items, rev

    def watch(self, rt, **kwargs):
        for change_type, obj in self._api.watch(rt, **kwargs):
            if obj.get("kind") == "Node":
                self.names.add(obj["metadata"]["name"])
            yield change_type, obj


def _wait_for(predicate, timeout: float = 10.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_node_mode_follows_only_its_own_node(api):
    """In node mode the supervisor is handed its own Node only (filtered by the API server), not every Node."""
    for name in ("h1", "h2", "h3"):
        api.create(node(name, f"unix:///{name}.sock"))
    reads = _NodeReads(api)
    supervisor = NodeAgentSupervisor(reads, runtime_for_node=lambda n: n, agent_factory=RecordingAgent,
                                     own_node="h1", retry=0.1)
    supervisor.start()
    try:
        assert _wait_for(lambda: set(supervisor.agents) == {"h1"})
        api.patch(api.resource("nodes"), "h2", {"metadata": {"labels": {"x": "y"}}})
        api.patch(api.resource("nodes"), "h1", {"metadata": {"labels": {"x": "y"}}})
        assert _wait_for(lambda: supervisor.nodes is not None and
                         (supervisor.nodes.get("", "h1") or {}).get("metadata", {}).get("labels") == {"x": "y"})
    finally:
        supervisor.stop(5)
    assert reads.names == {"h1"}


def test_status_writes_do_not_wake_the_supervisor(api, monkeypatch):
    """A Node's status changing (every heartbeat) does not make the supervisor reconcile; a new Podman URL does."""
    api.create(node("h1", "unix:///one.sock"))
    supervisor = NodeAgentSupervisor(api, runtime_for_node=lambda n: n, agent_factory=RecordingAgent, retry=60)
    calls: list[set[str]] = []
    reconcile = supervisor.reconcile

    def counted(nodes):
        calls.append({n["metadata"]["name"] for n in nodes})
        reconcile(nodes)

    monkeypatch.setattr(supervisor, "reconcile", counted)
    supervisor.start()
    try:
        assert _wait_for(lambda: set(supervisor.agents) == {"h1"})
        before = len(calls)
        current = api.get(api.resource("nodes"), "h1")
        api.update_status({**current, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        assert _wait_for(lambda: (supervisor.nodes.get("", "h1") or {}).get("status"))
        api.patch(api.resource("nodes"), "h1", {"metadata": {"annotations": {ANNOTATION_PODMAN_URL: "unix:///two.sock"}}})
        assert _wait_for(lambda: len(calls) > before)
        assert len(calls) == before + 1
    finally:
        supervisor.stop(5)
