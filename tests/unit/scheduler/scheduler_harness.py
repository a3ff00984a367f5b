"""Builders for the scheduler's own tests (queue, cache, loop): Node and Pod objects, a fake clock."""

from __future__ import annotations


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def node(name: str, *, cpu: str = "4", memory: str = "8Gi", pods: int = 110, labels: dict | None = None,
         taints: list[dict] | None = None, unschedulable: bool = False) -> dict:
    """A Node with allocatable resources (as the node agent reports them)."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    spec: dict = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": spec, "status": {"capacity": dict(allocatable), "allocatable": allocatable}}


def pod(name: str, *, namespace: str = "default", cpu: str | None = None, memory: str | None = None,
        priority: int | None = None, node_name: str | None = None, scheduler_name: str | None = None,
        labels: dict | None = None, uid: str | None = None, **spec_fields) -> dict:
    """A Pod with one container requesting cpu/memory (when given)."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    spec: dict = {"containers": [{"name": "c", "image": "busybox",
                                  "resources": {"requests": requests} if requests else {}}], **spec_fields}
    if priority is not None:
        spec["priority"] = priority
    if node_name:
        spec["nodeName"] = node_name
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    meta: dict = {"name": name, "namespace": namespace, "labels": labels or {}}
    if uid:
        meta["uid"] = uid
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
