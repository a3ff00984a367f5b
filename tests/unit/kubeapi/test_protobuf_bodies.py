"""Protobuf request bodies (kctl.kubeapi.protobuf): the envelope, nested messages, maps, lists, bad input."""

from __future__ import annotations

import pytest

from kctl.kubeapi.protobuf import UnsupportedProtobuf, decode
from kctl.machinery.errors import BadRequest


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value: int | bytes | str) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _envelope(api_version: str, kind: str, message: bytes) -> bytes:
    return b"k8s\x00" + _field(1, _field(1, api_version) + _field(2, kind)) + _field(2, message)


def test_eviction_with_delete_options():
    """An Eviction: metadata, then deleteOptions with a negative-safe int64, preconditions and dryRun."""
    meta = _field(1, "web-1") + _field(3, "shop") + _field(11, _field(1, "app") + _field(2, "web"))
    options = _field(1, 0) + _field(2, _field(1, "uid-1")) + _field(4, "Foreground") + _field(5, "All")
    obj = decode(_envelope("policy/v1", "Eviction", _field(1, meta) + _field(2, options) + _field(9, "skipped")))
    assert obj == {"apiVersion": "policy/v1", "kind": "Eviction",
                   "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web"}},
                   "deleteOptions": {"gracePeriodSeconds": 0, "preconditions": {"uid": "uid-1"},
                                     "propagationPolicy": "Foreground", "dryRun": ["All"]}}


def test_negative_int64_and_bytes_maps():
    """int64 values are two's complement; a bytes map (Secret.data) is base64 as in JSON."""
    options = _field(1, -1)
    obj = decode(_envelope("policy/v1", "Eviction", _field(2, options)))
    assert obj["deleteOptions"]["gracePeriodSeconds"] == -1
    secret = decode(_envelope("v1", "Secret", _field(2, _field(1, "k") + _field(2, b"\x00\xff"))))
    assert secret["data"] == {"k": "AP8="}


@pytest.mark.parametrize("raw,error", [
    (b'{"kind": "Namespace"}', BadRequest),
    (b"k8s\x00\x0a\x05ab", BadRequest),
    (_envelope("v1", "ReplicationController", b""), UnsupportedProtobuf),
], ids=["no-magic", "truncated", "kind-not-read"])
def test_bad_bodies(raw, error):
    """Not Kubernetes' protobuf, truncated, or a kind kctl does not read in protobuf: a clear error."""
    with pytest.raises(error):
        decode(raw)


def test_go_zero_values_are_dropped_but_pointer_zeros_kept():
    """Go writes every non-pointer field: its zero values are dropped (JSON omits them), a pointer's 0 is kept."""
    container = (_field(1, "c") + _field(2, "busybox") + _field(5, "") + _field(16, 0)
                 + _field(8, _field(2, _field(1, "cpu") + _field(2, _field(1, "250m")))))
    port = _field(1, "") + _field(2, 0) + _field(3, 8080) + _field(4, "TCP")
    container += _field(6, port)
    template = _field(2, _field(2, container) + _field(3, ""))
    spec = _field(1, 0) + _field(3, template) + _field(5, 0)
    obj = decode(_envelope("apps/v1", "Deployment", _field(1, _field(1, "web") + _field(2, "")) + _field(2, spec)))
    assert obj["metadata"] == {"name": "web"}
    assert obj["spec"] == {"replicas": 0, "template": {"spec": {"containers": [
        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "250m"}},
         "ports": [{"containerPort": 8080, "protocol": "TCP"}]}]}}}


@pytest.mark.parametrize("value,expected", [
    (_field(1, 0) + _field(2, 8080) + _field(3, ""), 8080),
    (_field(1, 1) + _field(2, 0) + _field(3, "https"), "https"),
], ids=["int", "string"])
def test_int_or_string(value, expected):
    """intstr.IntOrString: type 0 is its intVal, type 1 its strVal (a Service's targetPort)."""
    port = _field(3, 443) + _field(4, value)
    obj = decode(_envelope("v1", "Service", _field(2, _field(1, port))))
    assert obj["spec"]["ports"] == [{"port": 443, "targetPort": expected}]


def _meta(name: str, namespace: str = "") -> bytes:
    return _field(1, _field(1, name) + (_field(3, namespace) if namespace else b""))


def _quantity(text: str) -> bytes:
    return _field(1, text)


def _intorstr(value: int | str) -> bytes:
    return _field(1, 1) + _field(3, value) if isinstance(value, str) else _field(1, 0) + _field(2, value)


def _entry(key: str, value: bytes | str) -> bytes:
    return _field(1, key) + _field(2, value)


def _backend(service: str, port: int | str) -> bytes:
    port_field = _field(1, port) if isinstance(port, str) else _field(2, port)
    return _field(4, _field(1, service) + _field(2, port_field))


# kubectl create quota|pdb|ingress|priorityclass: the bodies kubectl sends, and the JSON they mean
CREATE_BODIES = [
    ("quota", "v1", "ResourceQuota",
     _meta("q1", "w2") + _field(2, _field(1, _entry("pods", _quantity("10")))
                                + _field(1, _entry("requests.cpu", _quantity("1"))) + _field(2, "NotTerminating")),
     {"metadata": {"name": "q1", "namespace": "w2"},
      "spec": {"hard": {"pods": "10", "requests.cpu": "1"}, "scopes": ["NotTerminating"]}}),
    ("pdb-min-available", "policy/v1", "PodDisruptionBudget",
     _meta("pdb1") + _field(2, _field(1, _intorstr(1)) + _field(2, _field(1, _entry("app", "x")))),
     {"metadata": {"name": "pdb1"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}}}),
    ("pdb-max-unavailable-zero-percent", "policy/v1", "PodDisruptionBudget",
     _meta("pdb2") + _field(2, _field(3, _intorstr("50%")) + _field(1, _intorstr(0))),
     {"metadata": {"name": "pdb2"}, "spec": {"maxUnavailable": "50%", "minAvailable": 0}}),
    ("ingress", "networking.k8s.io/v1", "Ingress",
     _meta("ing1", "w2") + _field(2, _field(1, _backend("svc1", 8080))
                                  + _field(2, _field(1, "foo.com") + _field(2, "my-cert"))
                                  + _field(3, _field(1, "foo.com") + _field(2, _field(1, _field(
                                      1, _field(1, "/bar") + _field(2, _backend("svc1", "http"))
                                      + _field(3, "Exact")))))
                                  + _field(4, "default")),
     {"metadata": {"name": "ing1", "namespace": "w2"},
      "spec": {"defaultBackend": {"service": {"name": "svc1", "port": {"number": 8080}}},
               "tls": [{"hosts": ["foo.com"], "secretName": "my-cert"}],
               "rules": [{"host": "foo.com", "http": {"paths": [
                   {"path": "/bar", "pathType": "Exact",
                    "backend": {"service": {"name": "svc1", "port": {"name": "http"}}}}]}}],
               "ingressClassName": "default"}}),
    ("priorityclass", "scheduling.k8s.io/v1", "PriorityClass",
     _meta("pc1") + _field(2, 100) + _field(3, 0) + _field(4, "hi") + _field(5, "Never"),
     {"metadata": {"name": "pc1"}, "value": 100, "description": "hi", "preemptionPolicy": "Never"}),
    ("priorityclass-value-zero", "scheduling.k8s.io/v1", "PriorityClass",
     _meta("pc0") + _field(2, 0) + _field(3, 1),
     {"metadata": {"name": "pc0"}, "value": 0, "globalDefault": True}),
]


@pytest.mark.parametrize("api_version,kind,message,expected", [c[1:] for c in CREATE_BODIES],
                         ids=[c[0] for c in CREATE_BODIES])
def test_create_bodies_of_kubectl(api_version, kind, message, expected):
    """kubectl create quota|pdb|ingress|priorityclass: each protobuf body reads as the JSON object it means."""
    assert decode(_envelope(api_version, kind, message)) == {"apiVersion": api_version, "kind": kind, **expected}
