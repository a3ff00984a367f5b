"""The plugin registry: every in-tree plugin by its NAME, each a small class with a NAME."""

from __future__ import annotations

import pytest

from kctl.scheduler.framework import EXTENSION_POINTS, Handle, implements
from kctl.scheduler.plugins.registry import IN_TREE, registry

EXPECTED = {"NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
            "NodeResourcesBalancedAllocation", "PodTopologySpread", "InterPodAffinity", "ImageLocality",
            "DefaultPreemption", "DefaultBinder", "VolumeRestrictions", "VolumeBinding"}


def test_names():
    """The registry holds kube-scheduler's default plugins under their kube names."""
    assert set(IN_TREE) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_plugin_builds_and_implements_something(name):
    """Each factory takes (args, handle), and its object keeps its NAME and has an extension point."""
    plugin = registry()[name]({}, Handle())
    assert plugin.NAME == name
    assert any(implements(plugin, point) for point in EXTENSION_POINTS)


def test_registry_is_a_copy():
    """Callers may extend the mapping they get without changing the in-tree one."""
    r = registry()
    r["Extra"] = object  # type: ignore[assignment]
    assert "Extra" not in IN_TREE
