"""The heartbeat's Lease and Node status writes ride over Conflicts (kctl.client.retry), within bounds."""

from __future__ import annotations

import pytest

from kctl.agent import node as nodes
from kctl.machinery.errors import Conflict
from kctl.runtime.hostprobe import HostCheck
from kctl.runtime.interface import HostInfo

INFO = HostInfo(cpus=2, memory_bytes=8 * 1024 ** 3, os="Debian", kernel="6.1", arch="amd64",
                runtime_version="podman://4.3.1", hostname="h1")
T0 = 1_796_227_200.0


class ConflictingAPI:
    """The real API, except that the first `conflicts` writes of `verb` raise Conflict (another writer won)."""

    def __init__(self, api, verb: str, conflicts: int) -> None:
        self._api, self._verb, self.left, self.calls = api, verb, conflicts, 0

    def __getattr__(self, name: str):
        real = getattr(self._api, name)
        if name != self._verb:
            return real

        def write(*args, **kwargs):
            self.calls += 1
            if self.left:
                self.left -= 1
                raise Conflict("the object has been modified; please apply your changes to the latest version")
            return real(*args, **kwargs)
        return write


@pytest.fixture
def h1(api):
    """Node h1 with its Lease, as a first heartbeat leaves them."""
    node = nodes.register_node(api, "h1", podman_url="unix:///run/podman/podman.sock")
    nodes.Heartbeat(api, "h1", None, clock=lambda: T0).renew_lease()
    return node


def lease(api) -> dict:
    return api.get(api.resource("leases"), "h1", namespace="kube-node-lease")


@pytest.mark.parametrize("conflicts, renewed, calls", [
    (0, True, 1), (1, True, 2), (2, True, 3), (3, False, 3),
], ids=["none", "one", "two", "every-attempt"])
def test_lease_renewal_retries_a_conflict(api, h1, conflicts, renewed, calls):
    """A Conflict re-reads and renews again, up to 3 attempts; after that the Conflict is the caller's."""
    before = lease(api)["spec"]["renewTime"]
    flaky = ConflictingAPI(api, "update", conflicts)
    beat = nodes.Heartbeat(flaky, "h1", None, clock=lambda: T0 + 60)
    if renewed:
        assert beat.renew_lease()["spec"]["renewTime"] == lease(api)["spec"]["renewTime"] != before
    else:
        with pytest.raises(Conflict):
            beat.renew_lease()
        assert lease(api)["spec"]["renewTime"] == before
    assert flaky.calls == calls


@pytest.mark.parametrize("conflicts, posted, calls", [
    (0, True, 1), (2, True, 3), (3, False, 3),
], ids=["none", "two", "every-attempt"])
def test_status_post_retries_a_conflict(api, h1, conflicts, posted, calls):
    """A Conflict re-reads the Node and posts again, up to 3 attempts; then None (the next beat posts it)."""
    flaky = ConflictingAPI(api, "update_status", conflicts)
    beat = nodes.Heartbeat(flaky, "h1", None, clock=lambda: T0 + 60)
    result = beat.post_status(HostCheck(reachable=True, answering=True, info=INFO, images=[]), force=True)
    assert (result is not None) is posted
    assert flaky.calls == calls
