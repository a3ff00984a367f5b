"""Where the HPA controller reads pod usage: the resource metrics API (metrics.k8s.io/v1beta1 PodMetrics).

Kubernetes' HPA asks metrics-server on every sync (its resource metrics client); in kctl the
node agents' scraper (kctl/agent/metrics.py) stores one PodMetrics object per pod, labelled
with the pod's labels, and `APIResourceMetrics` lists them through the API with the scale
target's selector. The controller (controller.py) takes any `ResourceMetricsSource`, so unit
tests hand it fakes that return objects of the same shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kctl.controllers.podautoscaler.replicas import MetricsError

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.machinery.resources import ResourceType
    from kctl.machinery.selectors import LabelSelector

METRICS_GROUP = "metrics.k8s.io"
POD_METRICS_KIND = "PodMetrics"


class ResourceMetricsSource(Protocol):
    """Lists the PodMetrics of a namespace that a label selector selects."""

    def pod_metrics(self, namespace: str, selector: LabelSelector) -> list[dict]: ...


class APIResourceMetrics:
    """PodMetrics read through the API (the kind the metrics scraper writes)."""

    def __init__(self, api: API) -> None:
        self.api = api

    def _kind(self) -> ResourceType:
        for rt in self.api.registry:
            if rt.group == METRICS_GROUP and rt.kind == POD_METRICS_KIND:
                return rt
        raise MetricsError("unable to fetch metrics from resource metrics API: the server could not find the "
                           f"requested resource (get pods.{METRICS_GROUP})")

    def pod_metrics(self, namespace: str, selector: LabelSelector) -> list[dict]:
        from kctl.machinery.errors import APIError

        rt = self._kind()
        try:
            items, _ = self.api.list(rt, namespace=namespace, label_selector=selector)
        except APIError as exc:
            raise MetricsError(f"unable to fetch metrics from resource metrics API: {exc}") from None
        return items


__all__ = ["APIResourceMetrics", "METRICS_GROUP", "POD_METRICS_KIND", "ResourceMetricsSource"]
