"""The controller manager under leader election: only the leader reconciles, a clean stop hands
over at once, a crashed leader is replaced on expiry and, restarted, takes its own Lease back."""

from __future__ import annotations

import threading

from lifecycle_harness import wait_for
from toy_controller import ToyController, configmap, seen

from kctl.client.leader import IdentityLock, LeaderElectionSettings
from kctl.controllers.manager import ControllerManager

FAST = LeaderElectionSettings(lease_duration=1, renew_deadline=0.8, renew_interval=0.1, retry_interval=0.05)


def lease(api) -> dict:
    return api.get(api.resource("leases"), "kctl-controller-manager", namespace="kube-system")


def running_managers(api, tags: list[str]) -> tuple[list[ControllerManager], list[ToyController], threading.Event]:
    stop = threading.Event()
    toys = [ToyController(tag=t) for t in tags]
    managers = [ControllerManager(api, [toy], identity=t, election=FAST) for t, toy in zip(tags, toys)]
    for m in managers:
        m.start(stop)
    return managers, toys, stop


def test_two_managers_only_leader_acts_then_takeover_after_kill(api):
    """Of two managers on one store only one reconciles; killed without release, the other takes over."""
    managers, toys, stop = running_managers(api, ["one", "two"])
    try:
        wait_for(lambda: any(m.is_leader for m in managers), what="a leader")
        leader = next(i for i, m in enumerate(managers) if m.is_leader)
        other = 1 - leader
        assert managers[leader].wait_until_running(30)
        api.create(configmap("a", "1"))
        wait_for(lambda: seen(api, "a") == f"{toys[leader].tag}:1", what="the leader reconciles")
        assert not managers[other].is_leader and toys[other].calls == [] and toys[other].registered == 0
        managers[leader].stop(release=False)  # a crash: the lease is left to expire
        assert lease(api)["spec"]["holderIdentity"] == toys[leader].tag
        wait_for(lambda: managers[other].is_leader, what="the other takes over")
        assert managers[other].wait_until_running(30)
        api.create(configmap("b", "2"))
        wait_for(lambda: seen(api, "b") == f"{toys[other].tag}:2", what="the new leader reconciles")
        wait_for(lambda: seen(api, "a") == f"{toys[other].tag}:1", what="the new leader resyncs old objects")
        assert lease(api)["spec"]["holderIdentity"] == toys[other].tag
    finally:
        stop.set()
        for m in managers:
            m.stop()


def test_clean_stop_hands_over_at_once(api):
    """A leader stopped cleanly releases the Lease, so the other candidate need not wait for expiry."""
    slow = LeaderElectionSettings(lease_duration=600, renew_deadline=10, renew_interval=1, retry_interval=0.05)
    stop = threading.Event()
    first = ControllerManager(api, [ToyController()], identity="first", election=slow)
    first.start(stop)
    wait_for(lambda: first.is_leader, what="first leads")
    second = ControllerManager(api, [ToyController()], identity="second", election=slow)
    second.start(stop)
    try:
        first.stop()
        assert lease(api)["spec"]["holderIdentity"] == ""
        wait_for(lambda: second.is_leader, what="second leads long before a 600 s lease could expire")
    finally:
        stop.set()
        second.stop()


def test_restart_takes_back_its_own_lease_at_once(api):
    """A leader killed without release (kill -9), restarted with its stable identity, leads at once
    although its old Lease (600 s) has not expired; a second daemon on the host stays a follower."""
    slow = LeaderElectionSettings(lease_duration=600, renew_deadline=10, renew_interval=1, retry_interval=0.05)
    path = api.store.path
    stop = threading.Event()
    locks = [IdentityLock(path, hostname="host")]
    first = ControllerManager(api, [ToyController(tag="first")], identity=locks[0].acquire(), election=slow)
    first.start(stop)
    managers = [first]
    try:
        wait_for(lambda: first.is_leader, what="first leads")
        first.stop(release=False)  # a crash: the Lease still names host_0 ...
        locks[0].release()  # ... and the kernel dropped the dead process's lock
        assert lease(api)["spec"]["holderIdentity"] == "host_0"
        locks += [IdentityLock(path, hostname="host"), IdentityLock(path, hostname="host")]
        restarted = ControllerManager(api, [ToyController(tag="again")], identity=locks[1].acquire(),
                                      election=slow)
        second = ControllerManager(api, [ToyController(tag="second")], identity=locks[2].acquire(), election=slow)
        managers += [second, restarted]
        assert (restarted.identity, second.identity) == ("host_0", "host_1")
        second.start(stop)
        restarted.start(stop)
        wait_for(lambda: restarted.is_leader, what="the restarted daemon leads long before 600 s", timeout=10)
        assert restarted.wait_until_running(30)
        assert not second.is_leader, "two daemons on one host never both lead"
        api.create(configmap("x", "1"))
        wait_for(lambda: seen(api, "x") == "again:1", what="the restarted daemon reconciles")
        assert lease(api)["spec"]["leaseTransitions"] == 0, "its own Lease: no transition"
    finally:
        stop.set()
        for manager in managers:
            manager.stop()
        for lock in locks:
            lock.release()
