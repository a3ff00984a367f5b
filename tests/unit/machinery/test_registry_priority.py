"""A name several kinds answer to means, as kubectl's RESTMapper priority says, the core kind, then a built-in."""

from __future__ import annotations

import pytest

from kctl.machinery.resources import BUILTIN, Registry, ResourceType, builtin_registry

POD = ResourceType("", "v1", "Pod", "pods", True, ("po",))
POD_METRICS = ResourceType("metrics.k8s.io", "v1beta1", "PodMetrics", "pods", True, has_status=False)
CUSTOM_PODS = ResourceType("example.com", "v1", "Pod", "pods", True, crd_schema={"type": "object"})
APPS_THING = ResourceType("apps", "v1", "Thing", "things", True)
OTHER_THING = ResourceType("other.io", "v1", "Thing", "things", True)


@pytest.mark.parametrize("types, name, expected", [
    ((POD_METRICS, POD), "pods", POD),
    ((POD, POD_METRICS), "pods", POD),
    ((CUSTOM_PODS, POD_METRICS, POD), "pod", POD),
    ((CUSTOM_PODS, POD_METRICS), "pods", POD_METRICS),
    ((POD_METRICS, POD), "pods.metrics.k8s.io", POD_METRICS),
    ((CUSTOM_PODS, POD), "pods.example.com", CUSTOM_PODS),
    ((OTHER_THING, APPS_THING), "things", OTHER_THING),
], ids=["core-over-metrics-registered-first", "core-over-metrics", "core-over-crd-and-metrics",
        "built-in-over-crd", "group-suffix-names-one", "crd-by-group", "otherwise-first-registered"])
def test_ambiguous_names_prefer_core_then_built_in(types, name, expected) -> None:
    """Whatever the registration order, `pods` is the core Pod; a `.group` suffix picks the other kind."""
    assert Registry(types).lookup(name) == expected


@pytest.mark.parametrize("name, group_kind", [
    ("pods", "Pod"), ("pod", "Pod"), ("po", "Pod"), ("nodes", "Node"), ("no", "Node"),
    ("pods.metrics.k8s.io", "PodMetrics.metrics.k8s.io"), ("podmetrics", "PodMetrics.metrics.k8s.io"),
    ("nodes.metrics.k8s.io", "NodeMetrics.metrics.k8s.io"), ("NodeMetrics", "NodeMetrics.metrics.k8s.io"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_builtin_names_with_the_metrics_api(name: str, group_kind: str) -> None:
    """With metrics.k8s.io served, `kctl get pods`/`nodes` still mean the core kinds."""
    assert builtin_registry().lookup(name).group_kind == group_kind


def test_metrics_kinds_are_served_as_metrics_server_serves_them() -> None:
    """PodMetrics (namespaced) and NodeMetrics (cluster) in metrics.k8s.io/v1beta1, no status, no short names."""
    served = {rt.kind: rt for rt in BUILTIN if rt.group == "metrics.k8s.io"}
    assert {k: (rt.version, rt.plural, rt.namespaced, rt.has_status, rt.short_names) for k, rt in served.items()} == {
        "PodMetrics": ("v1beta1", "pods", True, False, ()), "NodeMetrics": ("v1beta1", "nodes", False, False, ())}
