"""Helpers for the pod-logic tests: Pod builders and a Harness that syncs one pod on a MemoryRuntime.

conftest.py makes a Harness the `node` fixture. It keeps the Pod as the agent would:
after each sync the returned status is stored on the Pod, events are collected, and
ConfigMaps/Secrets are served from a dict.
"""

from __future__ import annotations

import base64
import copy
from dataclasses import dataclass, field

from kctl.agent.backoff import Backoff
from kctl.agent.podsync import EventSpec, SyncContext, SyncResult, sync_pod, terminate_pod
from kctl.agent.probes import ProbeManager
from kctl.runtime.memory import FakeClock, MemoryRuntime

IMAGE = "localhost/busybox:demo"
NODE = "n1"
HOST_IP = "10.77.0.11"


def make_pod(name: str = "web", *, containers: list[dict] | None = None, init: list[dict] | None = None,
             restart_policy: str = "Always", volumes: list[dict] | None = None, uid: str | None = None,
             namespace: str = "default", **spec: object) -> dict:
    """A bound Pod as the API layer stores it (defaults the tests do not care about left out)."""
    pod_spec: dict = {"nodeName": NODE, "restartPolicy": restart_policy, "terminationGracePeriodSeconds": 30,
                      "containers": containers if containers is not None else [container("app")], **spec}
    if init:
        pod_spec["initContainers"] = init
    if volumes:
        pod_spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid or f"{name}-0123-4567-89ab-cdef",
                         "labels": {"app": name}, "annotations": {"note": "hi"}},
            "spec": pod_spec}


def container(name: str, *, command: list[str] | None = None, image: str = IMAGE, **fields: object) -> dict:
    """A container running `command` (default: runs until stopped)."""
    out: dict = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent", **fields}
    if command is not None:
        out["command"] = command
    return out


def config_map(name: str, data: dict[str, str], *, namespace: str = "default") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": dict(data)}


def secret(name: str, data: dict[str, str], *, namespace: str = "default") -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


@dataclass
class Harness:
    """One node: clock, runtime, context, the objects its pods may read, and one Pod synced."""

    clock: FakeClock
    runtime: MemoryRuntime
    ctx: SyncContext
    objects: dict[tuple[str, str, str], dict] = field(default_factory=dict)
    pod: dict = field(default_factory=dict)
    events: list[EventSpec] = field(default_factory=list)

    def lookup(self, kind: str, namespace: str, name: str) -> dict | None:
        obj = self.objects.get((kind, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def put(self, obj: dict) -> None:
        meta = obj["metadata"]
        self.objects[(obj["kind"], meta.get("namespace", "default"), meta["name"])] = obj

    def sync(self, pod: dict | None = None) -> SyncResult:
        """sync_pod, then store the status on the Pod as the agent does."""
        if pod is not None:
            self.pod = pod
        before = copy.deepcopy(self.pod)
        result = sync_pod(self.pod, self.runtime, self.ctx)
        assert self.pod == before, "sync_pod changed the Pod it was given"
        self.pod = {**self.pod, "status": result.status}
        self.events.extend(result.events)
        return result

    def terminate(self, *, grace_seconds: int) -> SyncResult:
        result = terminate_pod(self.pod, self.runtime, self.ctx, grace_seconds=grace_seconds)
        self.events.extend(result.events)
        return result

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def restart_agent(self) -> None:
        """A new agent process: fresh context (back-off, probes, volume hashes), same runtime."""
        self.ctx = new_context(self.clock, self.lookup)

    def status(self, name: str) -> dict:
        """The containerStatuses (or initContainerStatuses) entry of one container."""
        status = self.pod["status"]
        for entry in status.get("initContainerStatuses", []) + status.get("containerStatuses", []):
            if entry["name"] == name:
                return entry
        raise KeyError(name)

    def condition(self, kind: str) -> dict:
        return next(c for c in self.pod["status"]["conditions"] if c["type"] == kind)

    def reasons(self) -> list[str]:
        return [e.reason for e in self.events]

    def container_ids(self, name: str) -> list[str]:
        return self.runtime.container_ids(name=name)

    def running_id(self, name: str) -> str:
        return self.status(name)["containerID"].removeprefix("podman://")


def new_context(clock: FakeClock, lookup) -> SyncContext:
    return SyncContext(node_name=NODE, host_ip=HOST_IP, lookup=lookup,
                       backoff=Backoff(initial=10.0, maximum=300.0, reset_after=600.0),
                       probes=ProbeManager(), now=clock)
