"""`kctl get svc`: CLUSTER-IP, EXTERNAL-IP and PORT(S) as kubectl's printService computes them.

The expectations follow pkg/printers/internalversion/printers.go (printService,
getServiceExternalIP, loadBalancerStatusStringer with its 16-character cut, makePortString).
"""

from __future__ import annotations

import io
import re
from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import builtin_registry
from kctl.output.formats import parse_output
from kctl.output.printers import print_objects

NOW = datetime(2026, 12, 2, 17, 0, 0, tzinfo=timezone.utc)
SERVICES = builtin_registry().lookup("services")


def service(spec: dict, status: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": "2026-12-02T16:00:00Z"},
            "spec": spec, "status": status or {}}


def row(obj: dict, *, wide: bool = False) -> list[str]:
    out = io.StringIO()
    print_objects([obj], SERVICES, parse_output("wide" if wide else None), out, err=io.StringIO(), now=NOW)
    return re.split(r" {3,}", out.getvalue().splitlines()[1].rstrip())


def ingress(*addresses: str) -> dict:
    return {"loadBalancer": {"ingress": [{"hostname": a} if a[0].isalpha() else {"ip": a} for a in addresses]}}


TCP80 = [{"port": 80, "protocol": "TCP", "targetPort": 8080}]


@pytest.mark.parametrize("spec, status, wide, expected", [
    ({"type": "ClusterIP", "clusterIPs": ["10.96.0.5"], "ports": TCP80}, None, False,
     ["web", "ClusterIP", "10.96.0.5", "<none>", "80/TCP", "60m"]),
    ({"type": "ClusterIP", "clusterIPs": ["None"], "ports": TCP80}, None, False,
     ["web", "ClusterIP", "None", "<none>", "80/TCP", "60m"]),
    ({"type": "ClusterIP", "clusterIPs": ["10.96.0.5"], "externalIPs": ["192.0.2.1", "192.0.2.2"],
      "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}]}, None, False,
     ["web", "ClusterIP", "10.96.0.5", "192.0.2.1,192.0.2.2", "80/TCP,443/TCP", "60m"]),
    ({"type": "NodePort", "clusterIPs": ["10.96.0.5"],
      "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080},
                {"port": 53, "protocol": "UDP", "nodePort": 30053}]},
     None, False, ["web", "NodePort", "10.96.0.5", "<none>", "80:30080/TCP,53:30053/UDP", "60m"]),
    ({"type": "LoadBalancer", "clusterIPs": ["10.96.0.5"],
      "ports": [{"port": 80, "protocol": "TCP", "nodePort": 31000}]},
     None, False, ["web", "LoadBalancer", "10.96.0.5", "<pending>", "80:31000/TCP", "60m"]),
    ({"type": "LoadBalancer", "clusterIPs": ["10.96.0.5"], "ports": TCP80}, ingress("10.77.0.12"), False,
     ["web", "LoadBalancer", "10.96.0.5", "10.77.0.12", "80/TCP", "60m"]),
    ({"type": "LoadBalancer", "clusterIPs": ["10.96.0.5"], "ports": TCP80},
     ingress("10.77.0.13", "10.77.0.11", "10.77.0.12", "10.77.0.11"), True,
     ["web", "LoadBalancer", "10.96.0.5", "10.77.0.11,10.77.0.12,10.77.0.13", "80/TCP", "60m", "<none>"]),
    ({"type": "LoadBalancer", "clusterIPs": ["10.96.0.5"], "ports": TCP80},
     ingress("10.77.0.13", "10.77.0.11", "10.77.0.12"), False,
     ["web", "LoadBalancer", "10.96.0.5", "10.77.0.11,10...", "80/TCP", "60m"]),
    ({"type": "LoadBalancer", "clusterIPs": ["10.96.0.5"], "externalIPs": ["192.0.2.9"], "ports": TCP80},
     ingress("lb.example"), False, ["web", "LoadBalancer", "10.96.0.5", "lb.example,192.0.2.9", "80/TCP", "60m"]),
    ({"type": "LoadBalancer", "clusterIPs": ["10.96.0.5"], "externalIPs": ["192.0.2.9"], "ports": TCP80},
     None, False, ["web", "LoadBalancer", "10.96.0.5", "192.0.2.9", "80/TCP", "60m"]),
    ({"type": "ExternalName", "externalName": "db.example.com"}, None, False,
     ["web", "ExternalName", "<none>", "db.example.com", "<none>", "60m"]),
    ({"type": "ClusterIP", "clusterIPs": ["10.96.0.5"], "ports": TCP80, "selector": {"app": "web", "tier": "fe"}},
     None, True, ["web", "ClusterIP", "10.96.0.5", "<none>", "80/TCP", "60m", "app=web,tier=fe"]),
], ids=["cluster-ip", "headless", "external-ips-and-two-ports", "node-ports", "lb-pending", "lb-one",
        "lb-sorted-once-wide", "lb-cut-at-16", "lb-hostname-then-external", "lb-external-only", "external-name",
        "wide-selector"])
def test_service_columns(spec, status, wide, expected):
    """Each Service prints kubectl's CLUSTER-IP, EXTERNAL-IP and PORT(S)."""
    assert row(service(spec, status), wide=wide) == expected
