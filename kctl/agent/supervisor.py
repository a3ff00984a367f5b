"""One node agent per Node: `NodeAgentSupervisor` starts, restarts and stops them as Nodes change.

`kctl daemon` (kctl.daemon.server) runs one supervisor. It follows the Nodes through a
kctl.client.informer Informer (in node mode only its own Node, filtered by the API
server) and runs a kctl.agent.agent.NodeAgent for every Node with a Podman URL
(kctl.io/podman-url), except Nodes whose own host runs their agent (kctl.io/agent=node);
a Node whose URL changes gets a new agent on a new runtime connection; one whose
runtime cannot be made is tried again every `retry` seconds. Two Nodes naming one
Podman get one agent (two would remove each other's pods as orphans).

Ownership, when the daemon runs the control plane with leader election (`leadership`, the
elector of kctl.daemon.controlplane, and `host_node`, this daemon's own node name):
- an ssh:// Node's agent runs only while this daemon leads. When it starts leading with term
  T, the agent gets a runtime of term T (`runtime_for_node(node, term=T)`, kctl.runtime.fencing:
  its first call fences the host for T, every call goes through T's link); when leadership ends (or the term
  changes) the listener revokes those runtimes at once (every call fails from then on) and
  stops their agents, all before the elector releases the Lease or lets it lapse;
- a host that refuses the fence because it holds a higher term N (the runtime's `on_refused`)
  was fenced by a leader that no longer holds this Lease (the Lease deleted, restored from an
  older backup, or another store's): while this daemon still holds it, the reconcile loop asks
  the elector to raise the term past N (LeaderElector.raise_term: a compare-and-swap of the
  Lease), logs one warning naming the host and both terms, and the term change restarts the
  ssh:// agents on runtimes of the new term, which fence again. A deposed leader raises nothing
  (it stays refused);
- a unix:// Node's agent runs only in the daemon whose own node name is the Node's name
  (the name that daemon registered its host as: --node, else the hostname);
Without `leadership` (no control plane, or no leader election) every Node's agent runs here,
as before; node mode (`own_node`) runs only its own Node's.
"""

from __future__ import annotations

import copy
import logging
import threading
from typing import TYPE_CHECKING, Callable
from urllib.parse import urlparse

from kctl.agent.agent import NodeAgent
from kctl.agent.node import (AGENT_NODE_MODE, ANNOTATION_AGENT, ANNOTATION_PODMAN_URL, ANNOTATION_SSH_IDENTITY,
                             node_address)
from kctl.client.informer import Informer

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.client.leader import LeaderElector

log = logging.getLogger("kctl.agent")

#: how often the supervisor looks whether it was stopped while the Nodes are first listed
SYNC_POLL_SECONDS = 0.5
#: how long the end of leadership waits for the ssh:// Nodes' agents to stop (their runtimes are revoked first)
DEPOSE_STOP_SECONDS = 3.0


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def node_connection(node: dict) -> tuple[str, str]:
    """(Podman URL, SSH identity) from a Node's annotations; "" when unset."""
    annotations = _meta(node).get("annotations") or {}
    return annotations.get(ANNOTATION_PODMAN_URL, ""), annotations.get(ANNOTATION_SSH_IDENTITY, "")


def _host(url: str) -> str:
    """user@host:port of an ssh:// URL, for messages."""
    return urlparse(url).netloc or url


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

    def __init__(self, api: API, *, runtime_for_node: Callable[..., object], retry: float = 10.0,
                 agent_factory: Callable[..., NodeAgent] = NodeAgent, own_node: str | None = None,
                 leadership: LeaderElector | None = None, host_node: str | None = None,
                 **agent_options) -> None:
        self.api = api
        # Node mode (`kctl daemon --server`): the agent of this one Node only. Otherwise every
        # Node but those whose own host runs their agent (annotated kctl.io/agent=node).
        self.own_node = own_node
        # With leader election (module doc): ssh:// Nodes while leading, fenced by the term; unix:// Nodes
        # named host_node only.
        self.leadership = leadership
        self.host_node = host_node
        self._term: int | None = None  # the leader term the listener last told (None: not leading)
        self._agent_terms: dict[str, int] = {}  # ssh:// node -> the term its runtime is fenced with
        self._refusals: dict[str, tuple[int, int, str]] = {}  # node -> (its term, the host's higher term, URL)
        self._agents_lock = threading.RLock()  # agents and their connections/terms, changed by two threads
        self._not_mine: set[str] = set()  # unix:// Nodes of other hosts, logged once
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
        if self.leadership is not None:
            self.leadership.add_listener(self._leadership_changed)
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
        if self.leadership is not None:
            self.leadership.remove_listener(self._leadership_changed)
        for thread in (self._thread, self._informer_thread):
            if thread is not None:
                thread.join(timeout)
        self._thread = self._informer_thread = None
        with self._agents_lock:
            agents = list(self.agents.values())
            self.agents.clear()
            self._connections.clear()
            self._agent_terms.clear()
        self._retire_all(agents, timeout)

    def _retire_all(self, agents: list[NodeAgent], timeout: float) -> None:
        """Stop agents in parallel, waiting up to `timeout` for them."""
        stoppers = [threading.Thread(target=self._retire, args=(agent, timeout), daemon=True) for agent in agents]
        for thread in stoppers:
            thread.start()
        for thread in stoppers:
            thread.join(timeout)

    def _leadership_changed(self, term: int | None) -> None:
        """The elector's listener: revoke and stop the agents of an ended term, then wake the reconcile loop.

        Runs in the elector's thread before it releases the Lease (or lets it lapse): once it returns,
        no ssh:// runtime of the old term makes another call."""
        with self._agents_lock:
            old, self._term = self._term, term
            stale = [name for name, t in self._agent_terms.items() if t != term]
            agents = [self.agents.pop(name) for name in stale if name in self.agents]
            for name in stale:
                self._connections.pop(name, None)
                self._agent_terms.pop(name, None)
        if agents:
            reason = (f"this daemon no longer leads (its term {old} ended)" if term is None
                      else f"this daemon's leadership moved from term {old} to term {term}")
            for agent in agents:
                revoke = getattr(agent.runtime, "revoke", None)
                if callable(revoke):
                    try:
                        revoke(reason)
                    except Exception as exc:
                        log.warning("node %s: revoking its runtime: %s", agent.node_name, exc)
            log.info("stopping the agents of %d ssh node(s): %s", len(agents), reason)
            self._retire_all(agents, DEPOSE_STOP_SECONDS)
        self._changed.set()

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
                self.raise_term_past_refusals()
            except Exception as exc:
                log.error("node agents: raising the leader term: %s", exc)
            try:
                self.reconcile([copy.deepcopy(n) for n in nodes.list()])  # the cache's objects stay as they are
            except Exception as exc:
                log.error("node agents: %s", exc)
            self._changed.wait(self.retry)

    def _refused(self, name: str, url: str, term: int, newer: int) -> None:
        """A runtime's on_refused: node `name`'s host holds `newer` > `term` (module doc); the loop acts on it."""
        with self._agents_lock:
            if self._term == term:
                self._refusals[name] = (term, newer, url)
        self._changed.set()

    def raise_term_past_refusals(self) -> int | None:
        """Raise the leader term past the hosts that refused this term's fence, while this daemon still holds
        the Lease (module doc); the new term (None: nothing raised). Refusals of an older term are dropped; a
        store that fails keeps them for the next pass."""
        with self._agents_lock:
            refusals, self._refusals = self._refusals, {}
            term = self._term
        refusals = {name: r for name, r in refusals.items() if r[0] == term}
        if not refusals or term is None or self.leadership is None:
            return None
        newer = max(r[1] for r in refusals.values())
        try:
            raised = self.leadership.raise_term(newer, current=term)
        except Exception as exc:
            with self._agents_lock:
                if self._term == term:
                    for name, refusal in refusals.items():
                        self._refusals.setdefault(name, refusal)
            log.warning("cannot raise the leader term past %d (hosts refused term %d): %s", newer, term, exc)
            return None
        hosts = "; ".join(f"node {name} ({_host(url)}) holds term {high}"
                          for name, (_, high, url) in sorted(refusals.items()))
        if raised is None:
            log.info("%s, above this daemon's term %d, which no longer holds the Lease: nothing raised", hosts, term)
            return None
        log.warning("%s, from a leader that no longer holds this Lease (it was deleted, restored, or another "
                    "store's): raised this leader's term from %d to %d, fencing again", hosts, term, raised)
        return raised

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
            elif not self._owns(name, url):
                continue
            if url in owners:
                # Two agents on one Podman would remove each other's pods as orphans.
                self._failed(name, f"its Podman {url} is already node {owners[url]}'s; no agent for it")
                continue
            owners[url] = name
            wanted[name] = node
        with self._agents_lock:
            term = self._term
            gone = [n for n in self.agents if n not in wanted or self._connections.get(n) != node_connection(
                wanted[n]) or (n in self._agent_terms and self._agent_terms[n] != term)]
        for name in gone:
            self._stop_agent(name)
        for name, node in wanted.items():
            if name not in self.agents and not self._stop.is_set():
                self._start_agent(node)

    def _fenced(self, url: str) -> bool:
        """Whether this Node's agent runs only while leading, fenced by the term (ssh:// with leader election)."""
        return self.leadership is not None and self.own_node is None and url.startswith("ssh://")

    def _owns(self, name: str, url: str) -> bool:
        """Whether this daemon runs the Node's agent (module doc: ownership)."""
        if self.leadership is None:
            return True
        if url.startswith("ssh://"):
            return self._term is not None
        if self.host_node is None or name == self.host_node:
            return True
        if name not in self._not_mine:  # said once per Node: a renamed host's daemon would otherwise look idle
            self._not_mine.add(name)
            log.info("node %s (%s) is not this host's (this daemon's node name is %s): its agent runs in the "
                     "daemon started with --node %s on its own host", name, url, self.host_node, name)
        return False

    def _start_agent(self, node: dict) -> None:
        name = _meta(node)["name"]
        url, identity = node_connection(node)
        term = self._term
        fenced = self._fenced(url)
        if fenced and term is None:
            return
        try:
            runtime = self.runtime_for_node(node, term=term) if fenced else self.runtime_for_node(node)
        except Exception as exc:
            self._failed(name, f"cannot reach Podman at {url}: {exc}")
            return
        if fenced and hasattr(runtime, "on_refused"):  # before the agent's first call, which fences the host
            runtime.on_refused = lambda newer: self._refused(name, url, term, newer)  # type: ignore[union-attr]
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
        with self._agents_lock:
            current = self._term
            if not fenced or current == term:
                self._failures.pop(name, None)
                self.agents[name] = agent
                self._connections[name] = (url, identity)
                if fenced:
                    self._agent_terms[name] = term  # type: ignore[assignment]  # not None: checked above
                return
        # leadership ended (or moved) while the agent started: it never joins
        revoke = getattr(runtime, "revoke", None)
        if callable(revoke):
            revoke(f"this daemon's term {term} ended while node {name}'s agent started")
        self._retire(agent)

    def _failed(self, name: str, message: str) -> None:
        """Log a failure to start a node's agent once per distinct error (retries stay quiet)."""
        (log.debug if self._failures.get(name) == message else log.error)("node %s: %s (retrying)", name, message)
        self._failures[name] = message

    def _stop_agent(self, name: str) -> None:
        with self._agents_lock:
            agent = self.agents.pop(name, None)
            self._connections.pop(name, None)
            self._agent_terms.pop(name, None)
        if agent is not None:
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
