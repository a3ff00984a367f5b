"""The HorizontalPodAutoscaler `kctl autoscale` makes, as kubectl's autoscale generator makes it.

kctl.cli.autoscale reads the flags and the target object, calls `check_options` and then
`horizontal_pod_autoscaler(...)`; the result is the object of kubectl 1.33+'s generator
(staging/src/k8s.io/kubectl/pkg/cmd/autoscale, createHorizontalPodAutoscalerV2), in Go's
field order (what `-o json` prints): autoscaling/v2, named for the target unless --name,
`scaleTargetRef` {kind, name, apiVersion}, `minReplicas` only when --min > 0, `maxReplicas`,
and a cpu Utilization metric only when --cpu-percent > 0. kubectl 1.32 and older print the
same HPA as autoscaling/v1 (`targetCPUUtilizationPercentage`), which kctl does not serve
(docs/cli.md). No I/O here: AutoscaleError carries kubectl's message for the caller to print.
"""

from __future__ import annotations

from kctl.client.scale import NotScalable, check_scalable
from kctl.machinery.resources import ResourceType


class AutoscaleError(Exception):
    """The autoscaler cannot be made; the message is kubectl's."""


def check_options(*, min_replicas: int, max_replicas: int) -> None:
    """AutoscaleOptions.Validate: --max at least 1 and not below --min."""
    if max_replicas < 1:
        raise AutoscaleError(f"--max=MAXPODS is required and must be at least 1, max: {max_replicas}")
    if max_replicas < min_replicas:
        raise AutoscaleError(f"--max=MAXPODS must be larger or equal to --min=MINPODS, max: {max_replicas}, "
                             f"min: {min_replicas}")


def check_target(rt: ResourceType) -> None:
    """The target's kind must have a scale subresource (`cannot autoscale a DaemonSet: ...`)."""
    try:
        check_scalable(rt)
    except NotScalable as exc:
        raise AutoscaleError(f"cannot autoscale a {rt.kind}: {exc.message}") from None


def horizontal_pod_autoscaler(rt: ResourceType, target: str, *, name: str | None = None, min_replicas: int = -1,
                              max_replicas: int, cpu_percent: int = -1, namespace: str | None = None) -> dict:
    """The autoscaling/v2 HorizontalPodAutoscaler for the object `target` of kind rt (kubectl's field order)."""
    meta: dict = {"name": name or target}
    if namespace:
        meta["namespace"] = namespace
    spec: dict = {"scaleTargetRef": {"kind": rt.kind, "name": target, "apiVersion": rt.api_version}}
    if min_replicas > 0:
        spec["minReplicas"] = min_replicas
    spec["maxReplicas"] = max_replicas
    if cpu_percent > 0:
        spec["metrics"] = [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": cpu_percent}}}]
    return {"kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v2", "metadata": meta, "spec": spec}


def as_printed(hpa: dict) -> dict:
    """What a client-side dry run prints: the object with Go's zero values (creationTimestamp, status)."""
    meta = dict(hpa["metadata"])
    meta["creationTimestamp"] = None
    return dict(hpa, metadata=meta, status={"desiredReplicas": 0, "currentMetrics": None})


__all__ = ["AutoscaleError", "as_printed", "check_options", "check_target", "horizontal_pod_autoscaler"]
