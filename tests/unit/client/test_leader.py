"""Leader election on a Lease (kctl.client.leader): one leader among candidates, release on stop,
takeover on expiry; a stable identity per host and store. The manager's use of it is in
tests/unit/controllers/test_manager_leadership.py."""

from __future__ import annotations

import threading

import pytest

from client_harness import wait_for

from kctl.client.leader import IdentityLock, LeaderElectionSettings, LeaderElector, micro_time

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
        assert spec["leaseTransitions"] == 1  # a new holder, also after a release (client-go)
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


# -- a stable identity per host and store -----------------------------------------------------

HOLD_LOCK = """
import sys, time
from kctl.client.leader import IdentityLock
lock = IdentityLock(sys.argv[1], hostname="host")
print(lock.acquire(), flush=True)
time.sleep(600)
"""


def test_identity_lock_is_stable_and_exclusive(tmp_path):
    """One slot per live process: a second daemon gets another identity; a killed one's comes back."""
    import signal
    import subprocess
    import sys

    store = tmp_path / "kctl.db"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(store)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "host_0"
        with IdentityLock(store, hostname="host") as second:
            assert second == "host_1", "the first daemon still lives: another identity"
            with IdentityLock(store, hostname="host") as third:
                assert third == "host_2"
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        with IdentityLock(store, hostname="host") as restarted:
            assert restarted == "host_0", "kill -9 dropped the lock: the same identity again"
        assert oct((tmp_path / "kctl.db.leader-0.lock").stat().st_mode & 0o777) == "0o600"
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(30)
        holder.stdout.close()


def test_identity_lock_without_a_writable_folder_falls_back(tmp_path, caplog):
    """No lock file can be made: a random identity, said in the log, never a crash."""
    lock = IdentityLock(tmp_path / "missing" / "kctl.db", hostname="host")
    identity = lock.acquire()
    assert identity and not identity.startswith("host_0")
    assert "is not stable" in caplog.text
    lock.release()
