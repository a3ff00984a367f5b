"""The leader identity of a daemon's ControlPlane: `<--node or hostname>_<slot>`, so daemons of hosts that share a
hostname (a test bed's network namespaces, cloned machines) still have distinct identities when given --node."""

from __future__ import annotations

import socket

import pytest

from kctl.daemon.controlplane import ControlPlane
from kctl.daemon.settings import DaemonSettings


@pytest.mark.parametrize("node, expected", [("h2", "h2_0"), (None, f"{socket.gethostname()}_0")],
                         ids=["named-by-node", "named-by-hostname"])
def test_identity_is_named_for_the_node_or_the_hostname(api, node, expected):
    """--node names the leader identity; without it the hostname does (slot 0: the first daemon here)."""
    plane = ControlPlane(api, DaemonSettings(node=node, controllers=(), cluster_dns_port=None))
    try:
        assert plane.identity == expected
    finally:
        plane.stop()
