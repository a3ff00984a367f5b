"""kctl.machinery.crd: the kinds a stored CustomResourceDefinition serves, resolved in the API layer alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kctl.machinery.crd import crd_resource_types
from kctl.machinery.resources import builtin_registry


def crd(*, scope: str = "Namespaced", versions: list[dict] | None = None) -> dict:
    """A small Widget CRD; by default v1 is served with a status subresource and v1beta1 is not served."""
    schema = {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": scope,
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "shortNames": ["wd"]},
            "versions": versions if versions is not None else [
                {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}, "schema": schema},
                {"name": "v1beta1", "served": False, "storage": False, "schema": schema},
            ],
        },
    }


SERVED = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}


@pytest.mark.parametrize("obj, expected", [
    (crd(), [("example.com", "v1", "Widget", "widgets", True, ("wd",), True)]),
    (crd(scope="Cluster", versions=[SERVED]), [("example.com", "v1", "Widget", "widgets", False, ("wd",), False)]),
    (crd(versions=[{**SERVED, "name": "v2"}, {**SERVED, "storage": False}]),
     [("example.com", "v2", "Widget", "widgets", True, ("wd",), False),
      ("example.com", "v1", "Widget", "widgets", True, ("wd",), False)]),
    (crd(versions=[{**SERVED, "served": False}]), []),
    ({"kind": "CustomResourceDefinition", "metadata": {"name": "x"}}, []),
], ids=["served-only-with-status", "cluster-scoped", "two-served", "none-served", "no-spec"])
def test_crd_becomes_resource_types(obj, expected):
    """Only served versions become ResourceTypes, with names, scope and status from the CRD."""
    types = crd_resource_types(obj)
    assert [(t.group, t.version, t.kind, t.plural, t.namespaced, t.short_names, t.has_status)
            for t in types] == expected
    assert all(t.is_custom for t in types)


def test_crd_types_carry_the_converted_schema_and_register():
    """The ResourceType carries the version's schema as JSON Schema and can be looked up by short name."""
    [rt] = crd_resource_types(crd())
    assert rt.crd_schema["properties"]["spec"]["properties"]["size"]["type"] == "integer"
    registry = builtin_registry()
    registry.add(rt)
    assert registry.lookup("wd").kind == "Widget"


def test_crd_type_resolution_does_not_import_admission():
    """Resolving a CRD's types needs only the API layer: importing kctl.machinery.crd loads no kctl.admission module."""
    code = ("import sys, kctl.machinery.crd\n"
            "print(sorted(m for m in sys.modules if m.startswith('kctl.admission')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"
