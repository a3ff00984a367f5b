"""A host fenced by a higher term than the leader's (kctl.agent.supervisor, kctl.client.leader.raise_term): the
leader that holds the Lease raises its term past the host's by a compare-and-swap of the Lease and fences again
with it; a leader that no longer holds the Lease raises nothing and stays refused. The fence is a fake host (no
ssh); the elector, the supervisor and the fenced runtime are the real ones."""

from __future__ import annotations

import copy
import logging
import threading
import time

import pytest

from kctl.agent.node import ANNOTATION_PODMAN_URL
from kctl.agent.supervisor import NodeAgentSupervisor
from kctl.client.leader import LeaderElectionSettings, LeaderElector
from kctl.runtime import fencing
from kctl.runtime.fencing import FencedError, FencedPodmanRuntime, fenced_by_message

WAIT = 30.0
URL = "ssh://root@10.0.0.9:22/run/podman/podman.sock"
SETTINGS = LeaderElectionSettings(lease_duration=60, renew_deadline=50, renew_interval=40, retry_interval=0.05)


class Host:
    """The fence folder of one host: its highest term; fence() refuses a lower term, as fence_script does."""

    def __init__(self, high: int, *, on_refusal=lambda: None) -> None:
        self.high, self.on_refusal = high, on_refusal
        self.fences: list[int] = []
        self.lock = threading.Lock()

    def fence(self, base_url: str, term: int, **kwargs) -> str:
        with self.lock:
            self.fences.append(term)
            if self.high > term:
                self.on_refusal()
                raise FencedError(fenced_by_message("10.0.0.9:22", self.high, term), newer=self.high)
            self.high = term
            return f"/run/kctl/fence/0123456789abcdef/term-{term}.sock"


class FencingAgent:
    """An agent whose start makes its runtime's first call (the fence)."""

    def __init__(self, api, name, runtime, **options) -> None:
        self.node_name, self.runtime = name, runtime
        self.link, self.refused = "", ""

    def start(self) -> None:
        try:
            self.link = self.runtime.fence()
        except FencedError as error:
            self.refused = str(error)

    def stop(self, timeout: float = 10.0) -> None:
        pass


def wait_until(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


def lease(api) -> dict:
    return api.get(api.resource("leases"), "kctl-controller-manager", namespace="kube-system")


@pytest.fixture
def daemon(api, monkeypatch):
    """start(host) -> (elector, supervisor): a leader of term 1 (the Lease had 0 and no holder) driving ssh node
    `far` on `host` through fenced runtimes; everything stopped after."""
    api.create({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "far", "annotations": {ANNOTATION_PODMAN_URL: URL}}})
    LeaderElector(api, identity="earlier", settings=SETTINGS).try_acquire_or_renew()
    released = copy.deepcopy(lease(api))
    released["spec"]["holderIdentity"] = ""
    api.update(released)
    stops: list = []

    def start(host: Host) -> tuple[LeaderElector, NodeAgentSupervisor]:
        monkeypatch.setattr(fencing, "fence_host", host.fence)
        elector = LeaderElector(api, identity="a", settings=SETTINGS)
        supervisor = NodeAgentSupervisor(api, runtime_for_node=lambda node, *, term=None: FencedPodmanRuntime(
            URL, term=term), agent_factory=FencingAgent, retry=WAIT, leadership=elector, host_node="here")
        supervisor.start()
        stop = threading.Event()
        thread = threading.Thread(target=elector.run, args=(stop,), daemon=True)
        thread.start()
        stops.append((stop, thread, supervisor))
        return elector, supervisor

    yield start
    for stop, thread, supervisor in stops:
        supervisor.stop()
        stop.set()
        thread.join(30)


def test_the_lease_holder_raises_its_term_past_a_stale_fence_and_fences_again(api, daemon, caplog):
    """Term 1 refused by a host at term 5 -> leaseTransitions 6 by compare-and-swap, the elector's term 6, the
    term-1 agent replaced by a term-6 one whose fence the host takes; one warning names the host and the terms."""
    caplog.set_level(logging.INFO, logger="kctl")
    host = Host(5)
    elector, supervisor = daemon(host)
    wait_until(lambda: "far" in supervisor.agents and supervisor.agents["far"].link, "a fenced agent")
    agent = supervisor.agents["far"]
    assert agent.runtime.term == 6 and agent.link.endswith("/term-6.sock") and not agent.refused
    assert host.fences == [1, 6] and host.high == 6
    assert elector.term == 6 and elector.is_leader
    assert lease(api)["spec"]["leaseTransitions"] == 6 and lease(api)["spec"]["holderIdentity"] == "a"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "node far (root@10.0.0.9:22) holds term 5" in warnings[0] and "from 1 to 6" in warnings[0]


def test_a_leader_whose_lease_another_took_raises_nothing_and_stays_refused(api, daemon, caplog):
    """Another daemon takes the Lease as the host refuses term 1 (this leader has not noticed yet): no write to
    the Lease, no new fence, the agent stays refused."""
    caplog.set_level(logging.INFO, logger="kctl")

    def taken() -> None:
        new = copy.deepcopy(lease(api))
        new["spec"].update({"holderIdentity": "b", "leaseTransitions": 2})
        api.update(new)

    host = Host(5, on_refusal=taken)
    elector, supervisor = daemon(host)
    wait_until(lambda: any("nothing raised" in r.getMessage() for r in caplog.records), "the refusal handled")
    assert host.fences == [1] and host.high == 5
    assert lease(api)["spec"]["leaseTransitions"] == 2 and lease(api)["spec"]["holderIdentity"] == "b"
    assert elector.term in (1, None)  # (its next renewal would find b and step down)
    assert "far" not in supervisor.agents or supervisor.agents["far"].refused
    assert not [r for r in caplog.records if r.levelno == logging.WARNING and "raised" in r.getMessage()]
