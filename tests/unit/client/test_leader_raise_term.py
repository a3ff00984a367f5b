"""Raising the leader term past a stale fence (kctl.client.leader.LeaderElector.raise_term): a compare-and-swap of
the Lease's leaseTransitions, only while this process holds it; a Conflict reads the Lease again and re-checks."""

from __future__ import annotations

import copy
import threading

import pytest

from kctl.client.leader import LeaderElectionSettings, LeaderElector
from kctl.machinery.errors import Conflict

#: renewals rare enough that a test changes the Lease under a leader before it notices
SLOW_RENEW = LeaderElectionSettings(lease_duration=60, renew_deadline=50, renew_interval=40, retry_interval=0.05)
LEASE = ("kctl-controller-manager", "kube-system")


def lease(api) -> dict:
    return api.get(api.resource("leases"), LEASE[0], namespace=LEASE[1])


def set_lease(api, **spec) -> None:
    new = copy.deepcopy(lease(api))
    new["spec"].update(spec)
    api.update(new)


class ConflictingAPI:
    """The API, except that the next `conflicts` updates changing leaseTransitions first run `meanwhile` (another
    writer) and then fail with Conflict, as a compare-and-swap on a Lease written since it was read."""

    def __init__(self, api, *, conflicts: int, meanwhile=lambda: None) -> None:
        self.api, self.conflicts, self.meanwhile = api, conflicts, meanwhile

    def __getattr__(self, name):
        return getattr(self.api, name)

    def update(self, obj: dict, **kwargs):
        stored = lease(self.api)["spec"].get("leaseTransitions")
        if obj.get("kind") == "Lease" and obj["spec"].get("leaseTransitions") != stored and self.conflicts:
            self.conflicts -= 1
            self.meanwhile()
            raise Conflict("the object has been modified; please apply your changes to the latest version")
        return self.api.update(obj, **kwargs)


@pytest.fixture
def leading(api):
    """start(api_for_elector) -> an elector "a" leading (term 0) with its listener's record; stopped after."""
    running: list[tuple[threading.Event, threading.Thread]] = []

    def start(elector_api=api) -> tuple[LeaderElector, list]:
        heard: list = []
        a = LeaderElector(elector_api, identity="a", settings=SLOW_RENEW)
        a.add_listener(heard.append)
        stop = threading.Event()
        thread = threading.Thread(target=a.run, args=(stop,), daemon=True)
        thread.start()
        running.append((stop, thread))
        assert a.wait_for_term(lambda term: term is not None, timeout=30)
        return a, heard

    yield start
    for stop, thread in running:
        stop.set()
        thread.join(30)


@pytest.mark.parametrize("lease_transitions, past, raised", [
    (None, 5, 6),  # the host's term is the highest
    (9, 5, 10),  # the Lease already counts higher (restored while leading): above both
    (None, 0, 1),  # a host at the leader's own term... still raised above it when asked
], ids=["host-highest", "lease-highest", "same-term"])
def test_the_holder_raises_its_term_by_compare_and_swap(api, leading, lease_transitions, past, raised):
    """While holding the Lease, raise_term writes leaseTransitions above the host's term (and the Lease's own),
    makes it the term and tells the listeners, leadership going on."""
    a, heard = leading()
    if lease_transitions is not None:
        set_lease(api, leaseTransitions=lease_transitions)
    assert a.raise_term(past, current=0) == raised
    assert a.term == raised and a.is_leader and heard == [0, raised]
    assert lease(api)["spec"]["leaseTransitions"] == raised and lease(api)["spec"]["holderIdentity"] == "a"
    assert a.try_acquire_or_renew() and a.term == raised  # a renewal keeps the raised count
    assert lease(api)["spec"]["leaseTransitions"] == raised


def test_a_process_not_holding_the_lease_raises_nothing(api, leading):
    """A leader whose Lease another took (it has not noticed yet) writes nothing and keeps its term."""
    a, heard = leading()
    set_lease(api, holderIdentity="b", leaseTransitions=1)
    before = lease(api)
    assert a.raise_term(5, current=0) is None
    assert lease(api) == before and a.term == 0 and heard == [0]


def test_a_follower_or_another_term_raises_nothing(api, leading):
    """Not leading, or leading with another term than the refused one: nothing is read or written."""
    follower = LeaderElector(api, identity="f", settings=SLOW_RENEW)
    assert follower.raise_term(5) is None
    a, heard = leading()
    rv = lease(api)["metadata"]["resourceVersion"]
    assert a.raise_term(5, current=3) is None
    assert lease(api)["metadata"]["resourceVersion"] == rv and heard == [0]


def test_a_conflict_reads_the_lease_again_and_raises_when_still_held(api, leading):
    """A Conflict (someone wrote the Lease since it was read, here its own holder name) -> read again; still
    this process's: raised on the fresh copy."""
    guarded = ConflictingAPI(api, conflicts=1, meanwhile=lambda: set_lease(api, renewTime=lease(api)["spec"][
        "renewTime"]))
    a, heard = leading(guarded)
    assert a.raise_term(5, current=0) == 6
    assert guarded.conflicts == 0 and lease(api)["spec"]["leaseTransitions"] == 6 and heard == [0, 6]


def test_a_conflict_from_a_new_holder_raises_nothing(api, leading):
    """A Conflict because another daemon took the Lease meanwhile -> read again, not held: nothing written."""
    guarded = ConflictingAPI(api, conflicts=1, meanwhile=lambda: set_lease(api, holderIdentity="b",
                                                                             leaseTransitions=1))
    a, heard = leading(guarded)
    assert a.raise_term(5, current=0) is None
    assert lease(api)["spec"]["leaseTransitions"] == 1 and lease(api)["spec"]["holderIdentity"] == "b"
    assert heard == [0]


def test_conflicts_every_time_are_raised_for_a_later_try(api, leading):
    """A Conflict on every attempt: raised (nothing changed), the caller tries again later."""
    guarded = ConflictingAPI(api, conflicts=99)
    a, heard = leading(guarded)
    with pytest.raises(Conflict):
        a.raise_term(5, current=0, attempts=3)
    assert guarded.conflicts == 96 and a.term == 0 and lease(api)["spec"]["leaseTransitions"] == 0
