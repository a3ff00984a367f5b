"""resolve_env and $(VAR) expansion: every valueFrom kind, envFrom with prefix, missing references."""

from __future__ import annotations

import pytest
from podharness import config_map, make_pod, secret

from kctl.agent.env import expand, resolve_env

OBJECTS = {
    ("ConfigMap", "default", "settings"): config_map("settings", {"mode": "fast", "level": "3"}),
    ("Secret", "default", "db"): secret("db", {"password": "s3cret", "user": "admin"}),
}


def lookup(kind: str, namespace: str, name: str) -> dict | None:
    return OBJECTS.get((kind, namespace, name))


def resolve(container: dict, **pod_fields: object) -> tuple[dict[str, str], list[str]]:
    pod = make_pod(containers=[container], **pod_fields)
    return resolve_env(pod, container, lookup=lookup, node_name="n1", host_ip="10.77.0.11", pod_ip="10.88.0.5",
                       allocatable=lambda: {"cpu": "4", "memory": "8Gi"})


def var(name: str, **value_from: object) -> dict:
    return {"name": name, "valueFrom": value_from}


@pytest.mark.parametrize(("entry", "expected"), [
    ({"name": "A", "value": "plain"}, "plain"),
    (var("A", configMapKeyRef={"name": "settings", "key": "mode"}), "fast"),
    (var("A", secretKeyRef={"name": "db", "key": "password"}), "s3cret"),
    (var("A", fieldRef={"fieldPath": "metadata.name"}), "web"),
    (var("A", fieldRef={"fieldPath": "metadata.namespace"}), "default"),
    (var("A", fieldRef={"fieldPath": "metadata.uid"}), "web-0123-4567-89ab-cdef"),
    (var("A", fieldRef={"fieldPath": "metadata.labels['app']"}), "web"),
    (var("A", fieldRef={"fieldPath": "metadata.labels['missing']"}), ""),
    (var("A", fieldRef={"fieldPath": "metadata.annotations['note']"}), "hi"),
    (var("A", fieldRef={"fieldPath": "spec.nodeName"}), "n1"),
    (var("A", fieldRef={"fieldPath": "spec.serviceAccountName"}), "robot"),
    (var("A", fieldRef={"fieldPath": "status.podIP"}), "10.88.0.5"),
    (var("A", fieldRef={"fieldPath": "status.hostIP"}), "10.77.0.11"),
    (var("A", resourceFieldRef={"resource": "limits.cpu"}), "1"),
    (var("A", resourceFieldRef={"resource": "limits.cpu", "divisor": "1m"}), "250"),
    (var("A", resourceFieldRef={"resource": "limits.memory"}), str(64 * 1024 * 1024)),
    (var("A", resourceFieldRef={"resource": "limits.memory", "divisor": "1Mi"}), "64"),
    (var("A", resourceFieldRef={"resource": "requests.cpu", "divisor": "1m"}), "100"),
], ids=["value", "configmap-key", "secret-key-decoded", "field-name", "field-namespace", "field-uid", "field-label",
        "field-label-missing", "field-annotation", "field-node", "field-service-account", "field-pod-ip",
        "field-host-ip", "cpu-limit-rounded-up-cores", "cpu-limit-millis", "memory-limit-bytes", "memory-limit-mi",
        "cpu-request"])
def test_value_sources(entry: dict, expected: str) -> None:
    """Each env source resolves to the kubelet's value."""
    app = {"name": "app", "image": "x", "env": [entry],
           "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}, "requests": {"cpu": "100m"}}}
    env, errors = resolve(app, serviceAccountName="robot")
    assert errors == [] and env == {"A": expected}


def test_resource_without_limit_is_node_allocatable() -> None:
    """No limit: limits.* is the node's allocatable, as the kubelet does."""
    app = {"name": "app", "image": "x", "env": [var("CPU", resourceFieldRef={"resource": "limits.cpu"}),
                                                var("MEM", resourceFieldRef={"resource": "limits.memory",
                                                                             "divisor": "1Gi"})]}
    assert resolve(app) == ({"CPU": "4", "MEM": "8"}, [])


@pytest.mark.parametrize(("entry", "error"), [
    (var("A", configMapKeyRef={"name": "nope", "key": "k"}), 'configmap "nope" not found'),
    (var("A", configMapKeyRef={"name": "settings", "key": "nope"}),
     "couldn't find key nope in ConfigMap default/settings"),
    (var("A", secretKeyRef={"name": "nope", "key": "k"}), 'secret "nope" not found'),
    (var("A", secretKeyRef={"name": "db", "key": "nope"}), "couldn't find key nope in Secret default/db"),
    (var("A", fieldRef={"fieldPath": "spec.bogus"}), "unsupported fieldPath: spec.bogus"),
    ({"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}},
     "unsupported container resource : limits.gpu"),
], ids=["configmap-missing", "configmap-key-missing", "secret-missing", "secret-key-missing", "bad-field",
        "bad-resource"])
def test_missing_references_are_errors(entry: dict, error: str) -> None:
    """A missing non-optional reference is reported in the kubelet's words and the variable left out."""
    env, errors = resolve({"name": "app", "image": "x", "env": [entry, {"name": "B", "value": "b"}]})
    assert errors == [error] and env == {"B": "b"}


@pytest.mark.parametrize("entry", [
    var("A", configMapKeyRef={"name": "nope", "key": "k", "optional": True}),
    var("A", configMapKeyRef={"name": "settings", "key": "nope", "optional": True}),
    var("A", secretKeyRef={"name": "nope", "key": "k", "optional": True}),
], ids=["configmap", "configmap-key", "secret"])
def test_optional_missing_reference_is_skipped(entry: dict) -> None:
    """An optional reference that is missing leaves the variable unset, with no error."""
    assert resolve({"name": "app", "image": "x", "env": [entry]}) == ({}, [])


def test_env_from_with_prefix_and_precedence() -> None:
    """envFrom sources apply in order with their prefix; env entries override them."""
    app = {"name": "app", "image": "x",
           "envFrom": [{"configMapRef": {"name": "settings"}}, {"secretRef": {"name": "db"}, "prefix": "DB_"},
                       {"configMapRef": {"name": "absent", "optional": True}}],
           "env": [{"name": "mode", "value": "override"}]}
    env, errors = resolve(app)
    assert errors == []
    assert env == {"mode": "override", "level": "3", "DB_password": "s3cret", "DB_user": "admin"}


def test_env_from_missing_is_error() -> None:
    """A missing non-optional envFrom source is an error."""
    _, errors = resolve({"name": "app", "image": "x", "envFrom": [{"secretRef": {"name": "gone"}}]})
    assert errors == ['secret "gone" not found']


def test_expansion_uses_earlier_variables_only() -> None:
    """$(VAR) sees envFrom and earlier env entries; later ones and valueFrom values are not expanded."""
    app = {"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "settings"}}],
           "env": [{"name": "A", "value": "a"}, {"name": "B", "value": "$(A)-$(mode)-$(C)"},
                   {"name": "C", "value": "c"}, var("D", fieldRef={"fieldPath": "metadata.name"})]}
    env, _ = resolve(app)
    assert env["B"] == "a-fast-$(C)"


@pytest.mark.parametrize(("text", "expected"), [
    ("$(A)", "1"), ("x$(A)y$(B)z", "x1y2z"), ("$$(A)", "$(A)"), ("$$", "$"), ("$(MISSING)", "$(MISSING)"),
    ("$(A", "$(A"), ("$A", "$A"), ("trailing$", "trailing$"), ("", ""), ("$$$(A)", "$1"),
], ids=["simple", "several", "escaped-ref", "escaped-dollar", "unknown", "unterminated", "no-parens", "trailing",
        "empty", "escape-then-ref"])
def test_expand(text: str, expected: str) -> None:
    """Kubernetes' expansion rules."""
    assert expand(text, {"A": "1", "B": "2"}) == expected
