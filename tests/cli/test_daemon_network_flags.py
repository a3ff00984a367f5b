"""`kctl daemon`'s address flags: --cluster-cidr, --node-cidr-mask-size, --service-cluster-ip-range,
--service-node-port-range (checked, handed to the settings, the Service ranges written to the store)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("args, message", [
    (["--cluster-cidr", "10.244.0.0"], '--cluster-cidr "10.244.0.0"'),
    (["--cluster-cidr", "10.244.0.1/16"], "is not a CIDR"),
    (["--node-cidr-mask-size", "12"], "--node-cidr-mask-size 12 must be between"),
    (["--cluster-cidr", "10.0.0.0/8", "--node-cidr-mask-size", "30"], "more than 65536 node subnets"),
    (["--service-cluster-ip-range", "10.0.0.0/8"], "is too large"),
    (["--service-cluster-ip-range", "fd00::/112"], "single-stack IPv4"),
    (["--service-node-port-range", "40000-30000"], "is not a port range"),
    (["--service-node-port-range", "many"], "is not a port range"),
], ids=["no-mask", "host-bits", "mask-below-cluster", "too-many-subnets", "service-range-too-large", "ipv6",
        "reversed-ports", "not-ports"])
def test_bad_address_flags_are_one_line_and_exit_2(kctl, args, message):
    """A bad address flag is refused before anything starts: one line naming it, exit 2."""
    result = kctl("daemon", *args)
    assert result.code == 2
    assert result.err.startswith("error: ") and message in result.err, result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err


def test_address_flags_become_settings_and_store_ranges(kctl, monkeypatch, server):
    """The flags reach DaemonSettings, and the Service ranges are in the store before the daemon runs."""
    from kctl.cli import daemon as daemon_cli
    from kctl.daemon import server as daemon_server

    given = []
    monkeypatch.setattr(daemon_server, "run", lambda settings, *, api: given.append(settings))
    monkeypatch.setattr(daemon_cli, "configure_logging", lambda level: None)
    result = kctl("daemon", "--cluster-cidr", "10.200.0.0/16", "--node-cidr-mask-size", "26",
                  "--service-cluster-ip-range", "10.100.0.0/20", "--service-node-port-range", "31000-31999")
    assert result.code == 0, result.err
    [settings] = given
    assert (settings.cluster_cidr, settings.node_cidr_mask_size) == ("10.200.0.0/16", 26)
    assert (settings.service_cluster_ip_range, settings.service_node_port_range) == ("10.100.0.0/20", "31000-31999")
    assert server.get(server.resource("servicecidrs"), "kubernetes")["spec"]["cidrs"] == ["10.100.0.0/20"]
    created = server.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                             "spec": {"type": "NodePort", "ports": [{"port": 80}]}})
    assert created["spec"]["clusterIP"].startswith("10.100.")
    assert 31000 <= created["spec"]["ports"][0]["nodePort"] <= 31999


def test_defaults(kctl, monkeypatch):
    """Without flags: Kubernetes' defaults (10.244.0.0/16 by /24, 10.96.0.0/16, 30000-32767)."""
    from kctl.cli import daemon as daemon_cli
    from kctl.daemon import server as daemon_server

    given = []
    monkeypatch.setattr(daemon_server, "run", lambda settings, *, api: given.append(settings))
    monkeypatch.setattr(daemon_cli, "configure_logging", lambda level: None)
    assert kctl("daemon").code == 0
    [settings] = given
    assert (settings.cluster_cidr, settings.node_cidr_mask_size, settings.service_cluster_ip_range,
            settings.service_node_port_range) == ("10.244.0.0/16", 24, "10.96.0.0/16", "30000-32767")
    assert "node-ipam-controller" in settings.controllers
