"""One node agent per Node: `NodeAgentSupervisor` starts, restarts and stops them as Nodes change.

`kctl daemon` (kctl.daemon.server) runs one supervisor. It follows the Nodes through a
kctl.client.informer Informer (in node mode only its own Node, filtered by the API
server) and runs a kctl.agent.agent.NodeAgent for every Node with a Podman URL
(kctl.io/podman-url), except Nodes whose own host runs their agent (kctl.io/agent=node);
a Node whose URL changes gets a new agent on a new runtime connection; one whose
runtime cannot be made is tried again every `retry` seconds. Two Nodes naming one
Podman get one agent (two would remove each other's pods as orphans).
"""

from __future__ import annotations

import copy
import logging
import threading
from typing import TYPE_CHECKING, Callable

from kctl.agent.agent import NodeAgent
from kctl.agent.node import (AGENT_NODE_MODE, ANNOTATION_AGENT, ANNOTATION_PODMAN_URL, ANNOTATION_SSH_IDENTITY,
                             node_address)
from kctl.client.informer import Informer

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.agent")

#: how often the supervisor looks whether it was stopped while the Nodes are first listed
SYNC_POLL_SECONDS = 0.5


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def node_connection(node: dict) -> tuple[str, str]:
    """(Podman URL, SSH identity) from a Node's annotations; "" when unset."""
    annotations = _meta(node).get("annotations") or {}
    return annotations.get(ANNOTATION_PODMAN_URL, ""), annotations.get(ANNOTATION_SSH_IDENTITY, "")


def _agent_relevant(node: dict) -> tuple:
    """What of a Node decides whether and how its agent runs."""
    meta = _meta(node)
    return node_connection(node), (meta.get("annotations") or {}).get(ANNOTATION_AGENT), bool(
        meta.get("deletionTimestamp"))


class NodeAgentSupervisor:
    """Runs a NodeAgent for every Node with a Podman URL; follows Nodes added, changed, removed.

    A Node whose runtime cannot be made (bad URL, key missing) is tried again every
    `retry` seconds. Stopping leaves every container running.
    """

    def __init__(self, api: API, *, runtime_for_node: Callable[[dict], object], retry: float = 10.0,
                 agent_factory: Callable[..., NodeAgent] = NodeAgent, own_node: str | None = None,
                 **agent_options) -> None:
        self.api = api
        # Node mode (`kctl daemon --server`): the agent of this one Node only. Otherwise every
        # Node but those whose own host runs their agent (annotated kctl.io/agent=node).
        self.own_node = own_node
        self.runtime_for_node = runtime_for_node
        self.retry = retry
        self.agent_factory = agent_factory
        self.agent_options = agent_options
        self.agents: dict[str, NodeAgent] = {}
        self._connections: dict[str, tuple[str, str]] = {}
        self._failures: dict[str, str] = {}  # node -> the last error met starting its agent
        self._stop = threading.Event()
        self._changed = threading.Event()  # a Node came, went, or changed how it is reached
        self._thread: threading.Thread | None = None
        self._informer_thread: threading.Thread | None = None
        self.nodes: Informer | None = None  # made by start: the Nodes (this host's only, in node mode)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        # In node mode only this host's Node is followed (the API server filters).
        selector = f"metadata.name={self.own_node}" if self.own_node is not None else None
        nodes = self.nodes = Informer(self.api, "nodes", field_selector=selector)
        nodes.add_handler(self._node_added, self._node_updated, self._node_added)
        self._informer_thread = nodes.start(self._stop)
        self._thread = threading.Thread(target=self._run, args=(nodes,), name="node-agents", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        """Stop following Nodes and stop every agent (in parallel)."""
        self._stop.set()
        self._changed.set()  # wake the reconcile loop from its retry wait: a stop never waits that out
        for thread in (self._thread, self._informer_thread):
            if thread is not None:
                thread.join(timeout)
        self._thread = self._informer_thread = None
        stoppers = [threading.Thread(target=self._retire, args=(agent, timeout), daemon=True)
                    for agent in self.agents.values()]
        for thread in stoppers:
            thread.start()
        for thread in stoppers:
            thread.join(timeout)
        self.agents.clear()
        self._connections.clear()

    def _node_added(self, node: dict) -> None:
        self._changed.set()

    def _node_updated(self, old: dict, new: dict) -> None:
        """Wake for what decides a Node's agent (not for the heartbeat's status writes)."""
        if _agent_relevant(old) != _agent_relevant(new):
            self._changed.set()

    def _run(self, nodes: Informer) -> None:
        """Reconcile on every relevant Node change, and every `retry` s to retry failed nodes."""
        while not nodes.wait_for_sync(SYNC_POLL_SECONDS):
            if self._stop.is_set():
                return
        while not self._stop.is_set():
            self._changed.clear()
            try:
                self.reconcile([copy.deepcopy(n) for n in nodes.list()])  # the cache's objects stay as they are
            except Exception as exc:
                log.error("node agents: %s", exc)
            self._changed.wait(self.retry)

    def reconcile(self, nodes: list[dict]) -> None:
        """Start, restart or stop agents so there is one per usable Node."""
        wanted: dict[str, dict] = {}
        owners: dict[str, str] = {}  # Podman URL -> the node it serves
        for node in sorted(nodes, key=lambda n: _meta(n)["name"]):
            name, (url, _) = _meta(node)["name"], node_connection(node)
            if not url or _meta(node).get("deletionTimestamp"):
                continue
            if self.own_node is not None:
                if name != self.own_node:
                    continue
            elif (_meta(node).get("annotations") or {}).get(ANNOTATION_AGENT) == AGENT_NODE_MODE:
                continue  # its own host runs its agent
            if url in owners:
                # Two agents on one Podman would remove each other's pods as orphans.
                self._failed(name, f"its Podman {url} is already node {owners[url]}'s; no agent for it")
                continue
            owners[url] = name
            wanted[name] = node
        for name in [n for n in self.agents if n not in wanted or
                     self._connections.get(n) != node_connection(wanted[n])]:
            self._stop_agent(name)
        for name, node in wanted.items():
            if name not in self.agents and not self._stop.is_set():
                self._start_agent(node)

    def _start_agent(self, node: dict) -> None:
        name = _meta(node)["name"]
        url, identity = node_connection(node)
        try:
            runtime = self.runtime_for_node(node)
        except Exception as exc:
            self._failed(name, f"cannot reach Podman at {url}: {exc}")
            return
        try:
            agent = self.agent_factory(self.api, name, runtime, host_ip=node_address(node),
                                       remote=url.startswith("ssh://"), **self.agent_options)
            agent.start()
        except Exception as exc:
            self._failed(name, f"cannot start its agent: {type(exc).__name__}: {exc}")
            close = getattr(runtime, "close", None)
            if callable(close):
                close()
            return
        self._failures.pop(name, None)
        self.agents[name] = agent
        self._connections[name] = (url, identity)

    def _failed(self, name: str, message: str) -> None:
        """Log a failure to start a node's agent once per distinct error (retries stay quiet)."""
        (log.debug if self._failures.get(name) == message else log.error)("node %s: %s (retrying)", name, message)
        self._failures[name] = message

    def _stop_agent(self, name: str) -> None:
        agent = self.agents.pop(name)
        self._connections.pop(name, None)
        self._retire(agent)

    @staticmethod
    def _retire(agent: NodeAgent, timeout: float = 10.0) -> None:
        """Stop an agent, then close the runtime connection made for it (SSH tunnel...)."""
        agent.stop(timeout)
        close = getattr(agent.runtime, "close", None)
        if callable(close):
            try:
                close()
            except Exception as exc:
                log.warning("node %s: closing the runtime connection: %s", agent.node_name, exc)


__all__ = ["NodeAgentSupervisor", "node_connection"]
