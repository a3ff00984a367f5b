"""Leader loss on one store (issue 17): two daemons' control planes and node agent supervisors; the leader stops
renewing (its store calls fail, it never releases) -> it stops its ssh:// Node's agent, then the other daemon
leads once the Lease lapsed, with a higher term, and runs that agent; the first runs it no more."""

from __future__ import annotations

import threading
import time

from kctl.agent.node import ANNOTATION_PODMAN_URL
from kctl.agent.supervisor import NodeAgentSupervisor
from kctl.apiserver.server import APIServer
from kctl.daemon.controlplane import ControlPlane
from kctl.daemon.settings import DaemonSettings

WAIT = 30.0
SETTINGS = DaemonSettings(controllers=(), cluster_dns_port=None, leader_elect_lease_duration=2.0,
                          leader_elect_renew_deadline=1.0, leader_elect_retry_period=0.2)
#: generous slack over lease duration + retry period for a loaded 2-core machine (no timing is asserted tighter)
SLACK = 15.0


class Runtime:
    def __init__(self, term: int | None) -> None:
        self.term = term
        self.revoked = ""

    def revoke(self, reason: str) -> None:
        self.revoked = reason


def wait_until(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


def test_the_other_daemon_takes_over_the_ssh_agents_when_the_leader_stops_renewing(store, monkeypatch):
    """A leader whose renewals fail stops its ssh agent; the follower leads with a higher term and starts it."""
    log: list[tuple[str, str, int | None]] = []  # (daemon, "start"/"stop", term), in the order they happened
    lock = threading.Lock()

    def agent_factory(daemon: str):
        class Agent:
            def __init__(self, api, name, runtime, **options) -> None:
                self.node_name, self.runtime = name, runtime

            def start(self) -> None:
                with lock:
                    log.append((daemon, "start", self.runtime.term))

            def stop(self, timeout: float = 10.0) -> None:
                with lock:
                    log.append((daemon, "stop", self.runtime.term))
        return Agent

    setup = APIServer(store, user="tester")
    setup.create({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "far", "annotations": {ANNOTATION_PODMAN_URL: "ssh://root@10.0.0.9:22/run/podman/podman.sock"}}})
    daemons: dict[str, tuple[ControlPlane, NodeAgentSupervisor]] = {}
    try:
        for name in ("a", "b"):
            api = APIServer(store, user=f"daemon-{name}")
            plane = ControlPlane(api, SETTINGS, identity=name)
            supervisor = NodeAgentSupervisor(api, runtime_for_node=lambda node, *, term=None: Runtime(term),
                                             agent_factory=agent_factory(name), retry=WAIT,
                                             leadership=plane.leadership, host_node=name)
            supervisor.start()
            plane.start()
            daemons[name] = (plane, supervisor)
            if name == "a":  # a leads first
                wait_until(lambda: "far" in supervisor.agents, "a runs the ssh node's agent")
        a_plane, a_supervisor = daemons["a"]
        b_plane, b_supervisor = daemons["b"]
        first = a_plane.leadership.term
        assert first is not None and b_plane.leadership.term is None and "far" not in b_supervisor.agents

        def unreachable(*args, **kwargs):
            raise RuntimeError("the store does not answer")

        monkeypatch.setattr(a_plane.leadership, "_try_acquire_or_renew", unreachable)  # a stops renewing
        lost = time.monotonic()
        wait_until(lambda: "far" in b_supervisor.agents, "b runs the ssh node's agent")
        took = time.monotonic() - lost
        assert took < SETTINGS.leader_elect_lease_duration + SETTINGS.leader_elect_retry_period + SLACK
        assert b_plane.leadership.term is not None and b_plane.leadership.term > first
        assert "far" not in a_supervisor.agents and a_plane.leadership.term is None
        with lock:
            events = list(log)
        assert events.index(("a", "stop", first)) < events.index(("b", "start", b_plane.leadership.term))
        assert [e for e in events if e[0] == "a"] == [("a", "start", first), ("a", "stop", first)]
    finally:
        for plane, supervisor in daemons.values():
            plane.stop()
            supervisor.stop()
