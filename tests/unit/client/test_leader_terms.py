"""Leader terms (kctl.client.leader): leaseTransitions as client-go keeps it, `term`, listeners told of every
change before on_stopped_leading, the renew-deadline watchdog and the timing checks."""

from __future__ import annotations

import threading

import pytest

from client_harness import wait_for

from kctl.client.leader import LeaderElectionSettings, LeaderElector, election_timing_problem

FAST = LeaderElectionSettings(lease_duration=2, renew_deadline=0.6, renew_interval=0.1, retry_interval=0.05)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def transitions(api) -> int:
    return api.get(api.resource("leases"), "kctl-controller-manager", namespace="kube-system")["spec"][
        "leaseTransitions"]


@pytest.mark.parametrize("steps, expected", [
    (["a"], [0]),
    (["a", "a", "a"], [0, 0, 0]),
    (["a", "release-a", "a"], [0, 0, 1]),
    (["a", "release-a", "b"], [0, 0, 1]),
    (["a", "expire", "b", "expire", "a"], [0, 0, 1, 1, 2]),
    (["a", "expire", "a"], [0, 0, 0]),
], ids=["create", "renewals", "own-after-release", "other-after-release", "expiries", "own-after-expiry"])
def test_lease_transitions_count_holder_changes(api, steps, expected):
    """leaseTransitions goes up when the holder changes (also from a released Lease), not on a renewal."""
    clock = Clock()
    electors = {name: LeaderElector(api, identity=name, clock=clock) for name in "ab"}
    seen = []
    for step in steps:
        if step == "expire":
            clock.now += 100
        elif step.startswith("release-"):
            assert electors[step[-1]].release()
        else:
            assert electors[step].try_acquire_or_renew()
        seen.append(transitions(api))
    assert seen == expected


def run_elector(elector: LeaderElector) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=elector.run, args=(stop,), daemon=True)
    thread.start()
    return stop, thread


def test_term_is_the_transitions_of_the_leadership_and_listeners_hear_of_it(api):
    """term is None until leading, then the Lease's transitions; listeners get it, then None before
    on_stopped_leading runs."""
    events: list[object] = []
    a = LeaderElector(api, identity="a", settings=FAST, on_stopped_leading=lambda: events.append("stopped"))
    assert a.term is None
    a.add_listener(events.append)
    stop, thread = run_elector(a)
    try:
        assert a.wait_for_term(lambda term: term is not None, timeout=30)
        assert a.term == 0 and events == [0]
        late: list[object] = []
        a.add_listener(late.append)  # added while leading: told at once
        assert late == [0]
    finally:
        stop.set()
        thread.join(30)
    assert a.term is None and events == [0, None, "stopped"] and late == [0, None]


def test_a_second_leader_gets_a_higher_term(api):
    """After a clean handover (release) the next leader's term is higher than the first's."""
    a = LeaderElector(api, identity="a", settings=FAST)
    b = LeaderElector(api, identity="b", settings=FAST)
    stop_a, thread_a = run_elector(a)
    assert a.wait_for_term(lambda term: term is not None, timeout=30)
    first = a.term
    stop_b, thread_b = run_elector(b)
    try:
        stop_a.set()
        thread_a.join(30)
        assert b.wait_for_term(lambda term: term is not None, timeout=30)
        assert b.term is not None and first is not None and b.term > first
    finally:
        stop_b.set()
        thread_b.join(30)


def test_watchdog_ends_leadership_while_a_renewal_hangs(api, monkeypatch):
    """A renewal stuck on an unanswering store does not keep the leader leading past renew_deadline."""
    events: list[object] = []
    a = LeaderElector(api, identity="a", settings=FAST)
    a.add_listener(events.append)
    stop, thread = run_elector(a)
    unblock = threading.Event()
    try:
        assert a.wait_for_term(lambda term: term is not None, timeout=30)

        def hanging(*args, **kwargs):
            unblock.wait(60)
            raise RuntimeError("store unavailable")

        monkeypatch.setattr(a, "_try_acquire_or_renew", hanging)
        wait_for(lambda: None in events, what="leadership ended by the watchdog")
        assert not a.is_leader and a.term is None
        assert not unblock.is_set()  # ended while the renewal still hung
    finally:
        unblock.set()
        stop.set()
        thread.join(30)


@pytest.mark.parametrize("timings, problem", [
    ((15, 10, 2, 2), ""),
    ((15.5, 10, 2, 2), "whole number of seconds"),
    ((0, 0.5, 0.1, 0.1), "at least 1"),
    ((15, 15, 2, 2), "renew deadline (15s) must be positive and shorter than the lease duration (15s)"),
    ((15, 10, 10, 2), "renew interval (10s)"),
    ((15, 10, 2, 12), "retry period (12s)"),
], ids=["defaults", "fractional-lease", "zero-lease", "deadline-not-shorter", "renew-too-long", "retry-too-long"])
def test_election_timings_are_checked_in_one_line(timings, problem):
    """Leader-election timings outside kube-controller-manager's bounds are named in one line."""
    said = election_timing_problem(*timings)
    assert (problem in said) if problem else said == ""
    assert "\n" not in said
    if problem:
        with pytest.raises(ValueError, match="must"):
            LeaderElectionSettings(lease_duration=timings[0], renew_deadline=timings[1],  # type: ignore[arg-type]
                                   renew_interval=timings[2], retry_interval=timings[3])
