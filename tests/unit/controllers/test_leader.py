"""Leader election on a Lease: one leader among candidates, release on stop, takeover on expiry."""

from __future__ import annotations

import threading

import pytest

from lifecycle_harness import wait_for
from toy_controller import ToyController, configmap, seen

from kctl.controllers.leader import LeaderElectionSettings, LeaderElector, micro_time
from kctl.controllers.manager import ControllerManager

FAST = LeaderElectionSettings(lease_duration=1, renew_deadline=0.8, renew_interval=0.1, retry_interval=0.05)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def lease(api) -> dict:
    return api.get(api.resource("leases"), "kctl-controller-manager", namespace="kube-system")


def test_first_candidate_creates_lease_and_namespace(api):
    """With no Lease, a candidate creates kube-system (if missing) and the Lease, holding it."""
    clock = Clock()
    a = LeaderElector(api, identity="a", clock=clock)
    assert a.try_acquire_or_renew()
    spec = lease(api)["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 15
    assert spec["renewTime"] == micro_time(clock.now) and spec["leaseTransitions"] == 0
    api.get(api.resource("namespaces"), "kube-system")


@pytest.mark.parametrize("advance, release, b_wins", [
    (0.0, False, False),
    (14.0, False, False),
    (16.0, False, True),
    (0.0, True, True),
], ids=["fresh", "not-yet-expired", "expired", "released"])
def test_second_candidate_waits_for_expiry_or_release(api, advance, release, b_wins):
    """Another candidate takes a held Lease only once it expired or was released."""
    clock = Clock()
    a = LeaderElector(api, identity="a", clock=clock)
    b = LeaderElector(api, identity="b", clock=clock)
    assert a.try_acquire_or_renew()
    if release:
        assert a.release()
    clock.now += advance
    assert b.try_acquire_or_renew() is b_wins
    spec = lease(api)["spec"]
    assert spec["holderIdentity"] == ("b" if b_wins else ("" if release else "a"))
    if b_wins:
        assert spec["leaseTransitions"] == (0 if release else 1)
        assert not a.try_acquire_or_renew()  # the old holder sees it lost


def test_stale_read_loses_race(api, monkeypatch):
    """Two candidates that both saw the Lease expired: the second write gets Conflict and loses."""
    clock = Clock()
    a = LeaderElector(api, identity="a", clock=clock)
    assert a.try_acquire_or_renew()
    clock.now += 100
    stale = lease(api)
    b = LeaderElector(api, identity="b", clock=clock)
    c = LeaderElector(api, identity="c", clock=clock)
    assert b.try_acquire_or_renew()
    monkeypatch.setattr(c, "get_lease", lambda: stale)
    assert not c.try_acquire_or_renew()
    assert lease(api)["spec"]["holderIdentity"] == "b"


def test_renewal_failure_past_deadline_stops_leading(api, monkeypatch):
    """A leader that cannot renew within renew_deadline calls on_stopped_leading."""
    events: list[str] = []
    elector = LeaderElector(api, identity="a", settings=FAST, on_started_leading=lambda: events.append("start"),
                            on_stopped_leading=lambda: events.append("stop"))
    stop = threading.Event()
    thread = threading.Thread(target=elector.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: elector.is_leader, what="leading")

        def broken(*args, **kwargs):
            raise RuntimeError("store unavailable")

        monkeypatch.setattr(elector, "_try_acquire_or_renew", broken)
        wait_for(lambda: "stop" in events, what="stepped down")
        assert events[:2] == ["start", "stop"] and not elector.is_leader
    finally:
        stop.set()
        thread.join(10)


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
