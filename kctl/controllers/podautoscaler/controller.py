"""The HorizontalPodAutoscaler controller: scales Deployments, ReplicaSets and StatefulSets to their pods' usage.

Run by the controller manager in `kctl daemon` as "horizontal-pod-autoscaler" (see
kctl/daemon/controllers.py); written after Kubernetes' pkg/controller/podautoscaler
(horizontal.go's reconcileAutoscaler). Every `--horizontal-pod-autoscaler-sync-period`
(15 s) per HPA key it:

- re-reads the HPA from the informer cache (not found: its history is forgotten; success);
- reads the target's scale subresource (kctl/client/scale.py; AbleToScale False
  `FailedGetScale` and a Warning Event when it cannot);
- with the target at 0 replicas (and minReplicas > 0) does nothing (ScalingActive False
  `ScalingDisabled`); above maxReplicas or below minReplicas goes straight to the bound;
- otherwise lists the target's pods (the Scale's selector) and their PodMetrics
  (metrics.py) and asks the replica calculator (replicas.py) for each metric of the spec
  (no metrics: cpu at 80% of requests, as the API's defaulting); the highest proposal wins;
  a failing metric is a `FailedGetResourceMetric` Warning and ScalingActive False, and
  when every metric fails (or one fails and the rest would scale down) nothing is scaled
  (`FailedComputeMetricsReplicas`);
- stabilizes and limits the proposal (behavior.py) and, when it differs from the current
  count, writes the Scale (`SuccessfulRescale` "New size: 3; reason: cpu resource utilization
  (percentage of request) above target", or `FailedRescale`);
- writes status (status.py) when it changed: currentReplicas, desiredReplicas,
  currentMetrics, lastScaleTime, the AbleToScale / ScalingActive / ScalingLimited conditions.

Deviations (docs/controllers.md): only Resource and ContainerResource metrics (cpu, memory)
are read; Pods, Object and External metrics need a custom metrics API kctl does not serve and
report `FailedGetPodsMetric` / `FailedGetObjectMetric` / `FailedGetExternalMetric`.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from kctl.machinery.errors import APIError, Conflict, NotFound
from kctl.machinery.selectors import parse_label_selector
from kctl.machinery.times import to_datetime
from kctl.client.scale import get_scale, update_scale
from kctl.controllers.base import Recorder, key_of, split_key
from kctl.controllers.podautoscaler import behavior as behaviors
from kctl.controllers.podautoscaler import status as statuses
from kctl.controllers.podautoscaler.metrics import APIResourceMetrics, ResourceMetricsSource
from kctl.controllers.podautoscaler.replicas import (CalculatorSettings, MetricsError, Proposal, pod_metrics_info,
                                                     raw_resource_replicas, resource_replicas, milli_value)

if TYPE_CHECKING:
    import datetime as dt

    from kctl.machinery.resources import ResourceType
    from kctl.machinery.selectors import LabelSelector

log = logging.getLogger("kctl.controllers.podautoscaler")

#: the Events' source, as Kubernetes' HPA controller names itself
COMPONENT = "horizontal-pod-autoscaler"
#: autoscaling.DefaultCPUUtilization: the target of an HPA that names no metric
DEFAULT_CPU_UTILIZATION = 80
_SOURCE_FIELD = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods",
                 "Object": "object", "External": "external"}


@dataclass(frozen=True)
class HPASettings:
    """kube-controller-manager's --horizontal-pod-autoscaler-* flags (seconds and a ratio)."""

    sync_period: float = 15.0
    downscale_stabilization: float = 300.0
    tolerance: float = 0.1
    cpu_initialization_period: float = 300.0
    initial_readiness_delay: float = 30.0

    @property
    def calculator(self) -> CalculatorSettings:
        return CalculatorSettings(tolerance=self.tolerance, cpu_initialization_period=self.cpu_initialization_period,
                                  initial_readiness_delay=self.initial_readiness_delay)


class _MetricFailure(Exception):
    """One metric could not be computed: the ScalingActive reason and the error text."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def metric_specs(hpa: dict) -> list[dict]:
    """spec.metrics, or the API's default (cpu at 80% of requests) when there are none."""
    given = (hpa.get("spec") or {}).get("metrics")
    if given:
        return [m for m in given if isinstance(m, dict)]
    return [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]


class HorizontalPodAutoscalerController:
    """Sets each HPA's target to the replica count its metrics call for, within its bounds and behavior."""

    name = "horizontal-pod-autoscaler"

    def __init__(self, *, settings: HPASettings = HPASettings(), metrics: ResourceMetricsSource | None = None) -> None:
        self.settings = settings
        self.history = behaviors.History()
        self._metrics = metrics

    def register(self, ctx, queue) -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.clock: Callable[[], float] = ctx.clock
        self.recorder = Recorder(self.api, component=COMPONENT)
        self.metrics: ResourceMetricsSource = self._metrics or APIResourceMetrics(self.api)
        self.hpas = ctx.informers.informer("horizontalpodautoscalers")
        self.pods = ctx.informers.informer("pods")
        self.hpas.add_handler(self._on_add, self._on_update, self._on_delete)

    # -- event handlers: a new or changed spec at once; anything else at the next sync ------------

    def _on_add(self, hpa: dict) -> None:
        self.queue.add(key_of(hpa))

    def _on_update(self, old: dict, new: dict) -> None:
        if old.get("spec") != new.get("spec"):
            self.queue.add(key_of(new))
        else:
            self.queue.add_after(key_of(new), self.settings.sync_period)

    def _on_delete(self, hpa: dict) -> None:
        self.history.forget(key_of(hpa))

    def object_for(self, key: str) -> dict | None:
        return self.hpas.get(*split_key(key))

    # -- reconcile -------------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        """reconcileAutoscaler for one HPA; always looked at again after the sync period while it exists."""
        namespace, name = split_key(key)
        cached = self.hpas.get(namespace, name)
        if cached is None:
            self.history.forget(key)
            return None
        hpa = copy.deepcopy(cached)
        original = copy.deepcopy(hpa.get("status") or {})
        status = copy.deepcopy(original)
        now_ts = float(self.clock())
        now = to_datetime(now_ts)
        try:
            self._reconcile(key, hpa, status, now_ts, now)
        finally:
            self._write_status(hpa, original, status)
        return self.settings.sync_period

    def _event(self, hpa: dict, type_: str, reason: str, message: str) -> None:
        self.recorder.event(hpa, type_, reason, message)

    def _reconcile(self, key: str, hpa: dict, status: dict, now_ts: float, now: dt.datetime) -> None:
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        namespace = hpa["metadata"].get("namespace") or "default"
        try:
            rt = self.api.registry.for_object({"apiVersion": ref.get("apiVersion") or "", "kind": ref.get("kind")})
            scale = get_scale(self.api, rt, ref.get("name") or "", namespace=namespace)
        except APIError as exc:
            self._event(hpa, "Warning", "FailedGetScale", exc.message)
            statuses.set_condition(status, statuses.ABLE_TO_SCALE, "False", "FailedGetScale",
                                   f"the HPA controller was unable to get the target's current scale: {exc.message}",
                                   now)
            return
        statuses.set_condition(status, statuses.ABLE_TO_SCALE, "True", "SucceededGetScale",
                               "the HPA controller was able to get the target's current scale", now)
        current = int(scale["spec"]["replicas"])
        self.history.record_initial(key, current, now_ts)
        min_replicas = int(spec["minReplicas"]) if spec.get("minReplicas") is not None else 1
        max_replicas = int(spec.get("maxReplicas") or 0)
        metrics: list[dict] | None = None
        reason = ""
        rescale = True
        desired = 0
        if current == 0 and min_replicas != 0:
            rescale = False
            statuses.set_condition(status, statuses.SCALING_ACTIVE, "False", "ScalingDisabled",
                                   "scaling is disabled since the replica count of the target is zero", now)
        elif current > max_replicas:
            reason, desired = "Current number of replicas above Spec.MaxReplicas", max_replicas
        elif current < min_replicas:
            reason, desired = "Current number of replicas below Spec.MinReplicas", min_replicas
        else:
            proposed, metric, metrics, error = self._replicas_for_metrics(hpa, scale, status, now)
            if proposed < 0:
                status.update(statuses.set_status(status, current=current,
                                                  desired=int(status.get("desiredReplicas") or 0),
                                                  metrics=metrics, rescaled=False, now=now))
                self._event(hpa, "Warning", "FailedComputeMetricsReplicas", error)
                return
            desired = max(proposed, 0)
            reason = statuses.scaling_reason(metric, desired, current)
            normalized = behaviors.normalize(
                self.history, key, current=current, desired=desired, min_replicas=min_replicas,
                max_replicas=max_replicas, now=now_ts, downscale_stabilization=self.settings.downscale_stabilization,
                behavior=behaviors.behavior_of(hpa, downscale_stabilization=self.settings.downscale_stabilization))
            statuses.set_condition(status, statuses.ABLE_TO_SCALE, "True", normalized.able_reason,
                                   normalized.able_message, now)
            statuses.set_condition(status, statuses.SCALING_LIMITED, "True" if normalized.limited else "False",
                                   normalized.limited_reason, normalized.limited_message, now)
            desired = normalized.replicas
            rescale = desired != current
        if rescale:
            rt = self.api.registry.for_object({"apiVersion": ref.get("apiVersion") or "", "kind": ref.get("kind")})
            try:
                update_scale(self.api, rt, dict(scale, spec={"replicas": desired}))
            except APIError as exc:
                self._event(hpa, "Warning", "FailedRescale",
                            f"New size: {desired}; reason: {reason}; error: {exc.message}")
                statuses.set_condition(status, statuses.ABLE_TO_SCALE, "False", "FailedUpdateScale",
                                       f"the HPA controller was unable to update the target scale: {exc.message}", now)
                status.update(statuses.set_status(status, current=current,
                                                  desired=int(status.get("desiredReplicas") or 0),
                                                  metrics=metrics, rescaled=False, now=now))
                return
            statuses.set_condition(status, statuses.ABLE_TO_SCALE, "True", "SucceededRescale",
                                   f"the HPA controller was able to update the target scale to {desired}", now)
            self._event(hpa, "Normal", "SuccessfulRescale", f"New size: {desired}; reason: {reason}")
            self.history.store_scale_event(
                key, behaviors.behavior_of(hpa, downscale_stabilization=self.settings.downscale_stabilization),
                current, desired, now_ts)
            log.info("horizontal-pod-autoscaler %s: rescaled %s/%s from %d to %d: %s", key, ref.get("kind"),
                     ref.get("name"), current, desired, reason)
        else:
            desired = current
        new = statuses.set_status(status, current=current, desired=desired, metrics=metrics, rescaled=rescale,
                                  now=now)
        status.clear()
        status.update(new)

    # -- metrics ---------------------------------------------------------------------------

    def _replicas_for_metrics(self, hpa: dict, scale: dict, status: dict,
                              now: dt.datetime) -> tuple[int, str, list[dict], str]:
        """computeReplicasForMetrics: (the highest proposal or -1, its metric's name, metric statuses, error)."""
        selector = self._selector(hpa, scale, status, now)
        specs = metric_specs(hpa)
        if selector is None:
            return -1, "", [], ("selector is required" if not (scale.get("status") or {}).get("selector")
                                else "couldn't convert selector into a corresponding internal selector object")
        current = int(scale["spec"]["replicas"])
        namespace = hpa["metadata"].get("namespace") or "default"
        replicas, metric = 0, ""
        metric_statuses: list[dict] = []
        invalid = 0
        first: _MetricFailure | None = None
        fetched: list = []  # the PodMetrics, read once per sync (or the error reading them)

        def pod_metrics() -> list[dict]:
            if not fetched:
                try:
                    fetched.append(self.metrics.pod_metrics(namespace, selector))
                except MetricsError as exc:
                    fetched.append(exc)
            if isinstance(fetched[0], MetricsError):
                raise fetched[0]
            return fetched[0]

        for spec in specs:
            try:
                proposal, name, metric_status = self._replicas_for_metric(spec, current, namespace, selector, now,
                                                                          pod_metrics)
            except _MetricFailure as failure:
                metric_statuses.append({"type": ""})
                self._event(hpa, "Warning", failure.reason, failure.message)
                if first is None:
                    first = failure
                invalid += 1
                continue
            metric_statuses.append(metric_status)
            if replicas == 0 or proposal.replicas > replicas:
                replicas, metric = proposal.replicas, name
        error = ""
        if first is not None:
            error = f"invalid metrics ({invalid} invalid out of {len(specs)}), first error is: {first.message}"
        if invalid >= len(specs) or (invalid > 0 and replicas < current):
            assert first is not None
            statuses.set_condition(status, statuses.SCALING_ACTIVE, "False", first.reason,
                                   f"the HPA was unable to compute the replica count: {first.message}", now)
            return -1, "", metric_statuses, error
        statuses.set_condition(status, statuses.SCALING_ACTIVE, "True", "ValidMetricFound",
                               f"the HPA was able to successfully calculate a replica count from {metric}", now)
        return replicas, metric, metric_statuses, error

    def _selector(self, hpa: dict, scale: dict, status: dict, now: dt.datetime) -> LabelSelector | None:
        """validateAndParseSelector: the Scale's selector, or None (Event and ScalingActive False) when unusable."""
        text = (scale.get("status") or {}).get("selector") or ""
        if not text:
            self._event(hpa, "Warning", "SelectorRequired", "selector is required")
            statuses.set_condition(status, statuses.SCALING_ACTIVE, "False", "InvalidSelector",
                                   "the HPA target's scale is missing a selector", now)
            return None
        try:
            return parse_label_selector(text)
        except APIError as exc:
            message = f"couldn't convert selector into a corresponding internal selector object: {exc.message}"
            self._event(hpa, "Warning", "InvalidSelector", message)
            statuses.set_condition(status, statuses.SCALING_ACTIVE, "False", "InvalidSelector", message, now)
            return None

    def _replicas_for_metric(self, spec: dict, current: int, namespace: str, selector: LabelSelector,
                             now: dt.datetime, pod_metrics: Callable[[], list[dict]]) -> tuple[Proposal, str, dict]:
        """computeReplicasForMetric for one MetricSpec: (proposal, metric name, MetricStatus); _MetricFailure."""
        kind = spec.get("type")
        if kind not in ("Resource", "ContainerResource"):
            reason = {"Pods": "FailedGetPodsMetric", "Object": "FailedGetObjectMetric",
                      "External": "FailedGetExternalMetric"}.get(str(kind), "InvalidMetricSourceType")
            if reason == "InvalidMetricSourceType":
                raise _MetricFailure(reason, f'unknown metric source type "{kind}"')
            raise _MetricFailure(reason, f"unable to get {str(kind).lower()} metric: kctl serves no custom or "
                                         "external metrics API (custom.metrics.k8s.io, external.metrics.k8s.io)")
        source = spec.get(_SOURCE_FIELD[kind]) or {}
        resource = str(source.get("name") or "")
        container = str(source.get("container") or "") if kind == "ContainerResource" else ""
        target = source.get("target") or {}
        reason = "FailedGetResourceMetric" if kind == "Resource" else "FailedGetContainerResourceMetric"
        what = "usage" if target.get("averageValue") is not None else "utilization"
        try:
            items = pod_metrics()
            if not items:
                raise MetricsError("no metrics returned from resource metrics API")
            if container:
                items = [dict(i, containers=[c for c in i.get("containers") or () if c.get("name") == container])
                         for i in items]
            info, timestamp = pod_metrics_info(items, resource)
            pods = self.pods.list(namespace, selector=selector)
            if target.get("averageValue") is not None:
                try:
                    proposal = raw_resource_replicas(current, milli_value(target["averageValue"]), resource, pods,
                                                     info, now=now, timestamp=timestamp,
                                                     settings=self.settings.calculator)
                except MetricsError as exc:
                    raise _MetricFailure(reason, f"failed to get {resource} usage: {exc}") from None
                name = f"{resource} resource" if not container else f"{resource} container resource"
            elif target.get("averageUtilization") is not None:
                try:
                    proposal = resource_replicas(current, int(target["averageUtilization"]), resource, pods, info,
                                                 now=now, timestamp=timestamp, settings=self.settings.calculator,
                                                 container=container)
                except MetricsError as exc:
                    raise _MetricFailure(reason, f"failed to get {resource} utilization: {exc}") from None
                name = (f"{resource} resource utilization (percentage of request)" if not container
                        else f"{resource} container resource utilization (percentage of request)")
            else:
                raise _MetricFailure(reason, "invalid resource metric source: neither an average utilization target "
                                             "nor an average value (usage) target was set")
        except MetricsError as exc:
            raise _MetricFailure(reason, f"failed to get {resource} {what}: unable to get metrics for resource "
                                         f"{resource}: {exc}") from None
        metric_status = statuses.resource_metric_status(resource, average_milli=proposal.average,
                                                        utilization=proposal.utilization)
        if container:
            metric_status = {"type": "ContainerResource",
                             "containerResource": dict(metric_status["resource"], container=container)}
        return proposal, name, metric_status

    # -- status ----------------------------------------------------------------------------

    def _write_status(self, hpa: dict, original: dict, status: dict) -> None:
        """updateStatusIfNeeded: write the status when it changed; a Conflict is retried on the live object."""
        if status == original:
            return
        status.setdefault("desiredReplicas", 0)  # never omitted by Kubernetes' JSON (and required)
        status.setdefault("currentMetrics", None)
        rt: ResourceType = self.api.resource("horizontalpodautoscalers")
        new = copy.deepcopy(hpa)
        new["status"] = status
        new["metadata"].pop("resourceVersion", None)  # status is ours alone: write over a newer spec change
        for _ in range(3):
            try:
                self.api.update_status(new)
                return
            except NotFound:
                return
            except Conflict:
                live = self.api.find(rt, hpa["metadata"]["name"], namespace=hpa["metadata"].get("namespace"))
                if live is None or live["metadata"].get("uid") != hpa["metadata"].get("uid"):
                    return
                new = dict(live, status=status)
            except APIError as exc:
                log.warning("horizontal-pod-autoscaler %s: status not written: %s", key_of(hpa), exc.message)
                return


__all__ = ["COMPONENT", "DEFAULT_CPU_UTILIZATION", "HPASettings", "HorizontalPodAutoscalerController",
           "metric_specs"]
