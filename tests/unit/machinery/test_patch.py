"""Merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch, table-driven."""

from __future__ import annotations

import copy

import pytest

from kctl.machinery import schemas
from kctl.machinery.errors import BadRequest, Invalid
from kctl.machinery.patch import (
    create_merge_patch,
    create_strategic_patch,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from kctl.machinery.resources import builtin_registry

REGISTRY = builtin_registry()
POD = schemas.load(REGISTRY.lookup("pod"))
DEPLOYMENT = schemas.load(REGISTRY.lookup("deployment"))


# --------------------------------------------------------------------------- RFC 7386

RFC7386_APPENDIX = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize("target, patch, expected", RFC7386_APPENDIX,
                         ids=[f"appendix-{i + 1}" for i in range(len(RFC7386_APPENDIX))])
def test_merge_patch_rfc7386_appendix(target, patch, expected):
    """Every example of RFC 7386 appendix A gives the documented result."""
    before = copy.deepcopy(target)
    assert merge_patch(target, patch) == expected
    assert target == before


@pytest.mark.parametrize("original, modified, expected", [
    ({"a": 1}, {"a": 1}, {}),
    ({"a": 1}, {"a": 2}, {"a": 2}),
    ({"a": 1, "b": 2}, {"a": 1}, {"b": None}),
    ({"a": {"x": 1, "y": 2}}, {"a": {"x": 1}}, {"a": {"y": None}}),
    ({"a": [1, 2]}, {"a": [2]}, {"a": [2]}),
    ({"a": 1}, {"a": True}, {"a": True}),
], ids=["same", "changed", "removed", "nested-removed", "list-replaced", "type-change"])
def test_create_merge_patch(original, modified, expected):
    """create_merge_patch is minimal and round-trips through merge_patch."""
    patch = create_merge_patch(original, modified)
    assert patch == expected
    assert merge_patch(original, patch) == modified


# --------------------------------------------------------------------------- RFC 6902

DOC = {"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 1, "ports": [80]}}


@pytest.mark.parametrize("ops, expected", [
    ([{"op": "add", "path": "/metadata/labels/tier", "value": "front"}],
     {"metadata": {"name": "web", "labels": {"app": "web", "tier": "front"}}, "spec": {"replicas": 1, "ports": [80]}}),
    ([{"op": "remove", "path": "/metadata/labels/app"}],
     {"metadata": {"name": "web", "labels": {}}, "spec": {"replicas": 1, "ports": [80]}}),
    ([{"op": "replace", "path": "/spec/replicas", "value": 3}],
     {"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 3, "ports": [80]}}),
    ([{"op": "add", "path": "/spec/ports/-", "value": 443}],
     {"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 1, "ports": [80, 443]}}),
    ([{"op": "move", "from": "/spec/replicas", "path": "/spec/count"}],
     {"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"count": 1, "ports": [80]}}),
    ([{"op": "copy", "from": "/metadata/name", "path": "/metadata/labels/name"}],
     {"metadata": {"name": "web", "labels": {"app": "web", "name": "web"}}, "spec": {"replicas": 1, "ports": [80]}}),
    ([{"op": "test", "path": "/spec/replicas", "value": 1},
      {"op": "replace", "path": "/spec/replicas", "value": 2}],
     {"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 2, "ports": [80]}}),
    ([], DOC),
], ids=["add", "remove", "replace", "append", "move", "copy", "test-then-replace", "empty"])
def test_json_patch_ops(ops, expected):
    """Each RFC 6902 op applies, and the target is not mutated."""
    before = copy.deepcopy(DOC)
    assert json_patch(DOC, ops) == expected
    assert DOC == before


@pytest.mark.parametrize("ops, index", [
    ([{"op": "test", "path": "/spec/replicas", "value": 2}], 0),
    ([{"op": "add", "path": "/a", "value": 1}, {"op": "remove", "path": "/nope"}], 1),
    ([{"op": "replace", "path": "/spec/missing", "value": 1}], 0),
    ([{"op": "add", "path": "/x", "value": 1}, {"op": "add", "path": "/x", "value": 2},
      {"op": "bogus", "path": "/x"}], 2),
    ([{"path": "/x", "value": 1}], 0),
    ([{"op": "add", "path": "/spec/replicas/deeper", "value": 1}], 0),
    ([{"op": "add", "path": "no-slash", "value": 1}], 0),
    ([{"op": "add", "path": "/spec/ports/7", "value": 1}], 0),
    ([{"op": "add", "path": "/a"}], 0),
    (["not an op"], 0),
    ([{"op": "replace", "path": "", "value": [1]}], None),
], ids=["test-failed", "missing-path", "replace-missing", "unknown-op", "no-op-member",
        "into-scalar", "bad-pointer", "index-out-of-range", "no-value", "op-not-object",
        "result-not-object"])
def test_json_patch_failures(ops, index):
    """A failing op raises Invalid whose message names the op's index."""
    before = copy.deepcopy(DOC)
    with pytest.raises(Invalid) as err:
        json_patch(DOC, ops)
    if index is not None:
        assert f"[{index}]:" in err.value.message
        assert err.value.causes[0].path == f"[{index}]"
    assert "\n" not in err.value.message
    assert DOC == before


def test_json_patch_not_a_list():
    """A JSON patch that is not a list of operations is a BadRequest."""
    with pytest.raises(BadRequest):
        json_patch(DOC, {"op": "add"})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- strategic

def pod(**spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


NGINX = {"name": "nginx", "image": "nginx:1.25"}
SIDECAR = {"name": "sidecar", "image": "busybox"}

STRATEGIC_CASES = [
    pytest.param(
        pod(containers=[NGINX, SIDECAR]),
        {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}},
        pod(containers=[{"name": "nginx", "image": "nginx:1.27"}, SIDECAR]),
        POD, id="containers-merged-by-name"),
    pytest.param(
        pod(containers=[NGINX]),
        {"spec": {"containers": [{"name": "extra", "image": "e"}, {"name": "more", "image": "m"}]}},
        pod(containers=[NGINX, {"name": "extra", "image": "e"}, {"name": "more", "image": "m"}]),
        POD, id="new-containers-appended-in-patch-order"),
    pytest.param(
        pod(containers=[{**NGINX, "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]),
        {"spec": {"containers": [{"name": "nginx", "env": [{"name": "B", "value": "3"},
                                                           {"name": "C", "value": "4"}]}]}},
        pod(containers=[{**NGINX, "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"},
                                          {"name": "C", "value": "4"}]}]),
        POD, id="env-merged-by-name"),
    pytest.param(
        pod(containers=[NGINX, SIDECAR]),
        {"spec": {"containers": [{"$patch": "delete", "name": "sidecar"}]}},
        pod(containers=[NGINX]),
        POD, id="patch-delete-element"),
    pytest.param(
        pod(containers=[NGINX, SIDECAR]),
        {"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "o"}]}},
        pod(containers=[{"name": "only", "image": "o"}]),
        POD, id="patch-replace-list"),
    pytest.param(
        pod(containers=[NGINX], securityContext={"runAsUser": 1, "runAsGroup": 2}),
        {"spec": {"securityContext": {"$patch": "replace", "fsGroup": 3}}},
        pod(containers=[NGINX], securityContext={"fsGroup": 3}),
        POD, id="patch-replace-map"),
    pytest.param(
        pod(containers=[NGINX], securityContext={"runAsUser": 1}),
        {"spec": {"securityContext": {"$patch": "delete"}}},
        pod(containers=[NGINX]),
        POD, id="patch-delete-map"),
    pytest.param(
        pod(containers=[{**NGINX, "ports": [{"containerPort": 80, "name": "http"},
                                            {"containerPort": 443}]}]),
        {"spec": {"containers": [{"name": "nginx", "ports": [{"containerPort": 443, "name": "https"},
                                                             {"containerPort": 8080}]}]}},
        pod(containers=[{**NGINX, "ports": [{"containerPort": 80, "name": "http"},
                                            {"containerPort": 443, "name": "https"},
                                            {"containerPort": 8080}]}]),
        POD, id="ports-merged-by-containerPort"),
    pytest.param(
        pod(containers=[NGINX], tolerations=[{"key": "a", "operator": "Exists"}]),
        {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}},
        pod(containers=[NGINX], tolerations=[{"key": "b", "operator": "Exists"}]),
        POD, id="tolerations-replaced"),
    pytest.param(
        pod(containers=[{**NGINX, "args": ["-a", "-b"]}]),
        {"spec": {"containers": [{"name": "nginx", "args": ["-c"]}]}},
        pod(containers=[{**NGINX, "args": ["-c"]}]),
        POD, id="args-replaced"),
    pytest.param(
        {"metadata": {"name": "p", "finalizers": ["a", "b"]}},
        {"metadata": {"finalizers": ["c", "a"]}},
        {"metadata": {"name": "p", "finalizers": ["a", "b", "c"]}},
        POD, id="finalizers-set-union"),
    pytest.param(
        {"metadata": {"name": "p", "finalizers": ["a", "b", "c"]}},
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}},
        {"metadata": {"name": "p", "finalizers": ["a", "c"]}},
        POD, id="deleteFromPrimitiveList"),
    pytest.param(
        pod(containers=[{"name": "a"}, {"name": "b"}, {"name": "c"}]),
        {"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "b"}, {"name": "a"}]}},
        pod(containers=[{"name": "c"}, {"name": "b"}, {"name": "a"}]),
        POD, id="setElementOrder-reorders"),
    pytest.param(
        pod(containers=[{"name": "a"}, {"name": "x"}, {"name": "b"}]),
        {"spec": {"$setElementOrder/containers": [{"name": "new"}, {"name": "b"}, {"name": "a"}],
                  "containers": [{"name": "new"}]}},
        pod(containers=[{"name": "x"}, {"name": "new"}, {"name": "b"}, {"name": "a"}]),
        POD, id="setElementOrder-keeps-server-only-element"),
    pytest.param(
        {"metadata": {"name": "p", "finalizers": ["a", "b"]}},
        {"metadata": {"$setElementOrder/finalizers": ["b", "c", "a"], "finalizers": ["c"]}},
        {"metadata": {"name": "p", "finalizers": ["b", "c", "a"]}},
        POD, id="setElementOrder-primitives"),
    pytest.param(
        {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}},
        {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}},
        {"spec": {"strategy": {"type": "Recreate"}}},
        DEPLOYMENT, id="retainKeys-RollingUpdate-to-Recreate"),
    pytest.param(
        pod(containers=[NGINX], volumes=[{"name": "v", "emptyDir": {}}]),
        {"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/d"}, "$retainKeys": ["hostPath", "name"]}]}},
        pod(containers=[NGINX], volumes=[{"name": "v", "hostPath": {"path": "/d"}}]),
        POD, id="retainKeys-in-volume-element"),
    pytest.param(
        pod(containers=[NGINX], nodeName="n1"),
        {"spec": {"nodeName": None}, "metadata": {"labels": {"a": "b"}}},
        {**pod(containers=[NGINX]), "metadata": {"name": "p", "labels": {"a": "b"}}},
        POD, id="null-deletes-map-merges"),
    pytest.param(
        pod(containers=[NGINX]),
        {"spec": {"volumes": [{"name": "v", "configMap": {"name": "c", "optional": None}},
                              {"$patch": "delete", "name": "gone"}],
                  "$setElementOrder/volumes": [{"name": "v"}]}},
        pod(containers=[NGINX], volumes=[{"name": "v", "configMap": {"name": "c"}}]),
        POD, id="directives-stripped-from-new-field"),
    pytest.param(
        pod(containers=[NGINX, SIDECAR]),
        {"spec": {"containers": [{"name": "nginx", "image": "x"}]}},
        pod(containers=[{"name": "nginx", "image": "x"}]),
        None, id="no-schema-is-merge-patch"),
]


@pytest.mark.parametrize("target, patch, expected, schema", STRATEGIC_CASES)
def test_strategic_merge_patch(target, patch, expected, schema):
    """Strategic merge follows the schema's patch strategies and merge keys, without mutating."""
    before, patch_before = copy.deepcopy(target), copy.deepcopy(patch)
    assert strategic_merge_patch(target, patch, schema) == expected
    assert target == before and patch == patch_before


@pytest.mark.parametrize("patch", [
    {"spec": {"containers": [{"$patch": "explode", "name": "a"}]}},
    {"spec": {"containers": [{"$patch": "delete"}]}},
    {"spec": {"securityContext": {"$patch": "sideways"}}},
    {"spec": {"$setElementOrder/containers": "a"}},
    {"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}},
    {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 1}}}},
    ["not", "a", "map"],
], ids=["unknown-list-directive", "delete-without-key", "unknown-map-directive",
        "order-not-list", "deletions-not-list", "retainKeys-misses-field", "not-a-map"])
def test_strategic_merge_patch_rejects_bad_patch(patch):
    """A malformed strategic merge patch is a BadRequest."""
    target = {"metadata": {"finalizers": ["a"]},
              "spec": {"containers": [{"name": "a"}], "securityContext": {}}}
    schema = DEPLOYMENT if "strategy" in str(patch) else POD
    with pytest.raises(BadRequest):
        strategic_merge_patch(target, patch, schema)


DIFF_CASES = [
    pytest.param(pod(containers=[NGINX]), pod(containers=[NGINX]), {}, id="no-change"),
    pytest.param(pod(containers=[NGINX, SIDECAR]), pod(containers=[{**NGINX, "image": "n2"}, SIDECAR]),
                 {"spec": {"containers": [{"name": "nginx", "image": "n2"}],
                           "$setElementOrder/containers": [{"name": "nginx"}, {"name": "sidecar"}]}},
                 id="image-changed"),
    pytest.param(pod(containers=[NGINX, SIDECAR]), pod(containers=[NGINX]),
                 {"spec": {"containers": [{"$patch": "delete", "name": "sidecar"}],
                           "$setElementOrder/containers": [{"name": "nginx"}]}},
                 id="container-removed"),
    pytest.param(pod(containers=[NGINX], nodeName="n"), pod(containers=[NGINX]),
                 {"spec": {"nodeName": None}}, id="field-removed"),
    pytest.param(pod(containers=[NGINX], tolerations=[{"key": "a"}]),
                 pod(containers=[NGINX], tolerations=[{"key": "b"}]),
                 {"spec": {"tolerations": [{"key": "b"}]}}, id="non-merge-list-whole"),
    pytest.param({"metadata": {"finalizers": ["a", "b"]}}, {"metadata": {"finalizers": ["b", "c"]}},
                 {"metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"],
                               "$setElementOrder/finalizers": ["b", "c"]}},
                 id="primitive-list"),
    pytest.param(pod(containers=[{"name": "a"}, {"name": "a", "image": "dup"}]),
                 pod(containers=[{"name": "a"}]),
                 {"spec": {"containers": [{"$patch": "replace"}, {"name": "a"}]}},
                 id="duplicate-keys-replace-whole-list"),
]


@pytest.mark.parametrize("original, modified, expected", DIFF_CASES)
def test_create_strategic_patch(original, modified, expected):
    """The two-way diff is the documented patch and round-trips through strategic merge."""
    patch = create_strategic_patch(original, modified, POD)
    assert patch == expected
    assert strategic_merge_patch(original, patch, POD) == modified


def test_create_strategic_patch_retain_keys():
    """Switching a retainKeys struct's type emits $retainKeys that drops the old member."""
    original = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    modified = {"spec": {"strategy": {"type": "Recreate"}}}
    patch = create_strategic_patch(original, modified, DEPLOYMENT)
    assert patch["spec"]["strategy"]["$retainKeys"] == ["type"]
    assert strategic_merge_patch(original, patch, DEPLOYMENT) == modified


def test_create_strategic_patch_without_schema_is_merge_patch():
    """With no schema the two-way diff is a JSON merge patch."""
    original, modified = {"a": [1, 2], "b": 1}, {"a": [2]}
    assert create_strategic_patch(original, modified, None) == create_merge_patch(original, modified)
