"""`kctl get endpointslices` and `kctl describe service` (its Endpoints) as a user runs them."""

from __future__ import annotations

import re

OBJECTS = """
apiVersion: v1
kind: Service
metadata: {name: web, labels: {app: web}}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-abcde, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: [10.244.1.2]
  conditions: {ready: true}
- addresses: [10.244.2.2]
  conditions: {ready: true}
- addresses: [10.244.3.2]
  conditions: {ready: false}
"""


def test_get_endpointslices(kctl, tmp_path):
    """NAME ADDRESSTYPE PORTS ENDPOINTS AGE, as kubectl prints an EndpointSlice."""
    (tmp_path / "objs.yaml").write_text(OBJECTS)
    assert kctl("apply", "-f", str(tmp_path / "objs.yaml")).code == 0
    result = kctl("get", "endpointslices")
    assert result.code == 0, result.err
    header, row = result.out.splitlines()
    assert header.split() == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    assert row.split()[:4] == ["web-abcde", "IPv4", "8080", "10.244.1.2,10.244.2.2,10.244.3.2"]
    assert kctl("get", "endpointslices.discovery.k8s.io", "web-abcde").code == 0


def test_describe_service_shows_its_endpoints(kctl, tmp_path):
    """`kctl describe service` lists each port's ready endpoints, from the Service's slices."""
    (tmp_path / "objs.yaml").write_text(OBJECTS)
    assert kctl("apply", "-f", str(tmp_path / "objs.yaml")).code == 0
    result = kctl("describe", "service", "web")
    assert result.code == 0, result.err
    assert re.search(r"^Endpoints:\s+10\.244\.1\.2:8080,10\.244\.2\.2:8080$", result.out, re.M), result.out
    assert re.search(r"^Port:\s+http  80/TCP$", result.out, re.M)
