"""The in-tree plugins by NAME (kube's plugins/registry.go).

kctl.scheduler.config builds each profile's Framework from this mapping; a plugin from
outside the package is named in the config file by import path "package.module:Class"
and loaded by config.load_plugin instead. A factory takes (args, handle).
"""

from __future__ import annotations

from kctl.scheduler.framework import PluginFactory
from kctl.scheduler.plugins.balanced_allocation import NodeResourcesBalancedAllocation
from kctl.scheduler.plugins.default_binder import DefaultBinder
from kctl.scheduler.plugins.default_preemption import DefaultPreemption
from kctl.scheduler.plugins.image_locality import ImageLocality
from kctl.scheduler.plugins.inter_pod_affinity import InterPodAffinity
from kctl.scheduler.plugins.node_affinity import NodeAffinity
from kctl.scheduler.plugins.node_name import NodeName
from kctl.scheduler.plugins.node_ports import NodePorts
from kctl.scheduler.plugins.node_resources_fit import NodeResourcesFit
from kctl.scheduler.plugins.node_unschedulable import NodeUnschedulable
from kctl.scheduler.plugins.pod_topology_spread import PodTopologySpread
from kctl.scheduler.plugins.taint_toleration import TaintToleration
from kctl.scheduler.plugins.volume_binding import VolumeBinding
from kctl.scheduler.plugins.volume_restrictions import VolumeRestrictions

IN_TREE: dict[str, PluginFactory] = {cls.NAME: cls for cls in (
    NodeName, NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, VolumeRestrictions,
    VolumeBinding, NodeResourcesBalancedAllocation, PodTopologySpread, InterPodAffinity, ImageLocality,
    DefaultPreemption, DefaultBinder,
)}


def registry() -> dict[str, PluginFactory]:
    """NAME -> factory of every in-tree plugin (a fresh dict the caller may extend)."""
    return dict(IN_TREE)


__all__ = ["IN_TREE", "registry"]
