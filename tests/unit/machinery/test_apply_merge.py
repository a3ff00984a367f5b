"""kubectl-style three-way apply: what the manifest drops goes, what others wrote stays."""

from __future__ import annotations

import copy
import json

import pytest

from kctl.machinery import schemas
from kctl.machinery.apply import (
    LAST_APPLIED,
    applied_object,
    apply_patch,
    last_applied_annotation,
    last_applied_of,
    three_way_patch,
)
from kctl.machinery.patch import strategic_merge_patch
from kctl.machinery.resources import builtin_registry

REGISTRY = builtin_registry()
POD = schemas.load(REGISTRY.lookup("pod"))
DEPLOYMENT = schemas.load(REGISTRY.lookup("deployment"))
CONFIGMAP = schemas.load(REGISTRY.lookup("configmap"))

SERVER_FIELDS = {"uid": "u-1", "resourceVersion": "7", "creationTimestamp": "2024-01-01T00:00:00Z",
                 "generation": 2}


def deployment(containers: list, **spec) -> dict:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": containers}},
                 **spec},
    }


def live(manifest: dict, tweak=None) -> dict:
    """The object as stored after a first apply, then touched by the server and others."""
    obj = applied_object(manifest, None, DEPLOYMENT)
    obj["metadata"].update(SERVER_FIELDS)
    obj["status"] = {"replicas": 2, "readyReplicas": 2}
    for container in obj["spec"]["template"]["spec"]["containers"]:
        container.setdefault("imagePullPolicy", "IfNotPresent")
    obj["spec"]["template"]["spec"].setdefault("restartPolicy", "Always")
    if tweak:
        tweak(obj)
    return obj


WEB = {"name": "web", "image": "nginx:1.25", "args": ["-g", "daemon off;"]}
LOG = {"name": "log", "image": "busybox", "env": [{"name": "LEVEL", "value": "info"}]}


def spec_of(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


CASES = [
    pytest.param(
        deployment([WEB, LOG], minReadySeconds=5), deployment([WEB, LOG]), None,
        lambda o: "minReadySeconds" not in o["spec"],
        id="field-removed-from-manifest-is-removed"),
    pytest.param(
        deployment([WEB, LOG]), deployment([WEB, LOG], replicas=3),
        lambda o: o["metadata"]["labels"].update(team="ops"),
        lambda o: o["metadata"]["labels"] == {"app": "web", "team": "ops"} and o["spec"]["replicas"] == 3,
        id="label-added-by-someone-else-kept"),
    pytest.param(
        deployment([WEB, LOG]), deployment([{**WEB, "image": "nginx:1.27"}, LOG]), None,
        lambda o: o["status"] == {"replicas": 2, "readyReplicas": 2}
        and all(o["metadata"][k] == v for k, v in SERVER_FIELDS.items()),
        id="status-and-server-metadata-kept"),
    pytest.param(
        deployment([WEB, LOG]), deployment([{**WEB, "image": "nginx:1.27"}, LOG]), None,
        lambda o: [c.get("imagePullPolicy") for c in spec_of(o)["containers"]] == ["IfNotPresent"] * 2
        and spec_of(o)["restartPolicy"] == "Always" and spec_of(o)["containers"][0]["image"] == "nginx:1.27",
        id="defaulted-fields-kept"),
    pytest.param(
        deployment([WEB, LOG]), deployment([WEB]), None,
        lambda o: [c["name"] for c in spec_of(o)["containers"]] == ["web"],
        id="container-removed-from-manifest-is-removed"),
    pytest.param(
        deployment([WEB, LOG]), deployment([WEB, LOG]),
        lambda o: spec_of(o)["containers"].append({"name": "injected", "image": "proxy"}),
        lambda o: [c["name"] for c in spec_of(o)["containers"]] == ["web", "log", "injected"],
        id="container-added-by-others-kept"),
    pytest.param(
        deployment([WEB, LOG]), deployment([{**WEB, "args": ["-c", "/etc/nginx.conf"]}, LOG]), None,
        lambda o: spec_of(o)["containers"][0]["args"] == ["-c", "/etc/nginx.conf"],
        id="args-list-replaced"),
    pytest.param(
        deployment([WEB, LOG]),
        deployment([WEB, {**LOG, "env": [{"name": "MODE", "value": "json"}]}]),
        lambda o: spec_of(o)["containers"][1]["env"].append({"name": "POD_IP", "value": "1.2.3.4"}),
        lambda o: spec_of(o)["containers"][1]["env"] == [{"name": "POD_IP", "value": "1.2.3.4"},
                                                         {"name": "MODE", "value": "json"}],
        id="env-merged-by-name-removed-one-dropped"),
    pytest.param(
        deployment([LOG, WEB]), deployment([WEB, LOG]), None,
        lambda o: [c["name"] for c in spec_of(o)["containers"]] == ["web", "log"],
        id="container-order-follows-manifest"),
    pytest.param(
        deployment([WEB], strategy={"type": "RollingUpdate"}),
        deployment([WEB], strategy={"type": "Recreate"}),
        lambda o: o["spec"]["strategy"].update(rollingUpdate={"maxSurge": "25%", "maxUnavailable": "25%"}),
        lambda o: o["spec"]["strategy"] == {"type": "Recreate"},
        id="retainKeys-Recreate-drops-defaulted-rollingUpdate"),
    pytest.param(
        deployment([WEB], strategy={"type": "RollingUpdate"}),
        deployment([WEB], strategy={"type": "RollingUpdate"}, replicas=5),
        lambda o: o["spec"]["strategy"].update(rollingUpdate={"maxSurge": "25%"}),
        lambda o: o["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}},
        id="retainKeys-untouched-struct-keeps-defaults"),
    pytest.param(
        {**deployment([WEB]), "metadata": {"name": "web", "finalizers": ["a", "b"]}},
        {**deployment([WEB]), "metadata": {"name": "web", "finalizers": ["b"]}},
        lambda o: o["metadata"]["finalizers"].append("ctrl"),
        lambda o: o["metadata"]["finalizers"] == ["b", "ctrl"],
        id="finalizer-removed-others-kept"),
]


@pytest.mark.parametrize("first, second, tweak, check", CASES)
def test_three_way_apply(first, second, tweak, check):
    """Re-applying a changed manifest over a live object gives the kubectl result, and
    applying the same manifest again changes nothing."""
    current = live(first, tweak)
    current_before = copy.deepcopy(current)
    result = applied_object(second, current, DEPLOYMENT)
    assert current == current_before
    assert check(result), json.dumps(result, indent=1)
    assert last_applied_of(result) == second
    assert apply_patch(second, result, DEPLOYMENT) == {}
    assert applied_object(second, result, DEPLOYMENT) == result


def test_apply_twice_is_noop():
    """The three-way patch of an unchanged manifest over its own result is empty."""
    manifest = deployment([WEB, LOG])
    first = applied_object(manifest, None, DEPLOYMENT)
    assert apply_patch(manifest, first, DEPLOYMENT) == {}
    assert applied_object(manifest, first, DEPLOYMENT) == first


def test_create_sets_annotation():
    """Applying onto nothing stores the manifest with its compact, key-sorted last-applied JSON."""
    manifest = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"}, "data": {"b": "1", "a": "2"}}
    obj = applied_object(manifest, None, CONFIGMAP)
    assert obj["metadata"]["annotations"][LAST_APPLIED] == (
        '{"apiVersion":"v1","data":{"a":"2","b":"1"},"kind":"ConfigMap","metadata":{"name":"c"}}')
    assert "annotations" not in manifest["metadata"]


def test_annotation_excludes_itself():
    """A manifest that carries an old last-applied annotation does not nest it."""
    manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "annotations": {LAST_APPLIED: "{}", "note": "x"}}}
    assert json.loads(last_applied_annotation(manifest)) == {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "annotations": {"note": "x"}}}


@pytest.mark.parametrize("annotations, expected", [
    ({}, None),
    ({LAST_APPLIED: "{not json"}, None),
    ({LAST_APPLIED: "[1, 2]"}, None),
    ({LAST_APPLIED: '{"a": 1}'}, {"a": 1}),
], ids=["absent", "invalid-json", "not-an-object", "object"])
def test_last_applied_of(annotations, expected):
    """last_applied_of reads the annotation and treats anything but a JSON object as absent."""
    assert last_applied_of({"metadata": {"annotations": annotations}}) == expected


def test_no_last_applied_deletes_nothing():
    """An object created without apply: the first apply sets fields but removes none."""
    current = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"old": "1"}}
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"new": "2"}}
    result = applied_object(manifest, current, CONFIGMAP)
    assert result["data"] == {"old": "1", "new": "2"}


def test_invalid_annotation_treated_as_absent():
    """A corrupt last-applied annotation behaves like none at all."""
    current = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "annotations": {LAST_APPLIED: "{oops"}}, "data": {"old": "1"}}
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"new": "2"}}
    result = applied_object(manifest, current, CONFIGMAP)
    assert result["data"] == {"old": "1", "new": "2"}
    assert last_applied_of(result) == manifest


@pytest.mark.parametrize("original, modified, current, expected, result", [
    ({"a": 1, "b": 2}, {"a": 1}, {"a": 1, "b": 2, "c": 3}, {"b": None}, {"a": 1, "c": 3}),
    ({"l": [1, 2]}, {"l": [2]}, {"l": [1, 2]}, {"l": [2]}, {"l": [2]}),
    (None, {"a": 1}, {"a": 1, "z": 0}, {}, {"a": 1, "z": 0}),
    ({"m": {"x": 1}}, {"m": {"y": 1}}, {"m": {"x": 1, "k": 0}}, {"m": {"y": 1, "x": None}},
     {"m": {"y": 1, "k": 0}}),
], ids=["delete-and-keep", "list-replaced", "no-original", "nested"])
def test_three_way_patch_without_schema(original, modified, current, expected, result):
    """Kinds without a schema get a JSON merge three-way patch (lists replaced whole)."""
    patch = three_way_patch(original, modified, current, None)
    assert patch == expected
    assert strategic_merge_patch(current, patch, None) == result
