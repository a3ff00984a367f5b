"""The metrics scraper of one host: metrics-server's role, played by the node agent (kctl.agent.agent).

Every `resolution` seconds (`kctl daemon --metric-resolution`, 15 s by default) it takes one
usage sample of the host's kctl containers (Runtime.container_stats: one stats call) and of
the host itself (Runtime.host_stats), and writes, in one batched API call (`write_all`), a
`metrics.k8s.io/v1beta1` PodMetrics per pod bound here whose containers it has sampled twice
and a NodeMetrics for the node, shaped as metrics-server serves them:

- PodMetrics: namespaced, named as the pod, `metadata.labels` the pod's (so a label selector
  finds a workload's pods' metrics, as the HPA controller's does), an ownerReference to the
  Pod (the garbage collector removes it with the pod), `timestamp`, `window` and
  `containers: [{name, usage: {cpu, memory}}]`;
- NodeMetrics: cluster-scoped, named as the node, `metadata.labels` the Node's (read each round, so
  `kubectl top node -l` over the HTTPS API selects as metrics-server does), an ownerReference to the Node, `timestamp`,
  `window` and `usage: {cpu, memory}`.

CPU usage is a rate: the difference of two cumulative CPU times over the time between the
samples (kept here, in memory), in nanocores (`12345n`, canonical as apimachinery writes a
quantity: `12m` when whole millicores); the first round of a container writes nothing for its
pod. Memory is the bytes in use (`460Ki`, `3Mi`, as a binary-SI quantity). The PodMetrics of a
pod that no longer runs here is deleted (with its last resourceVersion as a precondition, so
one another host wrote meanwhile stays); after a restart, those of pods bound here are found
with one list once the agent's informers have synced.

It never crashes the agent: a failed round logs one Warning per streak of failures (and one
Info line when sampling works again) and the next round tries again; while the agent's
heartbeat says the host cannot be reached (`paused`), rounds are skipped.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from kctl.machinery.errors import AlreadyExists, APIError, Conflict, NotFound
from kctl.machinery.times import format_time, to_datetime
from kctl.runtime.interface import LABEL_CONTAINER, LABEL_MANAGED, LABEL_POD_UID, ContainerStats, HostStats

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.agent.metrics")

API_VERSION = "metrics.k8s.io/v1beta1"
DEFAULT_RESOLUTION = 15.0
_BINARY_SUFFIXES = (("Ei", 1024 ** 6), ("Pi", 1024 ** 5), ("Ti", 1024 ** 4), ("Gi", 1024 ** 3), ("Mi", 1024 ** 2),
                    ("Ki", 1024))


def cpu_quantity(nanocores: int) -> str:
    """Nanocores as apimachinery writes resource.NewScaledQuantity(n, resource.Nano): `2`, `12m`, `5u`, `12345n`."""
    for divisor, suffix in ((10 ** 9, ""), (10 ** 6, "m"), (10 ** 3, "u")):
        if nanocores % divisor == 0:
            return f"{nanocores // divisor}{suffix}"
    return f"{nanocores}n"


def memory_quantity(size: int) -> str:
    """Bytes as apimachinery writes a BinarySI quantity: the largest suffix that divides it (`460Ki`), else bytes."""
    if size:
        for suffix, unit in _BINARY_SUFFIXES:
            if size % unit == 0:
                return f"{size // unit}{suffix}"
    return str(size)


def go_duration(seconds: float) -> str:
    """A duration as Go's time.Duration prints it, to the millisecond: `15s`, `2.003s`, `1m0.5s`."""
    millis = max(0, round(seconds * 1000))
    minutes, millis = divmod(millis, 60_000)
    hours, minutes = divmod(minutes, 60)
    secs = f"{millis // 1000}.{millis % 1000:03d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{secs}"
    return f"{minutes}m{secs}" if minutes else secs


def _rate(now: ContainerStats | HostStats, before: ContainerStats | HostStats | None) -> tuple[int, float] | None:
    """(nanocores, window in seconds) between two cumulative samples; None when there is no valid pair."""
    if before is None or now.timestamp <= before.timestamp or now.cpu_nanos < before.cpu_nanos:
        return None
    window = now.timestamp - before.timestamp
    return round((now.cpu_nanos - before.cpu_nanos) / window), window


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


@dataclass
class ScrapeRound:
    """What one round did (for tests and the benchmark): the objects written and the names deleted."""

    written: list[dict] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)  # (namespace, name) of PodMetrics


class MetricsScraper:
    """Samples one host every `resolution` seconds and writes its PodMetrics and NodeMetrics (module docstring)."""

    def __init__(self, api: API, node_name: str, runtime, *, pod: Callable[[str], dict | None],
                 bound_uids: Callable[[], list[str]], synced: Callable[[], bool] = lambda: True,
                 paused: Callable[[], bool] = lambda: False, resolution: float = DEFAULT_RESOLUTION) -> None:
        """`pod(uid)` is a Pod bound here (None when not), `bound_uids()` every such uid, `synced()` whether
        those are known yet (the agent's informers listed)."""
        self.api = api
        self.node_name = node_name
        self.runtime = runtime
        self.resolution = resolution
        self._pod, self._bound_uids, self._synced, self._paused = pod, bound_uids, synced, paused
        self._containers: dict[str, ContainerStats] = {}  # container id -> its previous sample
        self._host: HostStats | None = None
        self._written: dict[tuple[str, str], tuple[str, str]] = {}  # (ns, name) -> (pod uid, resourceVersion)
        self._node_written = False
        self._node_owner: dict | None = None  # an ownerReference to this Node, as last read
        self._seeded = False
        self._failing = ""  # the error of the current failure streak ("" when the last round worked)
        self._host_failing = False  # host_stats failed in the last round (the pods' metrics are still written)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- running --------------------------------------------------------------------------

    def start(self) -> None:
        """Sample now, then every `resolution` seconds, in a background thread; returns at once."""
        if self._thread is not None:
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._stop,), name=f"metrics-{self.node_name}",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop sampling (what was written stays until the garbage collector or the next scraper removes it)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._thread = None

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            if not self._paused():
                try:
                    self.scrape()
                except Exception as exc:  # one round's failure never ends the loop
                    self._failed(f"{type(exc).__name__}: {exc}")
            stop.wait(max(0.0, self.resolution - (time.monotonic() - started)))

    def _failed(self, message: str) -> None:
        line = message.splitlines()[0] if message else "failed"
        if not self._failing:
            log.warning("node %s: metrics: %s (retrying every %gs)", self.node_name, line, self.resolution)
        self._failing = line

    def _recovered(self) -> None:
        if self._failing:
            log.info("node %s: metrics: sampling works again", self.node_name)
        self._failing = ""

    # -- one round ------------------------------------------------------------------------

    def scrape(self) -> ScrapeRound:
        """Take one sample and write what it yields (one write_all; a second only for objects that changed hands).

        Raises what the runtime or the API raised (the loop logs it).
        """
        from kctl.runtime.interface import RuntimeError_

        try:
            samples = self.runtime.container_stats({LABEL_MANAGED: "true"})
        except RuntimeError_ as exc:
            self._failed(str(exc))
            return ScrapeRound()
        objects, present = self._pod_metrics(samples)
        try:
            node = self._node_metrics(self.runtime.host_stats())
        except RuntimeError_ as exc:  # the pods' metrics are still written; the node's wait for the host
            if not self._host_failing:
                log.warning("node %s: metrics: %s (node usage unknown until it answers)", self.node_name, exc)
            self._host_failing, node = True, None
        else:
            if self._host_failing:
                log.info("node %s: metrics: host usage read again", self.node_name)
            self._host_failing = False
        if node is not None:
            objects.append(node)
        if not self._seeded and self._synced():
            self._seed()
        writing = {(_meta(obj).get("namespace", ""), _meta(obj)["name"]) for obj in objects}
        gone = [key for key, (uid, _) in self._written.items() if uid not in present and key not in writing]
        round_ = self._write(objects, gone)
        self._recovered()
        return round_

    def _pod_metrics(self, samples: list[ContainerStats]) -> tuple[list[dict], set[str]]:
        """The PodMetrics of pods whose every running container has a rate, and the uids of pods sampled at all."""
        previous, self._containers = self._containers, {s.id: s for s in samples}
        rates: dict[str, list[tuple[str, int, int, float, float]]] = {}
        incomplete: set[str] = set()
        for sample in samples:
            uid, name = sample.labels.get(LABEL_POD_UID, ""), sample.labels.get(LABEL_CONTAINER, "")
            if not uid or not name:
                continue
            rate = _rate(sample, previous.get(sample.id))
            if rate is None:
                incomplete.add(uid)
                continue
            rates.setdefault(uid, []).append((name, rate[0], sample.memory_bytes, sample.timestamp, rate[1]))
        present = incomplete | set(rates)
        objects = []
        for uid, containers in rates.items():
            pod = self._pod(uid)
            if uid in incomplete or pod is None:
                continue
            objects.append(self._pod_object(pod, containers))
        return objects, present

    def _pod_object(self, pod: dict, containers: list[tuple[str, int, int, float, float]]) -> dict:
        meta = _meta(pod)
        spec = pod.get("spec") or {}
        order = {c.get("name"): i for i, c in enumerate([*(spec.get("containers") or ()),
                                                         *(spec.get("initContainers") or ())])}
        containers = sorted(containers, key=lambda c: (order.get(c[0], len(order)), c[0]))
        obj_meta: dict = {"name": meta.get("name"), "namespace": meta.get("namespace") or "default",
                          "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"),
                                               "uid": meta.get("uid")}]}
        if meta.get("labels"):
            obj_meta["labels"] = dict(meta["labels"])
        return {"apiVersion": API_VERSION, "kind": "PodMetrics", "metadata": obj_meta,
                "timestamp": format_time(to_datetime(max(c[3] for c in containers))),
                "window": go_duration(max(c[4] for c in containers)),
                "containers": [{"name": name, "usage": {"cpu": cpu_quantity(cpu), "memory": memory_quantity(memory)}}
                               for name, cpu, memory, _, _ in containers]}

    def _node_metrics(self, host: HostStats) -> dict | None:
        previous, self._host = self._host, host
        rate = _rate(host, previous)
        if rate is None:
            return None
        meta: dict = {"name": self.node_name}
        node, labels = self._node_ref()
        if labels:
            meta["labels"] = labels
        if node is not None:
            meta["ownerReferences"] = [node]
        return {"apiVersion": API_VERSION, "kind": "NodeMetrics", "metadata": meta,
                "timestamp": format_time(to_datetime(host.timestamp)), "window": go_duration(rate[1]),
                "usage": {"cpu": cpu_quantity(rate[0]), "memory": memory_quantity(host.memory_used_bytes)}}

    def _node_ref(self) -> tuple[dict | None, dict]:
        """An ownerReference to this Node and the Node's labels, read each round (metrics-server's NodeMetrics carry
        them: `kubectl top node -l` selects on them); (the last owner, {}) while the Node cannot be read."""
        try:
            node = self.api.get(self.api.resource("nodes"), self.node_name)
        except APIError:
            return self._node_owner, {}
        self._node_owner = {"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": _meta(node).get("uid")}
        return self._node_owner, dict(_meta(node).get("labels") or {})

    def _seed(self) -> None:
        """After a (re)start: the PodMetrics of pods bound here, so those of pods gone meanwhile get deleted."""
        bound = set(self._bound_uids())
        items, _ = self.api.list(self.api.resource("pods.metrics.k8s.io"))
        for item in items:
            meta = _meta(item)
            owner = next((r.get("uid") for r in meta.get("ownerReferences") or () if r.get("kind") == "Pod"), None)
            key = (meta.get("namespace", ""), meta.get("name", ""))
            if owner in bound and key not in self._written:
                self._written[key] = (owner, str(meta.get("resourceVersion", "")))
        self._seeded = True

    def _write(self, objects: list[dict], gone: list[tuple[str, str]]) -> ScrapeRound:
        ops: list[tuple[str, dict]] = []
        for obj in objects:
            if obj["kind"] == "NodeMetrics":
                ops.append(("update" if self._node_written else "create", obj))
            else:
                key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
                ops.append(("update" if key in self._written else "create", obj))
        for namespace, name in gone:
            rv = self._written[(namespace, name)][1]
            ops.append(("delete", {"apiVersion": API_VERSION, "kind": "PodMetrics",
                                   "metadata": {"name": name, "namespace": namespace,
                                                **({"resourceVersion": rv} if rv else {})}}))
        round_ = ScrapeRound()
        if not ops:
            return round_
        again = self._apply(self.api.write_all(ops), ops, round_)
        if again:
            self._apply(self.api.write_all(again), again, round_)
        return round_

    def _apply(self, results, ops: list[tuple[str, dict]], round_: ScrapeRound) -> list[tuple[str, dict]]:
        """Record what the writes did; the writes to make again the other way (create <-> update)."""
        again: list[tuple[str, dict]] = []
        for (op, obj), result in zip(ops, results):
            meta = obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            error = result.error
            if op == "delete":
                self._written.pop(key, None)
                if error is None or isinstance(error, (NotFound, Conflict)):
                    round_.deleted.append(key)
                continue
            if error is None:
                stored = result.obj or obj
                round_.written.append(stored)
                if obj["kind"] == "NodeMetrics":
                    self._node_written = True
                else:
                    owner = meta["ownerReferences"][0]["uid"]
                    self._written[key] = (owner, str(_meta(stored).get("resourceVersion", "")))
            elif isinstance(error, NotFound if op == "update" else AlreadyExists):
                again.append(("create" if op == "update" else "update", obj))
            else:
                log.debug("node %s: metrics: %s %s: %s", self.node_name, obj["kind"], meta["name"], error)
        return again


__all__ = ["DEFAULT_RESOLUTION", "MetricsScraper", "ScrapeRound", "cpu_quantity", "go_duration", "memory_quantity"]
