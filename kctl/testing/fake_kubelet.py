"""A fake kubelet for controller tests and scale benchmarks: Nodes and pod status, no containers.

`FakeKubelet(api, nodes=[...])` registers Node objects (capacity cpu/memory/pods, Ready)
and, from its own pod informer (kctl/client/informer.py), takes every pod bound to
one of its nodes (spec.nodeName) through what a kubelet would report:

- after `ready_delay` seconds it posts Running with Ready/ContainersReady True,
  containerStatuses (running), hostIP, podIP and startTime;
- a pod labelled `fake.kctl.io/never-ready: "true"` runs but never becomes Ready;
- a pod labelled `fake.kctl.io/exit-code: "N"` terminates (N == 0: Succeeded, else
  Failed) `fake.kctl.io/exit-after` seconds (default 0) after it started running;
- a pod with a deletionTimestamp is deleted at once (grace period 0).

Status writes are batched: everything due at one moment is committed in one store
transaction (the API layer's own prepare/commit steps for the status subresource), so
10,000 pods cost a few transactions, not 10,000. Used by tests/unit/controllers and
benchmarks/; nothing in `kctl daemon` imports it.
"""

from __future__ import annotations

import copy
import datetime as dt
import heapq
import itertools
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from kctl.machinery.errors import AlreadyExists, APIError, Conflict, NotFound

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.client.informer import Informer

log = logging.getLogger("kctl.testing.fake_kubelet")

LABEL_NEVER_READY = "fake.kctl.io/never-ready"
LABEL_EXIT_CODE = "fake.kctl.io/exit-code"
LABEL_EXIT_AFTER = "fake.kctl.io/exit-after"
LABEL_FAKE_NODE = "fake.kctl.io/node"
LEASE_NAMESPACE = "kube-node-lease"
KUBELET_VERSION = "fake-kubelet"
TERMINAL_PHASES = ("Succeeded", "Failed")
#: most status writes committed in one transaction
BATCH = 1000


@dataclass(frozen=True)
class FakeNodeCapacity:
    """What each fake Node reports as capacity (and allocatable)."""

    cpu: str = "8"
    memory: str = "32Gi"
    pods: str = "110"

    def as_resources(self) -> dict[str, str]:
        return {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}


def rfc3339(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _condition(type_: str, ok: bool, when: str, *, reason: str = "") -> dict:
    cond = {"type": type_, "status": "True" if ok else "False", "lastProbeTime": None, "lastTransitionTime": when}
    if reason:
        cond["reason"] = reason
    return cond


def _label(pod: dict, name: str) -> str | None:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    value = labels.get(name)
    return value if isinstance(value, str) else None


def exit_code_of(pod: dict) -> int | None:
    """The exit code a pod is labelled to end with, or None (it runs until deleted)."""
    value = _label(pod, LABEL_EXIT_CODE)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return 1


def exit_after_of(pod: dict) -> float:
    try:
        return max(0.0, float(_label(pod, LABEL_EXIT_AFTER) or 0))
    except ValueError:
        return 0.0


class FakeKubelet:
    """Fake node agents for many nodes at once (see module doc). Thread-safe; one worker thread."""

    def __init__(self, api: API, *, nodes: Sequence[str], ready_delay: float = 0.0,
                 clock: Callable[[], float] = time.time, capacity: FakeNodeCapacity = FakeNodeCapacity(),
                 node_labels: dict[str, str] | None = None, lease_interval: float = 0.0,
                 informer: "Informer | None" = None, batch: int = BATCH) -> None:
        from kctl.client.informer import Informer

        self.api = api
        self.nodes = list(dict.fromkeys(nodes))
        self.ready_delay = ready_delay
        self.clock = clock
        self.capacity = capacity
        self.node_labels = dict(node_labels or {})
        #: seconds between node Lease renewals in kube-node-lease; 0 = no Leases
        self.lease_interval = lease_interval
        self.batch = max(1, batch)
        self.pods = informer or Informer(api, "pods")
        self._own_informer = informer is None
        self._node_set = set(self.nodes)
        self._node_ip = {name: f"10.{(i >> 8) & 255}.{i & 255}.1" for i, name in enumerate(self.nodes, start=1)}
        self._ip_seq = itertools.count(1)
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, tuple[str, str]]] = []
        self._due: dict[tuple[str, str], float] = {}
        self._seq = itertools.count()
        self._first_seen: dict[str, float] = {}  # pod uid -> when it was first seen bound here
        self._thread: threading.Thread | None = None
        #: pods moved to Running / terminal phases and pods deleted, for tests and benchmarks
        self.started = 0
        self.finished = 0
        self.deleted = 0
        self.pods.add_handler(on_add=self._observe, on_update=lambda _old, new: self._observe(new),
                              on_delete=self._forget)

    # -- nodes ---------------------------------------------------------------------------

    def node_object(self, name: str) -> dict:
        """The fake Node `name` as registered: labels, capacity, Ready, addresses."""
        now = rfc3339(self.clock())
        resources = self.capacity.as_resources()
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  LABEL_FAKE_NODE: "true", **self.node_labels}},
            "spec": {},
            "status": {
                "capacity": dict(resources), "allocatable": dict(resources),
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "fake kubelet is posting ready status",
                                "lastHeartbeatTime": now, "lastTransitionTime": now}],
                "addresses": [{"type": "InternalIP", "address": self._node_ip[name]},
                              {"type": "Hostname", "address": name}],
                "nodeInfo": {"kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": KUBELET_VERSION,
                             "containerRuntimeVersion": "fake://0", "operatingSystem": "linux",
                             "architecture": "amd64", "osImage": "fake", "kernelVersion": "fake",
                             "bootID": name, "machineID": name, "systemUUID": name},
            },
        }

    def register_nodes(self) -> list[dict]:
        """Create the Nodes that do not exist yet (one transaction); returns every Node."""
        rt = self.api.resource("nodes")
        existing = {n["metadata"]["name"] for n in self.api.list(rt)[0]}
        missing = [name for name in self.nodes if name not in existing]
        for start in range(0, len(missing), self.batch):
            chunk = missing[start:start + self.batch]
            for result in self.api.write_all([("create", self.node_object(name)) for name in chunk]):
                if result.error is not None and not isinstance(result.error, AlreadyExists):
                    raise result.error
        if self.lease_interval > 0:
            self.renew_leases()
        return [self.api.get(rt, name) for name in self.nodes]

    def renew_leases(self) -> None:
        """Create or renew each node's Lease in kube-node-lease (one transaction per batch)."""
        self._ensure_namespace(LEASE_NAMESPACE)
        now = rfc3339_micro(self.clock())
        duration = max(1, int(self.lease_interval * 4))
        rt = self.api.resource("leases")
        have = {lease["metadata"]["name"] for lease in self.api.list(rt, namespace=LEASE_NAMESPACE)[0]}
        ops = []
        for name in self.nodes:
            lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
                     "spec": {"holderIdentity": name, "leaseDurationSeconds": duration, "renewTime": now}}
            ops.append(("update" if name in have else "create", lease))
        for start in range(0, len(ops), self.batch):
            for result in self.api.write_all(ops[start:start + self.batch]):
                if result.error is not None:
                    log.warning("fake kubelet: lease: %s", result.error)

    def _ensure_namespace(self, name: str) -> None:
        try:
            self.api.get(self.api.resource("namespaces"), name)
        except NotFound:
            try:
                self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            except AlreadyExists:
                pass

    # -- running -------------------------------------------------------------------------

    def start(self, stop: threading.Event) -> threading.Thread:
        """Register the Nodes, start the pod informer (if its own) and the worker thread."""
        self.register_nodes()
        if self._own_informer:
            self.pods.start(stop)
        if self._thread is None:
            self._thread = threading.Thread(target=self.run, args=(stop,), name="fake-kubelet", daemon=True)
            self._thread.start()
        return self._thread

    def run(self, stop: threading.Event) -> None:
        """Post due pod statuses and delete terminating pods until `stop` is set."""
        waker = threading.Thread(target=self._wake_on, args=(stop,), daemon=True, name="fake-kubelet-stop")
        waker.start()
        next_lease = self.clock() + self.lease_interval if self.lease_interval > 0 else None
        while not stop.is_set():
            with self._cond:
                wait = None
                if self._heap:
                    wait = max(0.0, self._heap[0][0] - self.clock())
                if next_lease is not None:
                    lease_wait = max(0.0, next_lease - self.clock())
                    wait = lease_wait if wait is None else min(wait, lease_wait)
                if wait is None or wait > 0:
                    self._cond.wait(0.5 if wait is None else min(wait, 0.5))
            if stop.is_set():
                return
            try:
                self.sync_due()
                if next_lease is not None and self.clock() >= next_lease:
                    self.renew_leases()
                    next_lease = self.clock() + self.lease_interval
            except Exception:
                log.exception("fake kubelet: sync failed")
                stop.wait(0.1)

    def _wake_on(self, stop: threading.Event) -> None:
        stop.wait()
        with self._cond:
            self._cond.notify_all()

    # -- pods ------------------------------------------------------------------------------

    def _observe(self, pod: dict) -> None:
        """Informer handler: schedule the pod's next step if it is bound to one of our nodes."""
        spec = pod.get("spec") or {}
        if spec.get("nodeName") not in self._node_set:
            return
        meta = pod.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        now = self.clock()
        if meta.get("deletionTimestamp"):
            self._schedule(key, now)
            return
        uid = meta.get("uid") or ""
        first = self._first_seen.setdefault(uid, now)
        due = self._next_step(pod, first)
        if due is not None:
            self._schedule(key, due)

    def _forget(self, pod: dict) -> None:
        self._first_seen.pop((pod.get("metadata") or {}).get("uid") or "", None)

    def _schedule(self, key: tuple[str, str], due: float) -> None:
        with self._cond:
            current = self._due.get(key)
            if current is not None and current <= due:
                return
            self._due[key] = due
            heapq.heappush(self._heap, (due, next(self._seq), key))
            self._cond.notify()

    def _next_step(self, pod: dict, first_seen: float) -> float | None:
        """When the pod's status must next change (None: it is where it should end)."""
        status = pod.get("status") or {}
        phase = status.get("phase")
        if phase in TERMINAL_PHASES:
            return None
        running_at = first_seen + self.ready_delay
        if phase != "Running":
            return running_at
        if exit_code_of(pod) is not None:
            return running_at + exit_after_of(pod)
        return None

    def sync_due(self) -> int:
        """Act on every pod whose time has come: post statuses in batches, delete terminating pods."""
        now = self.clock()
        keys: list[tuple[str, str]] = []
        with self._cond:
            while self._heap and self._heap[0][0] <= now:
                due, _, key = heapq.heappop(self._heap)
                if self._due.get(key) == due:
                    del self._due[key]
                    keys.append(key)
        writes: list[dict] = []
        deletes: list[dict] = []
        for key in keys:
            pod = self.pods.get(*key)
            if pod is None or (pod.get("spec") or {}).get("nodeName") not in self._node_set:
                continue
            if (pod.get("metadata") or {}).get("deletionTimestamp"):
                deletes.append(pod)
                continue
            status = self.desired_status(pod, now)
            if status is not None:
                writes.append(status)
        for start in range(0, len(writes), self.batch):
            self._write_statuses(writes[start:start + self.batch])
        for pod in deletes:
            self._delete(pod)
        return len(writes) + len(deletes)

    def desired_status(self, pod: dict, now: float) -> dict | None:
        """The pod (a copy) with the status this kubelet reports at `now`, or None if unchanged."""
        meta = pod["metadata"]
        status = pod.get("status") or {}
        phase = status.get("phase")
        if phase in TERMINAL_PHASES:
            return None
        first = self._first_seen.setdefault(meta.get("uid") or "", now)
        running_at = first + self.ready_delay
        if now < running_at:
            self._schedule((meta.get("namespace") or "", meta["name"]), running_at)
            return None
        code = exit_code_of(pod)
        finish_at = running_at + exit_after_of(pod) if code is not None else None
        if finish_at is not None and now >= finish_at:
            return self._terminated(pod, code or 0, now)
        if phase == "Running":
            if finish_at is not None:
                self._schedule((meta.get("namespace") or "", meta["name"]), finish_at)
            return None
        if finish_at is not None:
            self._schedule((meta.get("namespace") or "", meta["name"]), finish_at)
        return self._running(pod, now)

    def _base_status(self, pod: dict, now: float) -> dict:
        node = pod["spec"]["nodeName"]
        status = copy.deepcopy(pod.get("status") or {})
        pod_ip = status.get("podIP") or self._allocate_ip()
        status.update({"hostIP": self._node_ip[node], "hostIPs": [{"ip": self._node_ip[node]}],
                       "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
                       "startTime": status.get("startTime") or rfc3339(now)})
        return status

    def _running(self, pod: dict, now: float) -> dict:
        when = rfc3339(now)
        ready = _label(pod, LABEL_NEVER_READY) != "true"
        status = self._base_status(pod, now)
        uid = pod["metadata"].get("uid") or ""
        status["phase"] = "Running"
        status["conditions"] = [
            _condition("PodScheduled", True, when), _condition("Initialized", True, when),
            _condition("ContainersReady", ready, when, reason="" if ready else "ContainersNotReady"),
            _condition("Ready", ready, when, reason="" if ready else "ContainersNotReady")]
        status["containerStatuses"] = [
            {"name": c.get("name"), "image": c.get("image"), "imageID": f"fake://{c.get('image')}",
             "containerID": f"fake://{uid[:12]}-{c.get('name')}", "ready": ready, "started": True,
             "restartCount": 0, "state": {"running": {"startedAt": status["startTime"]}}}
            for c in (pod.get("spec") or {}).get("containers") or ()]
        return {**pod, "status": status}

    def _terminated(self, pod: dict, code: int, now: float) -> dict:
        when = rfc3339(now)
        status = self._base_status(pod, now)
        uid = pod["metadata"].get("uid") or ""
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        status["conditions"] = [
            _condition("PodScheduled", True, when), _condition("Initialized", True, when),
            _condition("ContainersReady", False, when, reason="PodCompleted"),
            _condition("Ready", False, when, reason="PodCompleted")]
        status["containerStatuses"] = [
            {"name": c.get("name"), "image": c.get("image"), "imageID": f"fake://{c.get('image')}",
             "containerID": f"fake://{uid[:12]}-{c.get('name')}", "ready": False, "started": False,
             "restartCount": 0,
             "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                      "startedAt": status["startTime"], "finishedAt": when}}}
            for c in (pod.get("spec") or {}).get("containers") or ()]
        return {**pod, "status": status}

    def _allocate_ip(self) -> str:
        """A pod IP unique among this kubelet's pods (10.128.0.1 upwards; 8 million of them)."""
        n = next(self._ip_seq)
        return f"10.{128 + ((n >> 16) & 127)}.{(n >> 8) & 255}.{n & 255}"

    def _write_statuses(self, pods: list[dict]) -> None:
        """Commit the status of many pods in one transaction (the API's batched status write, no rv pin)."""
        objs = []
        for pod in pods:
            obj = copy.deepcopy(pod)
            obj["metadata"].pop("resourceVersion", None)
            objs.append(obj)
        for pod, result in zip(pods, self.api.update_status_all(objs)):
            meta = pod["metadata"]
            if isinstance(result.error, NotFound):
                continue
            if isinstance(result.error, Conflict):  # written meanwhile: look again once the informer has it
                self._schedule((meta.get("namespace") or "", meta["name"]), self.clock() + 0.05)
            elif result.error is not None:
                log.warning("fake kubelet: status of pod %s/%s: %s", meta.get("namespace"), meta["name"],
                            result.error)
            elif result.obj is not None and result.action != "unchanged":
                if pod["status"]["phase"] == "Running":
                    self.started += 1
                else:
                    self.finished += 1

    def _delete(self, pod: dict) -> None:
        meta = pod["metadata"]
        try:
            self.api.delete(self.api.resource("pods"), meta["name"], namespace=meta.get("namespace"),
                            grace_period=0)
            self.deleted += 1
        except NotFound:
            pass
        except APIError as exc:
            log.warning("fake kubelet: delete pod %s/%s: %s", meta.get("namespace"), meta["name"], exc)


__all__ = ["BATCH", "FakeKubelet", "FakeNodeCapacity", "LABEL_EXIT_AFTER", "LABEL_EXIT_CODE",
           "LABEL_FAKE_NODE", "LABEL_NEVER_READY"]
