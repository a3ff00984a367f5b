"""kctl.admission.explain: kubectl-explain text from the kinds' schemas."""

from __future__ import annotations

import pytest

from kctl.admission.explain import explain
from kctl.machinery.crd import crd_resource_types
from kctl.machinery.errors import BadRequest
from kctl.machinery.resources import builtin_registry

REGISTRY = builtin_registry()


def test_kind_overview():
    """`explain deployment`: kind, version, description and the top-level fields with types."""
    text = explain(REGISTRY.lookup("deployment"), [])
    assert text.startswith("KIND:     Deployment\nVERSION:  apps/v1\n\nDESCRIPTION:\n"
                           "    Deployment enables declarative updates for Pods and ReplicaSets.\n")
    assert "FIELDS:\n  apiVersion\t<string>\n" in text
    assert "  metadata\t<Object>\n" in text
    assert "  spec\t<Object> -required-\n    Specification of the desired behavior of the Deployment.\n" in text
    assert "FIELD:" not in text


def test_object_field():
    """`explain deployment.spec.strategy`: the field, its description and its own fields."""
    text = explain(REGISTRY.lookup("deploy"), ["spec", "strategy"])
    assert "FIELD: strategy <Object>\n" in text
    assert "The deployment strategy to use to replace existing pods with new ones." in text
    assert "  rollingUpdate\t<Object>\n" in text
    assert "  type\t<string>\n" in text


def test_leaf_field_through_a_list():
    """`explain pod.spec.containers.image` walks through the list to a container's field."""
    text = explain(REGISTRY.lookup("pod"), ["spec", "containers", "image"])
    assert text.startswith("KIND:     Pod\nVERSION:  v1\n\nFIELD: image <string>\n\nDESCRIPTION:\n    Container image")
    assert "FIELDS:" not in text


TYPES = [
    ("pod", ["spec", "containers"], "[]Object"),
    ("pod", ["spec", "containers", "args"], "[]string"),
    ("pod", ["spec", "containers", "resources", "limits"], "map[string]Quantity"),
    ("pod", ["spec", "nodeSelector"], "map[string]string"),
    ("pod", ["spec", "containers", "livenessProbe", "httpGet", "port"], "IntOrString"),
    ("deployment", ["spec", "replicas"], "integer"),
    ("deployment", ["spec", "paused"], "boolean"),
    ("deployment", ["spec", "strategy", "rollingUpdate", "maxSurge"], "IntOrString"),
    ("node", ["status", "capacity"], "map[string]Quantity"),
]


@pytest.mark.parametrize("kind, path, expected", TYPES, ids=[".".join([t[0], *t[1]]) for t in TYPES])
def test_type_names_follow_kubectl(kind, path, expected):
    """Field types are named as kubectl does."""
    assert f"FIELD: {path[-1]} <{expected}>\n" in explain(REGISTRY.lookup(kind), path)


@pytest.mark.parametrize("path, missing", [
    (["spec", "replicass"], "replicass"),
    (["spec", "replicas", "foo"], "foo"),
    (["nope"], "nope"),
], ids=["typo", "below-a-scalar", "top-level"])
def test_unknown_field_is_bad_request(path, missing):
    """A path naming no field raises BadRequest with kubectl's message."""
    with pytest.raises(BadRequest, match=f'field "{missing}" does not exist'):
        explain(REGISTRY.lookup("deployment"), path)


def test_recursive_lists_nested_fields_without_descriptions():
    """--recursive shows the tree of fields below, indented, with types only."""
    text = explain(REGISTRY.lookup("deployment"), ["spec", "strategy"], recursive=True)
    assert text.endswith("FIELDS:\n  rollingUpdate\t<Object>\n    maxSurge\t<IntOrString>\n"
                         "    maxUnavailable\t<IntOrString>\n  type\t<string>\n")


def test_recursive_stops_at_recursive_types():
    """A self-referencing type (a CRD's JSONSchemaProps) is expanded once, not forever."""
    text = explain(REGISTRY.lookup("crd"), ["spec", "versions", "schema"], recursive=True)
    assert "openAPIV3Schema\t<Object>" in text
    assert len(text.splitlines()) < 200


def test_enum_values_are_listed():
    """A field with fixed values lists them (kctl's own hook kinds)."""
    text = explain(REGISTRY.lookup("validatingadmissionhook"), ["spec", "failurePolicy"])
    assert "ENUM:\n    Fail\n    Ignore\n" in text


def test_custom_kind_uses_the_crd_schema():
    """A custom kind is explained from its CRD's openAPIV3Schema."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced", "names": {"kind": "Widget", "plural": "widgets"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "description": "A Widget.",
                        "properties": {"spec": {"type": "object", "required": ["size"], "properties": {
                            "size": {"type": "integer", "description": "How big."},
                            "port": {"x-kubernetes-int-or-string": True}}}}}}}]}}
    rt = crd_resource_types(crd)[0]
    assert "KIND:     Widget\nVERSION:  example.com/v1\n\nDESCRIPTION:\n    A Widget.\n" in explain(rt, [])
    text = explain(rt, ["spec"])
    assert "  size\t<integer> -required-\n    How big.\n" in text
    assert "  port\t<IntOrString>\n" in text
