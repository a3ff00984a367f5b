"""Fencing by the leader term (kctl.runtime.fencing) on a real host: this machine's private Podman reached
through the session's private sshd. Runtimes of two terms against one host: the older one is cut off on the
host itself once the newer fenced it, and the host refuses to be fenced by the older term again. A new store's
leader, whose term is lower than the one an earlier store's leader left on the host, raises its term past it
(kctl.client.leader.raise_term, asked by kctl.agent.supervisor) and drives the host."""

from __future__ import annotations

import contextlib
import copy
import threading
import time

import pytest

from kctl.runtime.fencing import FencedError, fence_host, fenced_runtime_for_node, remove_local_fence
from kctl.runtime.interface import RuntimeError_

#: generous for a loaded 2-core machine: a few ssh round trips and one Lease write are needed
WAIT = 30.0


@pytest.fixture
def node(podman_service, sshd) -> dict:
    """A Node object naming the private Podman over ssh://; its host's fence folder is removed after."""
    url = sshd.podman_url(podman_service.socket)
    obj = {"metadata": {"name": "fenced", "annotations": {
        "kctl.io/podman-url": url, "kctl.io/ssh-identity": sshd.identity, "kctl.io/ssh-known-hosts": sshd.known_hosts}}}
    yield obj
    remove_local_fence(podman_service.socket)


def test_a_newer_term_cuts_the_older_off_on_the_host(node):
    """Term 1 works; once term 2 fenced the host, term 1's next call (and host command) fails naming term 2,
    term 2's work, and the host refuses a term-1 fence."""
    runtimes = []
    try:
        one = fenced_runtime_for_node(node, term=1)
        runtimes.append(one)
        one.ping()
        one.list_pods({"kctl-fencing-test": "x"})  # a call through term 1's link (and its tunnel now up)
        assert one.run_on_host(["true"]).exit_code == 0
        two = fenced_runtime_for_node(node, term=2)
        runtimes.append(two)
        assert two.link == ""  # made without touching the host: its first call fences it
        two.ping()
        assert two.link.endswith("/term-2.sock")
        with pytest.raises(FencedError, match=r"fenced by a newer leader \(term 2\)"):
            one.list_pods({"kctl-fencing-test": "x"})
        with pytest.raises(FencedError, match=r"term 2"):
            one.ping()  # revoked for good: fails at once
        assert two.list_pods({"kctl-fencing-test": "x"}) == []
        assert two.run_on_host(["true"]).exit_code == 0
        url = node["metadata"]["annotations"]["kctl.io/podman-url"]
        annotations = node["metadata"]["annotations"]
        with pytest.raises(FencedError, match=r"fenced by a newer leader \(term 2\)"):
            fence_host(url, 1, identity=annotations["kctl.io/ssh-identity"],
                       known_hosts=annotations["kctl.io/ssh-known-hosts"])
        two.ping()  # the refused fence changed nothing
    finally:
        for runtime in runtimes:
            with contextlib.suppress(RuntimeError_):
                runtime.close()


def test_a_host_command_of_an_older_term_is_refused(node):
    """A command on the host (routes, nft) through a term-1 runtime fails once term 2 fenced the host."""
    runtimes = []
    try:
        one = fenced_runtime_for_node(node, term=1)
        runtimes.append(one)
        assert one.run_on_host(["true"]).exit_code == 0
        two = fenced_runtime_for_node(node, term=2)
        runtimes.append(two)
        assert two.run_on_host(["true"]).exit_code == 0  # its first call: the fence
        with pytest.raises(FencedError, match=r"term 2"):
            one.run_on_host(["true"])
    finally:
        for runtime in runtimes:
            with contextlib.suppress(RuntimeError_):
                runtime.close()


def test_an_older_terms_runtime_made_late_is_refused_at_its_first_call(node):
    """A runtime of term 1 made after term 2 fenced the host fails its first call, the fence refused."""
    runtimes = []
    try:
        two = fenced_runtime_for_node(node, term=2)
        runtimes.append(two)
        two.ping()
        late = fenced_runtime_for_node(node, term=1)
        runtimes.append(late)
        for _ in range(2):  # refused, then revoked for good
            with pytest.raises(FencedError, match=r"fenced by a newer leader \(term 2\)"):
                late.list_pods({"kctl-fencing-test": "x"})
        two.ping()
    finally:
        for runtime in runtimes:
            with contextlib.suppress(RuntimeError_):
                runtime.close()


class ListingAgent:
    """An agent whose start makes its runtime's first call (which fences the host): a pod listing."""

    def __init__(self, api, name, runtime, **options) -> None:
        self.node_name, self.runtime = name, runtime
        self.listed: list | None = None
        self.error = ""

    def start(self) -> None:
        try:
            self.listed = self.runtime.list_pods({"kctl-fencing-test": "x"})
        except RuntimeError_ as error:
            self.error = str(error)

    def stop(self, timeout: float = 10.0) -> None:
        pass


def test_a_new_stores_leader_raises_its_term_past_an_earlier_stores_fence(node, api):
    """A host fenced at term 5 by an earlier store's leader: the new store's leader (term 1) is refused, raises
    the Lease's term to 6, fences again and its calls work; the earlier term 5 is refused from then on."""
    from kctl.agent.supervisor import NodeAgentSupervisor
    from kctl.client.leader import LeaderElectionSettings, LeaderElector
    from kctl.daemon.localpodman import LocalServices, make_runtime_factory

    annotations = node["metadata"]["annotations"]
    url = annotations["kctl.io/podman-url"]
    keys = {"identity": annotations["kctl.io/ssh-identity"], "known_hosts": annotations["kctl.io/ssh-known-hosts"]}
    fence_host(url, 5, **keys)  # the earlier store's leader
    api.create({"apiVersion": "v1", "kind": "Node", **copy.deepcopy(node)})
    settings = LeaderElectionSettings(lease_duration=15, renew_deadline=10, renew_interval=2, retry_interval=0.2)
    LeaderElector(api, identity="before", settings=settings).try_acquire_or_renew()  # a Lease at 0, released:
    lease = api.get(api.resource("leases"), "kctl-controller-manager", namespace="kube-system")
    lease["spec"]["holderIdentity"] = ""
    api.update(lease)  # the next holder's term is 1
    elector = LeaderElector(api, identity="new", settings=settings)
    supervisor = NodeAgentSupervisor(api, runtime_for_node=make_runtime_factory(LocalServices()),
                                     agent_factory=ListingAgent, retry=WAIT, leadership=elector, host_node="here")
    stop = threading.Event()
    thread = threading.Thread(target=elector.run, args=(stop,), daemon=True)
    late = None
    try:
        supervisor.start()
        thread.start()
        assert elector.wait_for_term(lambda term: term is not None, timeout=WAIT) and elector.term in (1, 6)
        deadline = time.monotonic() + WAIT
        while not (supervisor.agents.get("fenced") and supervisor.agents["fenced"].listed is not None):
            assert time.monotonic() < deadline, f"the new leader never drove the host (agents {supervisor.agents})"
            time.sleep(0.05)
        agent = supervisor.agents["fenced"]
        assert agent.listed == [] and agent.runtime.term == 6 and elector.term == 6
        assert api.get(api.resource("leases"), "kctl-controller-manager",
                       namespace="kube-system")["spec"]["leaseTransitions"] == 6
        assert agent.runtime.list_pods({"kctl-fencing-test": "x"}) == []  # and its calls go on working
        late = fenced_runtime_for_node(node, term=5)  # the earlier store's leader: refused (the host is at 6)
        with pytest.raises(FencedError, match=r"fenced by a newer leader \(term 6\)"):
            late.ping()
    finally:
        supervisor.stop()
        stop.set()
        thread.join(WAIT)
        if late is not None:
            with contextlib.suppress(RuntimeError_):
                late.close()
