"""`kctl get servicecidrs` and `kctl get ipaddresses` print kubectl's columns (printServiceCIDR, printIPAddress)."""

from __future__ import annotations

import io
from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import builtin_registry
from kctl.output.formats import parse_output
from kctl.output.printers import print_objects

NOW = datetime(2026, 1, 1, 0, 5, tzinfo=timezone.utc)


def table(resource: str, obj: dict) -> list[list[str]]:
    out = io.StringIO()
    print_objects([obj], builtin_registry().lookup(resource), parse_output(None), out, err=io.StringIO(), now=NOW)
    return [line.split() for line in out.getvalue().splitlines()]


@pytest.mark.parametrize("resource, obj, expected", [
    ("servicecidrs", {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
                      "metadata": {"name": "kubernetes", "creationTimestamp": "2026-01-01T00:00:00Z"},
                      "spec": {"cidrs": ["10.96.0.0/16"]}},
     [["NAME", "CIDRS", "AGE"], ["kubernetes", "10.96.0.0/16", "5m"]]),
    ("ipaddresses", {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress", "metadata": {"name": "10.96.0.10"},
                     "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "kube-system",
                                            "name": "kube-dns"}}},
     [["NAME", "PARENTREF"], ["10.96.0.10", "services/kube-system/kube-dns"]]),
    ("ipaddresses", {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress", "metadata": {"name": "10.96.0.11"},
                     "spec": {"parentRef": {"group": "gateway.networking.k8s.io", "resource": "Gateways",
                                            "name": "gw"}}},
     [["NAME", "PARENTREF"], ["10.96.0.11", "gateways.gateway.networking.k8s.io/gw"]]),
], ids=["servicecidr", "ipaddress-of-service", "ipaddress-cluster-scoped-parent"])
def test_rows(resource, obj, expected):
    """Each kind prints the columns kubectl prints for it."""
    assert table(resource, obj) == expected
