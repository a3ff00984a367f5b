"""Helpers for the HorizontalPodAutoscaler controller's tests: a real store, a fake clock, fake PodMetrics.

The controller is registered with informers that read the API live (no threads), so a test
calls `reconcile(key)` itself and moves the clock between calls: deterministic, no waiting.
"""

from __future__ import annotations

import datetime as dt

from kctl.controllers.base import ControllerContext, Recorder
from kctl.controllers.podautoscaler.controller import COMPONENT, HorizontalPodAutoscalerController, HPASettings
from kctl.client.informer import as_label_selector
from kctl.machinery.times import format_time

START = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc).timestamp()


class Clock:
    """Epoch seconds that move only when a test says so."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class LiveInformer:
    """An informer stand-in that reads the API at each call (handlers are not called)."""

    def __init__(self, api, resource: str) -> None:
        self.api, self.rt = api, api.resource(resource)

    def add_handler(self, *handlers) -> None:
        self.handlers = handlers

    def get(self, namespace, name):
        return self.api.find(self.rt, name, namespace=namespace)

    def list(self, namespace=None, *, selector=None):
        items, _ = self.api.list(self.rt, namespace=namespace, label_selector=as_label_selector(selector))
        return items


class LiveInformers:
    def __init__(self, api) -> None:
        self.api = api

    def informer(self, resource: str) -> LiveInformer:
        return LiveInformer(self.api, resource)


class Queue:
    def __init__(self) -> None:
        self.added: list[str] = []

    def add(self, key: str) -> None:
        self.added.append(key)

    def add_after(self, key: str, delay: float) -> None:
        self.added.append(key)


class FakeMetrics:
    """PodMetrics objects of exactly metrics-server's shape, from {pod name: cpu millicores}."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.cpu: dict[str, int] = {}
        self.window = "15s"

    def pod_metrics(self, namespace, selector) -> list[dict]:
        stamp = format_time(dt.datetime.fromtimestamp(self.clock() - 1, dt.timezone.utc))
        return [{"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
                 "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
                 "timestamp": stamp, "window": self.window,
                 "containers": [{"name": "c", "usage": {"cpu": f"{milli}m", "memory": "10Mi"}}]}
                for name, milli in sorted(self.cpu.items())]


def controller(api, clock: Clock, metrics=None, **settings) -> HorizontalPodAutoscalerController:
    """A registered controller over api with the fake clock (and fake metrics unless None is wanted)."""
    ctl = HorizontalPodAutoscalerController(settings=HPASettings(**settings), metrics=metrics)
    ctx = ControllerContext(api=api, informers=LiveInformers(api), recorder=Recorder(api, component=COMPONENT),
                            clock=clock)
    ctl.register(ctx, Queue())
    return ctl


def deployment(api, *, replicas: int, kind: str = "Deployment", name: str = "web") -> dict:
    spec: dict = {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}},
                               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return api.create({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"},
                       "spec": spec})


def running_pod(api, name: str, clock: Clock, *, cpu_request: str = "100m", started_ago: float = 3600) -> dict:
    """A Running, Ready pod labelled app=web that started long ago (its cpu samples count)."""
    pod = api.create({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
                      "spec": {"containers": [{"name": "c", "image": "busybox",
                                               "resources": {"requests": {"cpu": cpu_request}}}]}})
    started = format_time(dt.datetime.fromtimestamp(clock() - started_ago, dt.timezone.utc))
    ready = format_time(dt.datetime.fromtimestamp(clock() - started_ago + 5, dt.timezone.utc))
    pod["status"] = {"phase": "Running", "startTime": started,
                     "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ready}]}
    return api.update_status(pod)


def hpa(api, *, min_replicas: int | None = 1, max_replicas: int = 10, metrics: list | None = None,
        behavior: dict | None = None, target: dict | None = None) -> dict:
    spec: dict = {"scaleTargetRef": target or {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                  "maxReplicas": max_replicas}
    if min_replicas is not None:
        spec["minReplicas"] = min_replicas
    if metrics is not None:
        spec["metrics"] = metrics
    if behavior is not None:
        spec["behavior"] = behavior
    return api.create({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                       "metadata": {"name": "web", "namespace": "default"}, "spec": spec})


def cpu_utilization(percent: int) -> list[dict]:
    return [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                         "averageUtilization": percent}}}]


def replicas_of(api, kind: str = "deployments", name: str = "web") -> int:
    return api.get(api.resource(kind), name, namespace="default")["spec"]["replicas"]


def hpa_status(api) -> dict:
    return api.get(api.resource("hpa"), "web", namespace="default").get("status") or {}


def condition(status: dict, type_: str) -> tuple[str, str, str]:
    cond = next(c for c in status.get("conditions") or () if c["type"] == type_)
    return cond["status"], cond["reason"], cond["message"]


def events(api) -> list[tuple[str, str, str]]:
    items, _ = api.list(api.resource("events"), namespace="default")
    return [(e["type"], e["reason"], e["message"]) for e in items
            if (e.get("involvedObject") or {}).get("kind") == "HorizontalPodAutoscaler"]
