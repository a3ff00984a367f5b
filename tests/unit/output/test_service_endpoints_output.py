"""`kctl get endpointslices` and `kctl describe service` as kubectl prints them (Endpoints from the slices)."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import builtin_registry
from kctl.output.describe import describe
from kctl.output.tables import TABLES

NOW = datetime(2026, 12, 2, 17, 0, 0, tzinfo=timezone.utc)
CREATED = "2026-12-02T16:00:00Z"
REGISTRY = builtin_registry()
SLICE_TABLE = TABLES["EndpointSlice.discovery.k8s.io"]


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """Pin the local zone to UTC (describe prints local times)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def endpoint(ip: str, *, ready: bool | None = True) -> dict:
    conditions = {} if ready is None else {"ready": ready}
    return {"addresses": [ip], "conditions": conditions}


def endpoint_slice(endpoints: list[dict], ports: list[dict] | None, *, name: str = "web-abcde") -> dict:
    obj = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
           "metadata": {"name": name, "namespace": "default", "creationTimestamp": CREATED,
                        "labels": {"kubernetes.io/service-name": "web"}},
           "endpoints": endpoints}
    if ports is not None:
        obj["ports"] = ports
    return obj


@pytest.mark.parametrize("endpoints, ports, expected", [
    ([endpoint("10.244.1.2"), endpoint("10.244.2.2")], [{"name": "http", "port": 8080, "protocol": "TCP"}],
     ["web-abcde", "IPv4", "8080", "10.244.1.2,10.244.2.2", "60m"]),
    ([], [], ["web-abcde", "IPv4", "<unset>", "<unset>", "60m"]),
    ([endpoint(f"10.244.1.{i}") for i in range(1, 6)],
     [{"name": n, "port": p} for n, p in (("a", 1), ("b", 2), ("c", 3), ("d", 4))],
     ["web-abcde", "IPv4", "1,2,3 + 1 more...", "10.244.1.1,10.244.1.2,10.244.1.3 + 2 more...", "60m"]),
    ([endpoint("10.244.1.2", ready=False)], [{"name": "http"}], ["web-abcde", "IPv4", "http", "10.244.1.2", "60m"]),
], ids=["two-endpoints", "placeholder", "more", "port-without-number"])
def test_endpointslice_row(endpoints, ports, expected):
    """NAME ADDRESSTYPE PORTS ENDPOINTS AGE, three of each at most, `<unset>` when empty (kubectl's printer)."""
    assert SLICE_TABLE.header(wide=False) == ("NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE")
    assert SLICE_TABLE.row(endpoint_slice(endpoints, ports), False, NOW) == expected


SERVICE = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                        "creationTimestamp": CREATED},
           "spec": {"type": "NodePort", "selector": {"app": "web"}, "clusterIP": "10.96.0.20",
                    "clusterIPs": ["10.96.0.20"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                    "sessionAffinity": "None", "externalTrafficPolicy": "Cluster", "internalTrafficPolicy": "Cluster",
                    "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080},
                              {"name": "metrics", "port": 9100, "targetPort": "metrics", "protocol": "TCP",
                               "nodePort": 30091}]}}

SERVICE_TEXT = """\
Name:                     web
Namespace:                default
Labels:                   app=web
Annotations:              <none>
Selector:                 app=web
Type:                     NodePort
IP Family Policy:         SingleStack
IP Families:              IPv4
IP:                       10.96.0.20
IPs:                      10.96.0.20
Port:                     http  80/TCP
TargetPort:               8080/TCP
NodePort:                 http  30080/TCP
Endpoints:                10.244.1.2:8080,10.244.2.2:8080
Port:                     metrics  9100/TCP
TargetPort:               metrics/TCP
NodePort:                 metrics  30091/TCP
Endpoints:                10.244.1.2:9100
Session Affinity:         None
External Traffic Policy:  Cluster
Internal Traffic Policy:  Cluster
Events:                   <none>
"""


def test_describe_service_shows_endpoints():
    """kubectl's Service layout; Endpoints per port: the ready addresses of the slices' port of that name."""
    slices = [endpoint_slice([endpoint("10.244.1.2"), endpoint("10.244.2.2"), endpoint("10.244.3.2", ready=False)],
                             [{"name": "http", "port": 8080, "protocol": "TCP"}]),
              endpoint_slice([endpoint("10.244.1.2", ready=None)], [{"name": "metrics", "port": 9100}], name="web-x")]
    assert describe(SERVICE, REGISTRY.lookup("svc"), [], now=NOW, endpoint_slices=slices) == SERVICE_TEXT


@pytest.mark.parametrize("slices, expected", [
    ([], "<none>"),
    (None, "<none>"),
    ([endpoint_slice([endpoint("10.244.1.2", ready=False)], [{"name": "http", "port": 8080}])], ""),
    ([endpoint_slice([endpoint(f"10.244.1.{i}") for i in range(1, 6)], [{"name": "http", "port": 8080}])],
     "10.244.1.1:8080,10.244.1.2:8080,10.244.1.3:8080 + 2 more..."),
    ([endpoint_slice([endpoint("10.244.1.2")], [])], "10.244.1.2"),
], ids=["no-slices", "not-looked-up", "none-ready", "more", "headless-no-ports"])
def test_describe_service_endpoints_cell(slices, expected):
    """`<none>` without slices, empty when none is ready, three then `+ N more...`, bare addresses without ports."""
    text = describe(SERVICE, REGISTRY.lookup("svc"), [], now=NOW, endpoint_slices=slices)
    first = next(line for line in text.splitlines() if line.startswith("Endpoints:"))
    assert first[len("Endpoints:"):].strip() == expected
