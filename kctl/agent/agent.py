"""The node agent (kctl's kubelet): makes the Pods bound to one Node true on its Podman.

`kctl daemon` (kctl.daemon.server) runs one NodeAgent per Node through a
NodeAgentSupervisor (kctl.agent.supervisor). An agent:

- follows, through kctl.client.informer Informers (client-go's, as the controllers and
  the scheduler use), the Pods whose spec.nodeName is its node (filtered by the API
  server: in node mode only this node's pods cross the SSH connection), and the
  ConfigMaps, Secrets, PersistentVolumeClaims and PersistentVolumes they may read; an
  informer re-lists by itself when its watch is
  Gone or fails. kctl.agent.boundpods serves the pods by uid;
- puts each pod's uid on a WorkQueue when the pod appears or its spec/metadata change (its
  own status writes do not), and when a ConfigMap, Secret or claim it reads changes; `workers`
  threads take uids and call kctl.agent.podsync.sync_pod (terminate_pod for a pod being
  deleted, then remove the Pod object), write the status only when it changed
  (kctl.client.statuswriter, re-reading on Conflict), record the events the sync reports,
  and re-queue the pod after its requeue_after, or after `resync` seconds at the latest
  (probes ride on that; the resync is crash detection's safety net);
- follows the runtime's container event stream (kctl.agent.runtime_events, the evented
  PLEG): a container of a pod bound here that dies, is OOM-killed or exits queues its
  pod at once; when the stream comes back after a drop, every pod is queued (a relist);
- on start, once every informer has listed, removes Podman pods that no Pod bound here
  owns; only then do the workers start;
- runs the node Heartbeat (kctl.agent.node), and the host's pod network
  (kctl.agent.podnetwork.PodNetwork: the Podman bridge with the Node's podCIDR, routes to
  the other Nodes, its nft table); new sandboxes join that network once it is made;
  and the host's kube-proxy (kctl.agent.proxy.sync.Proxier: the Service rules, table `ip kctl`),
  and the host's deleter of released local PersistentVolumes (kctl.agent.localvolumes);
- with a `metric_resolution`, samples the host's usage (kctl.agent.metrics.MetricsScraper:
  metrics-server's PodMetrics and NodeMetrics, written every that many seconds).

Nothing here mutates an object handed out by an informer: every reader gets a copy.
One pod's failure is logged and retried with back-off; it never stops the agent.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable

from kctl.agent.boundpods import BoundPods
from kctl.agent.node import Heartbeat
from kctl.client import events
from kctl.client.informer import Informer
from kctl.client.statuswriter import StatusWriter
from kctl.client.workqueue import WorkQueue
from kctl.machinery.errors import Conflict, NotFound
from kctl.machinery.times import parse_seconds
from kctl.runtime.interface import ContainerEvent

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.agent")

COMPONENT = "kubelet"
#: fields of a Pod's status that change without anything having happened (StatusWriter ignore paths)
VOLATILE_STATUS_FIELDS = ("conditions[].lastProbeTime", "conditions[].lastHeartbeatTime")
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
#: how often the start-up thread looks whether it was stopped while the informers list
SYNC_POLL_SECONDS = 0.5


def _podsync():
    """kctl.agent.podsync, imported when first needed (tests replace its functions)."""
    from kctl.agent import podsync

    return podsync


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


# -- what a pod refers to ----------------------------------------------------------------------

def _containers(pod: dict) -> list[dict]:
    spec = pod.get("spec") or {}
    return [c for key in ("initContainers", "containers") for c in spec.get(key) or () if isinstance(c, dict)]


def references(pod: dict) -> set[tuple[str, str]]:
    """(kind, name) of every ConfigMap, Secret and PersistentVolumeClaim the pod reads (volumes, env, envFrom)."""
    refs: set[tuple[str, str]] = set()
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if (volume.get("persistentVolumeClaim") or {}).get("claimName"):
            refs.add(("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]))
        if (volume.get("configMap") or {}).get("name"):
            refs.add(("ConfigMap", volume["configMap"]["name"]))
        if (volume.get("secret") or {}).get("secretName"):
            refs.add(("Secret", volume["secret"]["secretName"]))
        for source in (volume.get("projected") or {}).get("sources") or ():
            if (source.get("configMap") or {}).get("name"):
                refs.add(("ConfigMap", source["configMap"]["name"]))
            if (source.get("secret") or {}).get("name"):
                refs.add(("Secret", source["secret"]["name"]))
    for container in _containers(pod):
        for env in container.get("env") or ():
            value_from = env.get("valueFrom") or {}
            if (value_from.get("configMapKeyRef") or {}).get("name"):
                refs.add(("ConfigMap", value_from["configMapKeyRef"]["name"]))
            if (value_from.get("secretKeyRef") or {}).get("name"):
                refs.add(("Secret", value_from["secretKeyRef"]["name"]))
        for env_from in container.get("envFrom") or ():
            if (env_from.get("configMapRef") or {}).get("name"):
                refs.add(("ConfigMap", env_from["configMapRef"]["name"]))
            if (env_from.get("secretRef") or {}).get("name"):
                refs.add(("Secret", env_from["secretRef"]["name"]))
    return refs


def has_probes(pod: dict) -> bool:
    return any(c.get(p) for c in _containers(pod) for p in PROBES)


def _desired_part(pod: dict) -> dict:
    """What a pod's sync depends on: all but its status and resourceVersion."""
    out = {k: v for k, v in pod.items() if k != "status"}
    out["metadata"] = {k: v for k, v in _meta(pod).items() if k not in ("resourceVersion", "managedFields")}
    return out


# -- the agent ------------------------------------------------------------------------------

class NodeAgent:
    """Reconciles the Pods bound to `node_name` onto `runtime` (see the module docstring)."""

    def __init__(self, api: API, node_name: str, runtime, *, workers: int = 4, resync: float = 10.0,
                 backoff=None, probes=None, probe_period: float = 1.0, host_ip: str = "",
                 remote: bool = False, heartbeat_interval: float | None = 5.0,
                 clock: Callable[[], float] = time.time, image_copier=None, container_events: bool = True,
                 pod_network: bool = True, kube_proxy: bool = True, metric_resolution: float | None = None) -> None:
        self.api = api
        self.image_copier = image_copier  # kctl.agent.images.ImageCopier: images from other hosts
        self.node_name = node_name
        self.runtime = runtime
        self.workers = max(1, workers)
        self.resync = resync
        self.probe_period = probe_period
        self.host_ip = host_ip
        self.remote = remote
        self.clock = clock
        self.queue: WorkQueue[str] = WorkQueue(name=f"pods-{node_name}")
        self.status_writer = StatusWriter(api, ignore=VOLATILE_STATUS_FIELDS)
        self._removed: dict[str, dict] = {}  # uid -> last state of a Pod object that is gone
        self._removed_lock = threading.Lock()
        self._finished: set[str] = set()  # uids whose Pod object this agent removed itself
        self._backoff = backoff
        self._probes = probes
        self._context = None
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._go = threading.Event()  # workers may start: synced, or stopping
        self._threads: list[threading.Thread] = []
        self._informers_stop: threading.Event | None = None  # the stop the running informers were given
        self._running = False
        self._make_informers()
        self.heartbeat = (Heartbeat(api, node_name, runtime, interval=heartbeat_interval, internal_ip=host_ip,
                                    before_ready=self.fence)
                          if heartbeat_interval else None)
        self.pod_network = None  # kctl.agent.podnetwork.PodNetwork: this host's pod network
        if pod_network:
            from kctl.agent.podnetwork import PodNetwork

            self.pod_network = PodNetwork(api, node_name, runtime, host_ip=host_ip,
                                          paused=lambda: self.heartbeat is not None and self.heartbeat.paused)
        from kctl.agent.localvolumes import LocalVolumeDeleter

        #: this host's deleter of released kctl.io/local-volume PVs and their Podman volumes
        self.local_volumes = LocalVolumeDeleter(api, node_name, runtime,
                                                paused=lambda: self.heartbeat is not None and self.heartbeat.paused)
        self.proxier = None  # kctl.agent.proxy.sync.Proxier: this host's Service rules (kube-proxy)
        if kube_proxy:
            from kctl.agent.proxy.sync import Proxier

            self.proxier = Proxier(api, node_name, runtime,
                                   paused=lambda: self.heartbeat is not None and self.heartbeat.paused)
        self.metrics = None  # kctl.agent.metrics.MetricsScraper: this host's PodMetrics/NodeMetrics (metrics-server)
        if metric_resolution:
            from kctl.agent.metrics import MetricsScraper

            self.metrics = MetricsScraper(api, node_name, runtime, pod=lambda uid: self.pods.get_ref(uid),
                                          bound_uids=lambda: self.pods.uids(), synced=lambda: self._synced.is_set(),
                                          resolution=metric_resolution,
                                          paused=lambda: self.heartbeat is not None and self.heartbeat.paused)
        self.container_events = None  # kctl.agent.runtime_events.RuntimeEventWatcher, when the runtime streams
        if container_events:
            from kctl.agent.runtime_events import RuntimeEventWatcher

            if RuntimeEventWatcher.supported(runtime):
                self.container_events = RuntimeEventWatcher(
                    runtime, node_name=node_name, on_death=self._container_died, on_reconnect=self._relist_runtime,
                    quiet=lambda: self.heartbeat is not None and self.heartbeat.paused)

    def _make_informers(self) -> None:
        """This agent's informers: Pods bound here (filtered server-side), ConfigMaps, Secrets."""
        pods = Informer(self.api, "pods", field_selector=f"spec.nodeName={self.node_name}")
        self.pods = BoundPods(pods)  # uid -> Pod bound here
        pods.add_handler(self._on_pod_add, self._on_pod_update, self._on_pod_delete)
        self.sources = {kind: Informer(self.api, resource) for kind, resource in
                        (("ConfigMap", "configmaps"), ("Secret", "secrets"),
                         ("PersistentVolumeClaim", "persistentvolumeclaims"),
                         ("PersistentVolume", "persistentvolumes"))}
        for informer in self.sources.values():
            informer.add_handler(self._on_source, lambda old, new: self._on_source(new), self._on_source)
        #: the `kubernetes` Service (its ClusterIP and port become every container's KUBERNETES_SERVICE_* env)
        self.kubernetes_service = Informer(self.api, "services",
                                           field_selector="metadata.namespace=default,metadata.name=kubernetes")

    def _informers(self) -> list[Informer]:
        return [self.pods.informer, *self.sources.values(), self.kubernetes_service]

    def service_env(self) -> dict[str, str]:
        """KUBERNETES_SERVICE_HOST/PORT... of the `kubernetes` Service, {} while it does not exist."""
        from kctl.agent.env import kubernetes_service_env

        return kubernetes_service_env(self.kubernetes_service.get("default", "kubernetes"))

    # -- running --------------------------------------------------------------------------

    def start(self) -> None:
        """List, clean orphans, then watch and sync in background threads; returns at once."""
        if self._running:
            return
        self._running = True
        self._context = self._make_context()
        if self._stop.is_set():  # stopped before: a fresh stop for this run's threads
            self._stop = threading.Event()
            self._synced.clear()
            self._go.clear()
        self.start_informers()
        if self.pod_network is not None:
            self.pod_network.start()
        if self.proxier is not None:
            self.proxier.start()
        self.local_volumes.start()
        if self.metrics is not None:
            self.metrics.start()
        stop = self._stop
        self._spawn(lambda: self._run_start(stop), f"agent-{self.node_name}-start")
        for i in range(self.workers):
            self._spawn(self._run_worker, f"agent-{self.node_name}-worker-{i}")
        if self.container_events is not None:
            self.container_events.start()
        if self.heartbeat is not None:
            self.heartbeat.start()
        log.info("node %s: agent started (%d workers)", self.node_name, self.workers)

    def start_informers(self) -> None:
        """Start listing and watching Pods, ConfigMaps and Secrets until stop (start() calls it).

        An agent started again after a stop gets fresh informers (an informer runs once).
        """
        if self._informers_stop is self._stop:
            return  # running already
        if self._informers_stop is not None:
            self._make_informers()
        self._informers_stop = self._stop
        for informer in self._informers():
            self._threads.append(informer.start(self._stop))

    def stop(self, timeout: float = 10.0) -> None:
        """Stop watching and syncing (containers keep running); waits up to `timeout` s."""
        deadline = time.monotonic() + timeout
        self._stop.set()
        self._go.set()
        if self.container_events is not None:
            self.container_events.stop(max(0.0, deadline - time.monotonic()))
        self.queue.shutdown(timeout=max(0.0, deadline - time.monotonic()))
        if self.heartbeat is not None:
            self.heartbeat.stop(max(0.0, deadline - time.monotonic()))
        if self.pod_network is not None:
            self.pod_network.stop(max(0.0, deadline - time.monotonic()))
        if self.proxier is not None:
            self.proxier.stop(max(0.0, deadline - time.monotonic()))
        self.local_volumes.stop(max(0.0, deadline - time.monotonic()))
        if self.metrics is not None:
            self.metrics.stop(max(0.0, deadline - time.monotonic()))
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            log.warning("node %s: threads still busy after stop: %s", self.node_name, ", ".join(alive))
        self._threads = []
        self._running = False
        log.info("node %s: agent stopped", self.node_name)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Whether the first list (and orphan clean-up) finished within timeout."""
        return self._synced.wait(timeout)

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _make_context(self):
        podsync = _podsync()
        if self._backoff is None:
            from kctl.agent.backoff import Backoff

            self._backoff = Backoff()
        if self._probes is None:
            from kctl.agent.probes import ProbeManager

            self._probes = ProbeManager()
        copier = {"image_copier": self.image_copier} if self.image_copier is not None else {}
        from kctl.agent.serviceaccounttokens import TokenManager

        context = podsync.SyncContext(node_name=self.node_name, host_ip=self.host_ip, lookup=self.lookup,
                                      backoff=self._backoff, probes=self._probes, now=self.clock,
                                      remote=self.remote, **copier)
        context.tokens = TokenManager(self.api)  # projected serviceAccountToken sources
        context.service_env = self.service_env
        if self.pod_network is not None:
            context.pod_network = self.pod_network.pod_network  # the network new sandboxes join
        return context

    def lookup(self, kind: str, namespace: str, name: str) -> dict | None:
        """A ConfigMap, Secret, PersistentVolumeClaim or PersistentVolume from its informer (a copy), or None."""
        informer = self.sources.get(kind)
        obj = informer.get(namespace, name) if informer is not None else None
        return copy.deepcopy(obj) if obj is not None else None

    def _run_start(self, stop: threading.Event) -> None:
        """Wait for the first lists, remove what no Pod bound here owns, then let the workers go."""
        for informer in self._informers():
            while not informer.wait_for_sync(SYNC_POLL_SECONDS):
                if stop.is_set():
                    return
        if stop.is_set():
            return
        self._clean_orphans()
        self._synced.set()
        self._go.set()

    # -- informer events ------------------------------------------------------------------

    def _on_pod_add(self, pod: dict) -> None:
        uid = _meta(pod).get("uid")
        if uid:
            self.queue.add(uid)

    def _on_pod_update(self, old: dict, new: dict) -> None:
        """A change of a Pod bound here: queue it unless only its status changed (its own writes)."""
        old_uid, uid = _meta(old).get("uid"), _meta(new).get("uid")
        if old_uid != uid:  # deleted and made again under the same name, seen by a re-list
            self._on_pod_delete(old)
            self._on_pod_add(new)
            return
        if _desired_part(old) != _desired_part(new):
            self.queue.add(uid)

    def _on_pod_delete(self, pod: dict) -> None:
        """A Pod object left this node (deleted, or bound elsewhere): a worker stops its containers."""
        uid = _meta(pod).get("uid", "")
        self.pods.forget(uid)
        with self._removed_lock:
            finished = uid in self._finished
            self._finished.discard(uid)
        if not finished:
            self._forget_pod(uid, pod)

    def _forget_pod(self, uid: str, last: dict) -> None:
        """A Pod object left this node: its containers are stopped by a worker."""
        with self._removed_lock:
            self._removed[uid] = last
        self.queue.add(uid)

    def _on_source(self, obj: dict) -> None:
        """A ConfigMap or Secret changed: queue the pods bound here that read it."""
        meta = _meta(obj)
        ref, namespace = (obj.get("kind"), meta.get("name")), meta.get("namespace")
        for pod in self.pods.informer.by_index("namespace", namespace or ""):
            if ref in references(pod):
                self.queue.add(_meta(pod)["uid"])

    def _container_died(self, event: ContainerEvent) -> None:
        """A container event of the runtime (a ContainerEvent): queue its pod if it is bound here."""
        uid = event.pod_uid
        if not uid:
            return
        with self._removed_lock:
            removed = uid in self._removed
        if removed or self.pods.get_ref(uid) is not None:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("node %s: container %s of pod %s %s (exit code %s): syncing the pod", self.node_name,
                          event.name or event.container_id[:12], self._describe(uid), event.event, event.exit_code)
            self.queue.add(uid)

    def _relist_runtime(self) -> None:
        """The container event stream is back after a gap: look at every pod again."""
        for uid in self.pods.uids():
            self.queue.add(uid)
        with self._removed_lock:
            removed = list(self._removed)
        for uid in removed:
            self.queue.add(uid)

    def _clean_orphans(self) -> None:
        try:
            removed = _podsync().cleanup_orphans(self.runtime, keep_uids=set(self.pods.uids()))
        except Exception as exc:
            log.error("node %s: orphan clean-up failed: %s", self.node_name, exc)
            return
        for name in removed or ():
            log.info("node %s: removed Podman pod %s (no Pod owns it)", self.node_name, name)

    def fence(self, timeout: float = 30.0) -> bool:
        """Before the node reports Ready (at start, or answering again after silence).

        Removes from Podman every kctl pod that must not run: pods deleted, evicted or
        moved while the host was silent, and terminating pods whose grace period is over.
        So a host back from a partition never runs a pod that was replaced elsewhere.
        False (and the node stays silent) until the first list is done and the clean-up
        succeeded.
        """
        if not self._synced.wait(timeout):
            return False
        now = self.clock()
        keep, expired = set(), []
        for pod in self.pods.values():
            if self._grace_over(pod, now):
                expired.append(_meta(pod)["uid"])
            else:
                keep.add(_meta(pod)["uid"])
        removed = _podsync().cleanup_orphans(self.runtime, keep_uids=keep)
        for uid in expired:
            self.queue.add(uid)  # a worker removes the Pod object: nothing runs for it any more
        if removed:
            log.info("node %s: before Ready, removed from Podman: %s", self.node_name, ", ".join(removed))
        return True

    def _grace_over(self, pod: dict, now: float) -> bool:
        """A terminating pod whose deletionTimestamp + grace period has passed."""
        since = _meta(pod).get("deletionTimestamp")
        if not since:
            return False
        started = parse_seconds(since)
        return started is None or started + self._grace_seconds(pod) <= now

    # -- workers --------------------------------------------------------------------------

    def _run_worker(self) -> None:
        self._go.wait()
        while True:
            uid = self.queue.get()
            if uid is None:
                return
            try:
                if self.process(uid):
                    self.queue.forget(uid)
                else:
                    self.queue.add_rate_limited(uid)
            except Exception as exc:
                # One line; the traceback only with --log-level debug.
                log.error("node %s: sync of pod %s failed: %s: %s", self.node_name, self._describe(uid),
                          type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "",
                          exc_info=log.isEnabledFor(logging.DEBUG))
                self.queue.add_rate_limited(uid)
            finally:
                self.queue.done(uid)

    def _describe(self, uid: str) -> str:
        pod = self.pods.get(uid)
        if pod is None:
            return uid
        return f'{_meta(pod).get("namespace")}/{_meta(pod).get("name")}'

    def process(self, uid: str) -> bool:
        """Sync one pod by uid; False when it must be retried with back-off (a Conflict)."""
        if self.heartbeat is not None and self.heartbeat.paused:
            # The host is unreachable or its Podman silent (the heartbeat says why, once):
            # no per-pod attempts, errors or logs until a beat finds it answering again.
            self.queue.add_after(uid, self.heartbeat.interval)
            return True
        pod = self.pods.get(uid)
        if pod is None:
            return self._stop_removed(uid)
        if _meta(pod).get("deletionTimestamp"):
            return self._terminate(pod)
        result = _podsync().sync_pod(pod, self.runtime, self._context)
        self._record(pod, result.events)
        if not self._write_status(pod, result.status):
            return False
        self.queue.add_after(uid, self._next_sync(pod, result.requeue_after))
        return True

    def _next_sync(self, pod: dict, requeue_after: float | None) -> float:
        delay = self.resync
        if requeue_after is not None:
            delay = min(delay, requeue_after)
        if has_probes(pod):
            delay = min(delay, self.probe_period)
        return max(0.0, delay)

    def _grace_seconds(self, pod: dict) -> int:
        meta, spec = _meta(pod), pod.get("spec") or {}
        for value in (meta.get("deletionGracePeriodSeconds"), spec.get("terminationGracePeriodSeconds")):
            if isinstance(value, int):
                return max(0, value)
        return 0

    def _terminate(self, pod: dict) -> bool:
        """A Pod being deleted: stop it, then remove the Pod object."""
        uid = _meta(pod)["uid"]
        result = _podsync().terminate_pod(pod, self.runtime, self._context, grace_seconds=self._grace_seconds(pod))
        self._record(pod, result.events)
        if result.requeue_after is not None:  # still stopping
            if not self._write_status(pod, result.status):
                return False
            self.queue.add_after(uid, result.requeue_after)
            return True
        return self._remove_pod_object(pod)

    def _remove_pod_object(self, pod: dict) -> bool:
        meta = _meta(pod)
        rt = self.api.resource("pods")
        try:
            current = self.api.get(rt, meta["name"], namespace=meta.get("namespace"))
        except NotFound:
            return True
        if _meta(current).get("uid") != meta["uid"]:
            return True  # a new pod of the same name: not ours to remove
        with self._removed_lock:
            self._finished.add(meta["uid"])
        try:
            self.api.delete(rt, meta["name"], namespace=meta.get("namespace"), grace_period=0,
                            resource_version=_meta(current)["resourceVersion"])
        except NotFound:
            return True
        except Conflict:
            with self._removed_lock:
                self._finished.discard(meta["uid"])
            return False
        log.info("node %s: pod %s/%s terminated and removed", self.node_name, meta.get("namespace"),
                 meta["name"])
        return True

    def _stop_removed(self, uid: str) -> bool:
        """The Pod object is gone (or left this node): stop what still runs for it."""
        with self._removed_lock:
            last = self._removed.pop(uid, None)
        if last is None:
            return True
        result = _podsync().terminate_pod(last, self.runtime, self._context, grace_seconds=0)
        if result.requeue_after is not None:
            with self._removed_lock:
                self._removed.setdefault(uid, last)
            self.queue.add_after(uid, result.requeue_after)
        return True

    def _record(self, pod: dict, specs) -> None:
        for spec in specs or ():
            events.record(self.api, pod, type=spec.type, reason=spec.reason, message=spec.message,
                          component=COMPONENT, field_path=spec.field_path, host=self.node_name)

    def _write_status(self, pod: dict, status: dict | None) -> bool:
        """Write the pod's status if it changed (re-read on Conflict); False when it kept conflicting."""
        if status is None:
            return True
        deletion = _meta(pod).get("deletionTimestamp")

        def desired(current: dict) -> dict:
            # A re-read pod whose deletion began (or was undone) meanwhile gets no status from a
            # sync of the pod before: its next sync (queued by that change) says what is true.
            if _meta(current).get("deletionTimestamp") != deletion:
                return current.get("status") or {}
            return status

        try:
            stored = self.status_writer.write(pod, desired)
        except Conflict:
            return False
        if stored is not None and stored is not pod:
            self.pods.offer(stored)
        return True


__all__ = ["VOLATILE_STATUS_FIELDS", "NodeAgent", "has_probes", "references"]
