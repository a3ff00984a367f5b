"""Kubernetes' HPA replica calculator (pkg/controller/podautoscaler/replica_calculator.go), for resource metrics.

Pure functions over pods and their metrics, called by the HorizontalPodAutoscaler
controller (controller.py) once per resource metric of an HPA:

- `pod_metrics_info(items, resource)`: PodMetrics objects (metrics.k8s.io/v1beta1, written
  by the node agents' scraper) -> per pod the sum of its containers' usage in milli-units
  (a pod with a container lacking the resource is left out), as the resource metrics client;
- `resource_replicas(...)`: a Utilization target (percent of the pods' requests);
- `raw_resource_replicas(...)`: an AverageValue target (usage per pod).

Both group the pods first (`group_pods`): deleted and Failed pods are ignored; Pending
pods are unready; pods without a metric are missing; for cpu, a pod still in its
cpu-initialization-period (5 min after start) is unready while not Ready or while its sample
predates one metric window after its Ready transition, and an older pod that is not Ready
and has never been Ready since its initial-readiness-delay (30 s) is unready too. Then the
usage ratio decides; within the tolerance (0.1) nothing changes; missing pods count as 100%
(or the target) on a scale-down and 0 on a scale-up, unready pods as 0 on a scale-up, and a
recomputed ratio that flips direction or falls within tolerance keeps the current count.
Errors are `MetricsError`s whose text is Kubernetes' (it becomes the FailedGetResourceMetric
Event and the ScalingActive condition).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Iterable

from kctl.machinery.quantity import parse_quantity
from kctl.machinery.times import parse_duration, parse_time


class MetricsError(Exception):
    """A replica count could not be computed from the metrics (Kubernetes' wording in the message)."""


@dataclass(frozen=True)
class PodMetric:
    """One pod's usage of one resource: milli-units (millicores, milli-bytes), when sampled, over what window."""

    value: int
    timestamp: dt.datetime | None = None
    window: float = 0.0


@dataclass(frozen=True)
class CalculatorSettings:
    """kube-controller-manager's flags for the calculator."""

    #: --horizontal-pod-autoscaler-tolerance: a usage ratio within 1 +- this changes nothing
    tolerance: float = 0.1
    #: --horizontal-pod-autoscaler-cpu-initialization-period (seconds)
    cpu_initialization_period: float = 300.0
    #: --horizontal-pod-autoscaler-initial-readiness-delay (seconds)
    initial_readiness_delay: float = 30.0


@dataclass(frozen=True)
class Proposal:
    """What one metric proposes: a replica count, the current utilization (percent) if a Utilization target,
    the average usage per pod (milli-units), and the metrics' timestamp."""

    replicas: int
    utilization: int | None
    average: int
    timestamp: dt.datetime | None


def milli_value(quantity: object) -> int:
    """Quantity.MilliValue(): the value in milli-units, rounded up."""
    return math.ceil(parse_quantity(quantity) * 1000)  # type: ignore[arg-type]


def pod_metrics_info(items: Iterable[dict], resource: str) -> tuple[dict[str, PodMetric], dt.datetime | None]:
    """getPodMetrics: pod name -> its usage of resource (sum over containers), and the first item's timestamp."""
    info: dict[str, PodMetric] = {}
    first: dt.datetime | None = None
    seen = False
    for item in items:
        timestamp = parse_time(item.get("timestamp"))
        if not seen:
            first, seen = timestamp, True
        containers = item.get("containers") or []
        total = 0
        missing = not containers
        for container in containers:
            usage = (container or {}).get("usage") or {}
            if resource not in usage:
                missing = True
                break
            try:
                total += milli_value(usage[resource])
            except ValueError:
                missing = True
                break
        if missing:
            continue
        try:
            window = parse_duration(str(item.get("window") or "0s"))
        except ValueError:
            window = 0.0
        info[(item.get("metadata") or {}).get("name", "")] = PodMetric(total, timestamp, window)
    return info, first


def pod_requests(pods: Iterable[dict], resource: str, *, container: str = "") -> dict[str, int]:
    """calculatePodRequests: pod name -> its containers' requests summed (milli-units); MetricsError if one lacks it."""
    requests: dict[str, int] = {}
    for pod in pods:
        total = 0
        for c in (pod.get("spec") or {}).get("containers") or ():
            if container and c.get("name") != container:
                continue
            value = ((c.get("resources") or {}).get("requests") or {}).get(resource)
            if value is None:
                raise MetricsError(f"missing request for {resource} in container {c.get('name')} of Pod "
                                   f"{pod['metadata']['name']}")
            total += milli_value(value)
        requests[pod["metadata"]["name"]] = total
    return requests


@dataclass
class PodGroups:
    """groupPods' result: how many pods count as ready, and the names of the others."""

    ready: int
    unready: set[str]
    missing: set[str]
    ignored: set[str]


def _ready_condition(pod: dict) -> dict | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond
    return None


def group_pods(pods: Iterable[dict], metrics: dict[str, PodMetric], resource: str, *, now: dt.datetime,
               settings: CalculatorSettings = CalculatorSettings()) -> PodGroups:
    """groupPods: ready (counted), unready, missing (no metric) and ignored (deleted, Failed) pods."""
    groups = PodGroups(0, set(), set(), set())
    init_period = dt.timedelta(seconds=settings.cpu_initialization_period)
    readiness_delay = dt.timedelta(seconds=settings.initial_readiness_delay)
    for pod in pods:
        name = pod["metadata"]["name"]
        status = pod.get("status") or {}
        if pod["metadata"].get("deletionTimestamp") or status.get("phase") == "Failed":
            groups.ignored.add(name)
            continue
        if status.get("phase") == "Pending":
            groups.unready.add(name)
            continue
        metric = metrics.get(name)
        if metric is None:
            groups.missing.add(name)
            continue
        if resource == "cpu":
            condition = _ready_condition(pod)
            started = parse_time(status.get("startTime"))
            if condition is None or started is None:
                unready = True
            else:
                transition = parse_time(condition.get("lastTransitionTime")) or started
                if started + init_period > now:
                    # within the initialisation period: unready, or no full window sampled since it became ready
                    window = dt.timedelta(seconds=metric.window)
                    unready = condition.get("status") == "False" or (
                        metric.timestamp is not None and metric.timestamp < transition + window)
                else:
                    # later: unready only if not ready and never ready since the initial readiness delay
                    unready = condition.get("status") == "False" and started + readiness_delay > transition
            if unready:
                groups.unready.add(name)
                continue
        groups.ready += 1
    return groups


def utilization_ratio(metrics: dict[str, PodMetric], requests: dict[str, int],
                      target_utilization: int) -> tuple[float, int, int]:
    """GetResourceUtilizationRatio: (usage ratio, current utilization percent, average usage per pod)."""
    metrics_total = requests_total = entries = 0
    for name, metric in metrics.items():
        request = requests.get(name)
        if request is None:
            continue  # an extraneous metric: its pod is not selected
        metrics_total += metric.value
        requests_total += request
        entries += 1
    if requests_total == 0:
        raise MetricsError("no metrics returned matched known pods")
    utilization = metrics_total * 100 // requests_total
    return utilization / target_utilization, utilization, metrics_total // entries


def usage_ratio(metrics: dict[str, PodMetric], target_usage: int) -> tuple[float, int]:
    """GetMetricUsageRatio: (usage ratio, average usage per pod)."""
    usage = sum(m.value for m in metrics.values()) // len(metrics)
    return usage / target_usage, usage


def _within(ratio: float, tolerance: float) -> bool:
    return abs(1.0 - ratio) <= tolerance


def _prepare(pods: list[dict], metrics: dict[str, PodMetric], resource: str, now: dt.datetime,
             settings: CalculatorSettings) -> tuple[dict[str, PodMetric], PodGroups]:
    if not pods:
        raise MetricsError("no pods returned by selector while calculating replica count")
    groups = group_pods(pods, metrics, resource, now=now, settings=settings)
    kept = {name: m for name, m in metrics.items() if name not in groups.ignored and name not in groups.unready}
    if not kept:
        raise MetricsError("did not receive metrics for targeted pods (pods might be unready)")
    return kept, groups


def _settle(current: int, ratio: float, new_ratio: float, counted: int, settings: CalculatorSettings) -> int:
    """The end of both calculations: keep current when within tolerance or when the direction would flip."""
    if _within(new_ratio, settings.tolerance) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current
    proposed = math.ceil(new_ratio * counted)
    if (new_ratio < 1.0 and proposed > current) or (new_ratio > 1.0 and proposed < current):
        return current
    return proposed


def resource_replicas(current: int, target_utilization: int, resource: str, pods: list[dict],
                      metrics: dict[str, PodMetric], *, now: dt.datetime, timestamp: dt.datetime | None = None,
                      settings: CalculatorSettings = CalculatorSettings(), container: str = "") -> Proposal:
    """GetResourceReplicas: the replica count for a Utilization target (percent of the pods' requests)."""
    metrics, groups = _prepare(pods, dict(metrics), resource, now, settings)
    requests = pod_requests(pods, resource, container=container)
    ratio, utilization, average = utilization_ratio(metrics, requests, target_utilization)
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if _within(ratio, settings.tolerance):
            return Proposal(current, utilization, average, timestamp)
        return Proposal(math.ceil(ratio * groups.ready), utilization, average, timestamp)
    if groups.missing:
        if ratio < 1.0:
            fallback = max(100, target_utilization)
            for name in groups.missing:
                metrics[name] = PodMetric(requests.get(name, 0) * fallback // 100)
        elif ratio > 1.0:
            for name in groups.missing:
                metrics[name] = PodMetric(0)
    if scale_up_with_unready:
        for name in groups.unready:
            metrics[name] = PodMetric(0)
    new_ratio, _, _ = utilization_ratio(metrics, requests, target_utilization)
    return Proposal(_settle(current, ratio, new_ratio, len(metrics), settings), utilization, average, timestamp)


def raw_resource_replicas(current: int, target_usage: int, resource: str, pods: list[dict],
                          metrics: dict[str, PodMetric], *, now: dt.datetime, timestamp: dt.datetime | None = None,
                          settings: CalculatorSettings = CalculatorSettings()) -> Proposal:
    """GetRawResourceReplicas (calcPlainMetricReplicas): the replica count for an AverageValue target (milli-units)."""
    metrics, groups = _prepare(pods, dict(metrics), resource, now, settings)
    ratio, usage = usage_ratio(metrics, target_usage)
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if _within(ratio, settings.tolerance):
            return Proposal(current, None, usage, timestamp)
        return Proposal(math.ceil(ratio * groups.ready), None, usage, timestamp)
    if groups.missing:
        for name in groups.missing:
            metrics[name] = PodMetric(target_usage if ratio < 1.0 else 0)
    if scale_up_with_unready:
        for name in groups.unready:
            metrics[name] = PodMetric(0)
    new_ratio, _ = usage_ratio(metrics, target_usage)
    return Proposal(_settle(current, ratio, new_ratio, len(metrics), settings), None, usage, timestamp)


__all__ = ["CalculatorSettings", "MetricsError", "PodGroups", "PodMetric", "Proposal", "group_pods",
           "milli_value", "pod_metrics_info", "pod_requests", "raw_resource_replicas", "resource_replicas",
           "usage_ratio", "utilization_ratio"]
