"""Field sets as structured-merge-diff computes them (kctl.machinery.managedfields), table-driven.

Cases of ToFieldSet, Compare, Merge and RemoveItems are ported from structured-merge-diff's
typed/toset_test.go, merge/*_test.go and fieldpath tests onto a small schema of kctl's dialect
(JSON Schema with Kubernetes' list and map markers), plus the real Deployment schema.
"""

from __future__ import annotations

import json

import pytest

from kctl.machinery import managedfields as mf
from kctl.machinery import schemas
from kctl.machinery.resources import builtin_registry

#: a root with every kind of node: struct fields, a granular map, atomic map/list, a map list, a set list
SCHEMA = {
    "type": "object",
    "properties": {
        "numeric": {"type": "number"},
        "string": {"type": "string"},
        "bool": {"type": "boolean"},
        "setStr": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        "color": {"type": "object", "x-kubernetes-map-type": "atomic",
                  "properties": {"R": {"type": "number"}, "G": {"type": "number"}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "args": {"type": "array", "items": {"type": "string"}},
        "list": {"$ref": "#/$defs/myList"},
        "legacy": {"type": "array", "items": {"$ref": "#/$defs/myElement"},
                   "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "key"},
        "ports": {"type": "array", "items": {"type": "object", "properties": {
            "containerPort": {"type": "integer"}, "protocol": {"type": "string"}}},
            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["containerPort", "protocol"]},
        "free": {"type": "object"},
    },
    "$defs": {
        "myList": {"type": "array", "items": {"$ref": "#/$defs/myElement"}, "x-kubernetes-list-type": "map",
                   "x-kubernetes-list-map-keys": ["key", "id"]},
        "myElement": {"type": "object", "properties": {
            "key": {"type": "string"}, "id": {"type": "number"}, "value": {"type": "string"},
            "bv": {"type": "boolean"}}},
    },
}


def _p(*elements: str) -> mf.Path:
    return tuple(elements)


def _k(**keys) -> str:
    return "k:" + json.dumps(keys, sort_keys=True, separators=(",", ":"))


@pytest.mark.parametrize("obj,want", [
    ({"numeric": 1}, {_p("f:numeric")}),
    ({"string": "aoeu"}, {_p("f:string")}),
    ({"bool": False}, {_p("f:bool")}),
    ({"setStr": ["a", "b"]}, {_p("f:setStr", 'v:"a"'), _p("f:setStr", 'v:"b"')}),
    ({"color": {}}, {_p("f:color")}),
    ({"color": {"R": 255, "G": 0}}, {_p("f:color")}),
    ({"args": []}, {_p("f:args")}),
    ({"args": ["a", "a"]}, {_p("f:args")}),
    ({"labels": {"app": "web", "tier": "x"}}, {_p("f:labels", "f:app"), _p("f:labels", "f:tier")}),
    ({"list": []}, set()),
    ({"list": [{"key": "a", "id": 1, "value": "v"}]},
     {_p("f:list", _k(key="a", id=1)), _p("f:list", _k(key="a", id=1), "f:key"),
      _p("f:list", _k(key="a", id=1), "f:id"), _p("f:list", _k(key="a", id=1), "f:value")}),
    ({"legacy": [{"key": "a"}]}, {_p("f:legacy", _k(key="a")), _p("f:legacy", _k(key="a"), "f:key")}),
    ({"ports": [{"containerPort": 80}]},  # a missing key takes its default (protocol TCP)
     {_p("f:ports", _k(containerPort=80, protocol="TCP")),
      _p("f:ports", _k(containerPort=80, protocol="TCP"), "f:containerPort")}),
    ({"free": {"a": {"b": 1}}}, {_p("f:free", "f:a"), _p("f:free", "f:a", "f:b")}),
], ids=lambda v: json.dumps(v, sort_keys=True) if isinstance(v, dict) else None)
def test_field_set(obj, want):
    """ToFieldSet: leaves, atomic values, associative list items and map keys are members."""
    assert mf.field_set(obj, SCHEMA) == want


@pytest.mark.parametrize("old,new,added,modified,removed", [
    ({"numeric": 1}, {"numeric": 2}, set(), {_p("f:numeric")}, set()),
    ({}, {"string": "x"}, {_p("f:string")}, set(), set()),
    ({"string": "x"}, {}, set(), set(), {_p("f:string")}),
    ({"bool": True}, {"bool": False}, set(), {_p("f:bool")}, set()),
    ({}, {"labels": {"app": "web"}}, {_p("f:labels"), _p("f:labels", "f:app")}, set(), set()),
    ({"labels": {"app": "web"}}, {"labels": {"app": "db"}}, set(), {_p("f:labels", "f:app")}, set()),
    ({"setStr": ["a"]}, {"setStr": ["a", "b"]}, {_p("f:setStr", 'v:"b"')}, set(), set()),
    ({"list": [{"key": "a", "id": 1}]}, {"list": [{"key": "a", "id": 1, "value": "v"}]},
     {_p("f:list", _k(key="a", id=1), "f:value")}, set(), set()),
    ({"list": [{"key": "a", "id": 1}]}, {"list": []}, set(), set(),
     {_p("f:list", _k(key="a", id=1)), _p("f:list", _k(key="a", id=1), "f:key"),
      _p("f:list", _k(key="a", id=1), "f:id")}),
    ({"args": ["a"]}, {"args": ["a", "b"]}, set(), {_p("f:args")}, set()),
    ({"labels": {}}, {"labels": {}}, set(), set(), set()),
])
def test_compare(old, new, added, modified, removed):
    """Compare: what an update adds, changes and drops, items and new maps included."""
    assert mf.compare(old, new, SCHEMA) == (added, modified, removed)


@pytest.mark.parametrize("live,config,want", [
    ({"numeric": 1, "string": "s"}, {"numeric": 2}, {"numeric": 2, "string": "s"}),
    ({"labels": {"a": "1"}}, {"labels": {"b": "2"}}, {"labels": {"a": "1", "b": "2"}}),
    ({"color": {"R": 1, "G": 2}}, {"color": {"R": 3}}, {"color": {"R": 3}}),
    ({"args": ["a", "b"]}, {"args": ["c"]}, {"args": ["c"]}),
    ({"setStr": ["a", "b"]}, {"setStr": ["c", "a"]}, {"setStr": ["c", "a", "b"]}),
    ({"list": [{"key": "a", "id": 1, "value": "x"}, {"key": "b", "id": 1}]},
     {"list": [{"key": "b", "id": 1, "bv": True}, {"key": "c", "id": 1}]},
     {"list": [{"key": "a", "id": 1, "value": "x"}, {"key": "b", "id": 1, "bv": True}, {"key": "c", "id": 1}]}),
    ({"list": [{"key": "a", "id": 1}, {"key": "b", "id": 1}]}, {"list": [{"key": "b", "id": 1}, {"key": "a", "id": 1}]},
     {"list": [{"key": "b", "id": 1}, {"key": "a", "id": 1}]}),
    ({"string": "s", "numeric": 1}, {"string": None}, {"numeric": 1}),
])
def test_merge(live, config, want):
    """Merge: config wins per field, maps merge by key, map lists by item in config's order, atomics replace."""
    assert mf.merge(live, config, SCHEMA) == want


@pytest.mark.parametrize("obj,paths,want", [
    ({"numeric": 1, "string": "s"}, {_p("f:numeric")}, {"string": "s"}),
    ({"labels": {"a": "1", "b": "2"}}, {_p("f:labels", "f:a")}, {"labels": {"b": "2"}}),
    ({"labels": {"a": "1"}}, {_p("f:labels", "f:a")}, {}),  # a map left empty goes too
    ({"list": [{"key": "a", "id": 1}, {"key": "b", "id": 1}]}, {_p("f:list", _k(key="a", id=1))},
     {"list": [{"key": "b", "id": 1}]}),
    ({"list": [{"key": "a", "id": 1, "value": "x"}]}, {_p("f:list", _k(key="a", id=1), "f:value")},
     {"list": [{"key": "a", "id": 1}]}),
    ({"setStr": ["a", "b"]}, {_p("f:setStr", 'v:"b"')}, {"setStr": ["a"]}),
    ({"color": {"R": 1}}, {_p("f:color", "f:R")}, {"color": {"R": 1}}),  # inside an atomic: nothing
])
def test_remove(obj, paths, want):
    """RemoveItems: the fields at the paths go; an atomic value is never entered."""
    assert mf.remove(obj, paths, SCHEMA) == want


@pytest.mark.parametrize("paths,fields_v1", [
    (set(), {}),
    ({_p("f:a")}, {"f:a": {}}),
    ({_p("f:a"), _p("f:a", "f:b")}, {"f:a": {".": {}, "f:b": {}}}),
    ({_p("f:spec", "f:containers", _k(name="web")), _p("f:spec", "f:containers", _k(name="web"), "f:image")},
     {"f:spec": {"f:containers": {'k:{"name":"web"}': {".": {}, "f:image": {}}}}}),
    ({_p("f:finalizers", 'v:"x"')}, {"f:finalizers": {'v:"x"': {}}}),
])
def test_fields_v1_round_trip(paths, fields_v1):
    """to_fields_v1 writes Kubernetes' trie (`.` for a member with members below); from_fields_v1 reads it back."""
    assert mf.to_fields_v1(paths) == fields_v1
    assert mf.from_fields_v1(fields_v1) == paths


@pytest.mark.parametrize("bad", [[], {"x:a": {}}, {"f:a": []}])
def test_from_fields_v1_refuses_what_is_not_a_trie(bad):
    """A fieldsV1 value that is not a trie of path elements is a ValueError."""
    with pytest.raises(ValueError):
        mf.from_fields_v1(bad)


@pytest.mark.parametrize("path,text", [
    (_p("f:spec", "f:replicas"), ".spec.replicas"),
    (_p("f:spec", "f:containers", _k(name="web"), "f:image"), '.spec.containers[name="web"].image'),
    (_p("f:ports", _k(containerPort=80, protocol="TCP")), '.ports[containerPort=80,protocol="TCP"]'),
    (_p("f:metadata", "f:finalizers", 'v:"a"'), '.metadata.finalizers[="a"]'),
    (_p("f:x", "i:3"), ".x[3]"),
])
def test_path_string(path, text):
    """Paths print as structured-merge-diff prints them in conflicts."""
    assert mf.path_string(path) == text


def test_deployment_schema_field_set():
    """The real Deployment schema: containers by name, ports by containerPort+protocol, atomic selector."""
    rt = builtin_registry().lookup("deployments")
    dep = {"spec": {"replicas": 1, "selector": {"matchLabels": {"app": "w"}}, "template": {"spec": {
        "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}], "args": ["a"]}]}}}}
    got = {mf.path_string(p) for p in mf.field_set(dep, schemas.load(rt))}
    assert got == {".spec.replicas", ".spec.selector", '.spec.template.spec.containers[name="c"]',
                   '.spec.template.spec.containers[name="c"].name', '.spec.template.spec.containers[name="c"].image',
                   '.spec.template.spec.containers[name="c"].args',
                   '.spec.template.spec.containers[name="c"].ports[containerPort=80,protocol="TCP"]',
                   '.spec.template.spec.containers[name="c"].ports[containerPort=80,protocol="TCP"].containerPort'}


def test_no_schema_is_deduced():
    """Without a schema, maps are granular and lists atomic (structured-merge-diff's deduced type)."""
    assert mf.field_set({"spec": {"a": 1, "l": [1, 2]}}, None) == {
        _p("f:spec"), _p("f:spec", "f:a"), _p("f:spec", "f:l")}
