"""`kctl daemon`'s cluster DNS flags: --cluster-dns, --cluster-domain, --cluster-dns-port,
--cluster-dns-advertise-address (checked, handed to the settings)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("args, message", [
    (["--cluster-dns", "dns"], "--cluster-dns 'dns' is not an IP address"),
    (["--cluster-dns", "10.97.0.10"], "--cluster-dns 10.97.0.10 is not in --service-cluster-ip-range 10.96.0.0/16"),
    (["--cluster-dns", "fd00::a"], "is not in --service-cluster-ip-range"),
    (["--cluster-domain", "bad_domain.local"], "--cluster-domain 'bad_domain.local' is not a DNS domain name"),
    (["--cluster-domain", "."], "is not a DNS domain name"),
    (["--cluster-dns-advertise-address", "host1"], "--cluster-dns-advertise-address 'host1' is not an IPv4"),
    (["--cluster-dns-port", "70000"], "--cluster-dns-port"),
], ids=["not-an-ip", "outside-service-range", "ipv6", "bad-domain", "empty-domain", "advertise-not-ip",
        "port-too-big"])
def test_bad_dns_flags_are_one_line_and_exit_2(kctl, args, message):
    """A bad DNS flag is refused before anything starts: one line naming it, exit 2."""
    result = kctl("daemon", *args)
    assert result.code == 2
    assert message in result.err, result.err
    assert "Traceback" not in result.err


def test_dns_flags_become_settings(kctl, monkeypatch):
    """The flags reach DaemonSettings (the domain without its final dot, lower case)."""
    from kctl.cli import daemon as daemon_cli
    from kctl.daemon import server as daemon_server

    given = []
    monkeypatch.setattr(daemon_server, "run", lambda settings, *, api: given.append(settings))
    monkeypatch.setattr(daemon_cli, "configure_logging", lambda level: None)
    result = kctl("daemon", "--cluster-dns", "10.96.0.53", "--cluster-domain", "Corp.Test.", "--cluster-dns-port",
                  "5353", "--cluster-dns-advertise-address", "192.0.2.1", "--cluster-dns-advertise-address",
                  "192.0.2.2")
    assert result.code == 0, result.err
    [settings] = given
    assert (settings.cluster_dns, settings.cluster_domain, settings.cluster_dns_port,
            settings.cluster_dns_advertise_addresses) == ("10.96.0.53", "corp.test", 5353, ("192.0.2.1", "192.0.2.2"))


def test_dns_defaults(kctl, monkeypatch):
    """Without flags: 10.96.0.10, cluster.local, port 10053, addresses found from the routes."""
    from kctl.cli import daemon as daemon_cli
    from kctl.daemon import server as daemon_server

    given = []
    monkeypatch.setattr(daemon_server, "run", lambda settings, *, api: given.append(settings))
    monkeypatch.setattr(daemon_cli, "configure_logging", lambda level: None)
    assert kctl("daemon").code == 0
    [settings] = given
    assert (settings.cluster_dns, settings.cluster_domain, settings.cluster_dns_port,
            settings.cluster_dns_advertise_addresses) == ("10.96.0.10", "cluster.local", 10053, ())


def test_cluster_dns_defaults_to_the_service_ranges_10th_address(kctl, monkeypatch):
    """Another --service-cluster-ip-range without --cluster-dns: kube-dns takes its 10th address, as kubeadm."""
    from kctl.cli import daemon as daemon_cli
    from kctl.daemon import server as daemon_server

    given = []
    monkeypatch.setattr(daemon_server, "run", lambda settings, *, api: given.append(settings))
    monkeypatch.setattr(daemon_cli, "configure_logging", lambda level: None)
    assert kctl("daemon", "--service-cluster-ip-range", "10.100.0.0/20").code == 0
    assert given[0].cluster_dns == "10.100.0.10"
