"""Closing a ClusterDNS, and stopping the daemon's cluster DNS runner, is prompt.

`kctl daemon` closes its cluster DNS when it stops (kctl.daemon.clusterdns); each serving loop
notices a close only at its next poll, and the runner's loop only at its next wake-up, so long
intervals there add up on every Ctrl-C (and every test that stops a daemon).
"""

from __future__ import annotations

import socketserver
import threading

from kctl.dns.server import SERVE_POLL_SECONDS, ClusterDNS


class View:
    """No Services: the zone is empty."""

    def service(self, namespace: str, name: str) -> dict | None:
        return None

    def endpoint_slices(self, namespace: str, service: str) -> list[dict]:
        return []


def test_serving_loops_poll_often_enough_for_a_prompt_close(monkeypatch):
    """Both serving loops (UDP, TCP) poll at most every SERVE_POLL_SECONDS, and close() ends them."""
    seen: list[float] = []
    both = threading.Event()
    original = socketserver.BaseServer.serve_forever

    def recording(self, poll_interval: float = 0.5) -> None:
        seen.append(poll_interval)
        if len(seen) == 2:
            both.set()
        original(self, poll_interval)

    monkeypatch.setattr(socketserver.BaseServer, "serve_forever", recording)
    dns = ClusterDNS(View(), port=0, upstreams=[])
    dns.start()
    threads = list(dns._threads)
    try:
        assert both.wait(20)
    finally:
        dns.close()
    assert len(seen) == 2 and max(seen) <= SERVE_POLL_SECONDS <= 0.1
    assert not any(thread.is_alive() for thread in threads)


def test_stopping_the_control_plane_wakes_the_cluster_dns_loop(api, monkeypatch):
    """ControlPlane.stop() returns at once, not after the cluster DNS loop's wake-up interval."""
    import time

    from kctl.daemon import clusterdns
    from kctl.daemon.controlplane import ControlPlane
    from kctl.daemon.settings import DaemonSettings

    monkeypatch.setattr(clusterdns, "LOOP_SECONDS", 60.0)  # far longer than a stop may take
    plane = ControlPlane(api, DaemonSettings(controllers=(), cluster_dns_port=0,
                                             cluster_dns_advertise_addresses=("192.0.2.10",)),
                         leader_election=False, identity="test")
    plane.start()
    try:
        deadline = time.monotonic() + 30
        while plane.dns.port is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert plane.dns.port is not None, "cluster DNS never listened"
        time.sleep(0.2)  # the loop is asleep in its wait now
    finally:
        started = time.monotonic()
        plane.stop()
        took = time.monotonic() - started
    # a stop that sleeps out the wait takes the 10 s join timeout; a working one well under a second
    assert took < 5, f"stop took {took:.1f} s"
    assert plane.dns.port is None
