"""kctl.output.describe's layout (issue 13): a package of small modules, one per group of kinds, and a
kind -> describer table, so adding a kind is one function and one entry."""

from __future__ import annotations

import importlib
from datetime import datetime, timezone
from pathlib import Path

import pytest

from kctl.machinery.resources import ResourceType, builtin_registry

PACKAGE = Path(__file__).resolve().parents[3] / "kctl" / "output" / "describe"
NOW = datetime(2026, 12, 2, 17, 0, 0, tzinfo=timezone.utc)
GADGETS = ResourceType("example.com", "v1", "Gadget", "gadgets", True, crd_schema={"type": "object"})
GADGET = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1", "namespace": "default"},
          "spec": {"size": 3}}


def test_describe_is_a_package_of_small_modules():
    """kctl/output/describe/ is a package; no module of it is a catch-all (each at most 300 lines)."""
    assert PACKAGE.is_dir(), "kctl.output.describe should be a package"
    sizes = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert {"__init__.py", "writer.py", "sections.py", "generic.py"} <= set(sizes)
    assert {name: n for name, n in sizes.items() if n > 300} == {}


@pytest.mark.parametrize("kind, module, function", [
    ("Pod", "pods", "describe_pod"),
    ("Deployment.apps", "workloads", "describe_deployment"),
    ("Node", "nodes", "describe_node"),
    ("Service", "networking", "describe_service"),
    ("Secret", "config", "describe_secret"),
    ("ConfigMap", "config", "describe_configmap"),
])
def test_each_kind_has_its_describer_in_its_groups_module(kind, module, function):
    """DESCRIBERS maps each kind with its own layout to the describer in the module of its group."""
    from kctl.output.describe import DESCRIBERS
    assert DESCRIBERS[kind] is getattr(importlib.import_module(f"kctl.output.describe.{module}"), function)


def test_a_new_describers_entry_is_used(monkeypatch):
    """Adding a kind is one entry: describe() calls the describer DESCRIBERS names for the object's kind."""
    from kctl.output import describe as package
    seen = []

    def describe_gadget(w, obj, ctx):
        seen.append((obj["metadata"]["name"], ctx.now, [e["reason"] for e in ctx.events]))
        w.write(0, f"Gadget:\t{obj['metadata']['name']}\n")

    monkeypatch.setitem(package.DESCRIBERS, "Gadget.example.com", describe_gadget)
    assert package.describe(GADGET, GADGETS, [{"reason": "Built"}], now=NOW) == "Gadget:  g1\n"
    assert seen == [("g1", NOW, ["Built"])]


@pytest.mark.parametrize("resource", ["leases", "jobs", "replicasets"])
def test_a_kind_without_an_entry_gets_the_generic_describer(resource):
    """A kind not in DESCRIBERS is printed by generic.describe_generic (its fields as `Key:  value`)."""
    from kctl.output.describe import DESCRIBERS, describe
    rt = builtin_registry().lookup(resource)
    assert rt.group_kind not in DESCRIBERS
    obj = {"apiVersion": rt.api_version, "kind": rt.kind, "metadata": {"name": "x", "namespace": "default"},
           "spec": {"someField": 1}}
    text = describe(obj, rt, [], now=NOW)
    assert text.startswith("Name:         x\nNamespace:    default\n")
    assert "Spec:\n  Some Field:  1\n" in text


def test_callers_use_public_names_only():
    """The names other packages import (describe command, rollout history) are the package's public API."""
    import kctl.output.describe as package
    assert {"describe", "PrefixWriter", "describe_pod_template", "tabwrite", "smart_label", "rfc1123z",
            "DESCRIBERS"} <= set(package.__all__)
    assert all(hasattr(package, name) for name in package.__all__)
