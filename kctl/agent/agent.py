"""The node agent (kctl's kubelet): makes the Pods bound to one Node true on its Podman.

`kctl daemon` (kctl.daemon.server) runs one NodeAgent per Node through a
NodeAgentSupervisor. An agent:

- lists, then watches, the Pods whose spec.nodeName is its node, and the ConfigMaps and
  Secrets they may read, into a local cache (re-listing when the watch is Gone);
- puts each pod's uid on a WorkQueue; `workers` threads take uids and call
  kctl.agent.podsync.sync_pod (terminate_pod for a pod being deleted, then remove the
  Pod object), write the status only when it changed, record the events the sync
  reports, and re-queue the pod after its requeue_after, or after `resync` seconds at
  the latest (probes ride on that; the resync is crash detection's safety net);
- follows the runtime's container event stream (kctl.agent.runtime_events, the evented
  PLEG): a container of a pod bound here that dies, is OOM-killed or exits queues its
  pod at once; when the stream comes back after a drop, every pod is queued (a relist);
- on start, once it has listed, removes Podman pods that no Pod bound here owns;
- runs the node Heartbeat (kctl.agent.node).

Nothing here mutates an object handed out by the cache: every reader gets a copy.
One pod's failure is logged and retried with back-off; it never stops the agent.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable

from kctl.agent.node import (AGENT_NODE_MODE, ANNOTATION_AGENT, ANNOTATION_PODMAN_URL, ANNOTATION_SSH_IDENTITY,
                             Heartbeat, node_address)
from kctl.client import events
from kctl.machinery.errors import Conflict, Gone, NotFound
from kctl.machinery.times import parse_seconds
from kctl.client.workqueue import WorkQueue
from kctl.runtime.interface import ContainerEvent

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.agent")

COMPONENT = "kubelet"
#: fields of a status that change without anything having happened
VOLATILE_FIELDS = ("lastProbeTime", "lastHeartbeatTime")
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
WATCHED_KINDS = ("Pod", "ConfigMap", "Secret")


def _podsync():
    """kctl.agent.podsync, imported when first needed (tests replace its functions)."""
    from kctl.agent import podsync

    return podsync


def _rv(obj: dict) -> int:
    try:
        return int(obj["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return 0


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


# -- what a pod refers to ----------------------------------------------------------------------

def _containers(pod: dict) -> list[dict]:
    spec = pod.get("spec") or {}
    return [c for key in ("initContainers", "containers") for c in spec.get(key) or () if isinstance(c, dict)]


def references(pod: dict) -> set[tuple[str, str]]:
    """(kind, name) of every ConfigMap and Secret the pod reads (volumes, env, envFrom)."""
    refs: set[tuple[str, str]] = set()
    for volume in (pod.get("spec") or {}).get("volumes") or ():
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


def _without_volatile(value):
    """A copy of a status without the fields that change on every look (lastProbeTime...)."""
    if isinstance(value, dict):
        return {k: _without_volatile(v) for k, v in value.items() if k not in VOLATILE_FIELDS}
    if isinstance(value, list):
        return [_without_volatile(v) for v in value]
    return value


def status_differs(old: dict | None, new: dict | None) -> bool:
    """Whether writing `new` over `old` would change more than volatile fields."""
    return _without_volatile(old or {}) != _without_volatile(new or {})


def _desired_part(pod: dict) -> dict:
    """What a pod's sync depends on: all but its status and resourceVersion."""
    out = {k: v for k, v in pod.items() if k != "status"}
    out["metadata"] = {k: v for k, v in _meta(pod).items() if k not in ("resourceVersion", "managedFields")}
    return out


# -- the cache ------------------------------------------------------------------------------

class _Cache:
    """Objects by key, never going back to an older resourceVersion; hands out copies."""

    def __init__(self) -> None:
        self._objects: dict = {}
        self._lock = threading.Lock()

    def get(self, key) -> dict | None:
        with self._lock:
            obj = self._objects.get(key)
        return copy.deepcopy(obj) if obj is not None else None

    def offer(self, key, obj: dict) -> dict | None:
        """Store obj unless the cache holds a newer version; returns the version it replaced."""
        with self._lock:
            old = self._objects.get(key)
            if old is not None and _rv(old) > _rv(obj):
                return old
            self._objects[key] = obj
            return old

    def pop(self, key, *, rv: int | None = None) -> dict | None:
        """Remove key (unless the cached version is newer than rv); the removed object."""
        with self._lock:
            old = self._objects.get(key)
            if old is None or (rv is not None and _rv(old) > rv):
                return None
            return self._objects.pop(key)

    def replace(self, objects: dict) -> dict:
        """Swap in a fresh listing; returns the previous content."""
        with self._lock:
            old, self._objects = self._objects, dict(objects)
            return old

    def keys(self) -> list:
        with self._lock:
            return list(self._objects)

    def get_ref(self, key) -> dict | None:
        """The cached object itself (no copy): read it, never change it."""
        with self._lock:
            return self._objects.get(key)

    def values(self) -> list[dict]:
        """The cached objects themselves: read them, never change them."""
        with self._lock:
            return list(self._objects.values())


# -- the agent ------------------------------------------------------------------------------

class NodeAgent:
    """Reconciles the Pods bound to `node_name` onto `runtime` (see the module docstring)."""

    def __init__(self, api: API, node_name: str, runtime, *, workers: int = 4, resync: float = 10.0,
                 backoff=None, probes=None, probe_period: float = 1.0, host_ip: str = "",
                 remote: bool = False, heartbeat_interval: float | None = 5.0,
                 clock: Callable[[], float] = time.time, image_copier=None, container_events: bool = True) -> None:
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
        self.pods = _Cache()  # uid -> Pod bound here
        self.sources = _Cache()  # (kind, namespace, name) -> ConfigMap | Secret
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
        self.heartbeat = (Heartbeat(api, node_name, runtime, interval=heartbeat_interval, internal_ip=host_ip,
                                    before_ready=self.fence)
                          if heartbeat_interval else None)
        self.container_events = None  # kctl.agent.runtime_events.RuntimeEventWatcher, when the runtime streams
        if container_events:
            from kctl.agent.runtime_events import RuntimeEventWatcher

            if RuntimeEventWatcher.supported(runtime):
                self.container_events = RuntimeEventWatcher(
                    runtime, node_name=node_name, on_death=self._container_died, on_reconnect=self._relist_runtime,
                    quiet=lambda: self.heartbeat is not None and self.heartbeat.paused)

    # -- running --------------------------------------------------------------------------

    def start(self) -> None:
        """List, clean orphans, then watch and sync in background threads; returns at once."""
        if self._threads:
            return
        self._context = self._make_context()
        self._stop.clear()
        self._spawn(self._run_watch, f"agent-{self.node_name}-watch")
        for i in range(self.workers):
            self._spawn(self._run_worker, f"agent-{self.node_name}-worker-{i}")
        if self.container_events is not None:
            self.container_events.start()
        if self.heartbeat is not None:
            self.heartbeat.start()
        log.info("node %s: agent started (%d workers)", self.node_name, self.workers)

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
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            log.warning("node %s: threads still busy after stop: %s", self.node_name, ", ".join(alive))
        self._threads = []
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
        return podsync.SyncContext(node_name=self.node_name, host_ip=self.host_ip, lookup=self.lookup,
                                   backoff=self._backoff, probes=self._probes, now=self.clock,
                                   remote=self.remote, **copier)

    def lookup(self, kind: str, namespace: str, name: str) -> dict | None:
        """A ConfigMap or Secret from the cache (a copy), None if there is none."""
        return self.sources.get((kind, namespace, name))

    # -- list and watch -------------------------------------------------------------------

    def _run_watch(self) -> None:
        rev = None
        while rev is None and not self._stop.is_set():
            try:
                rev = self.relist()
            except Exception as exc:
                log.error("node %s: cannot list pods: %s", self.node_name, exc)
                self._stop.wait(1.0)
        if rev is None:
            return
        self._clean_orphans()
        self._synced.set()
        self._go.set()
        while not self._stop.is_set():
            rev = self._watch(rev)

    def relist(self) -> int:
        """List Pods bound here, ConfigMaps and Secrets; queue what changed; the revision to watch from."""
        from kctl.machinery.selectors import parse_field_selector

        selector = parse_field_selector(f"spec.nodeName={self.node_name}", kind="Pod")
        pods, pods_rev = self.api.list(self.api.resource("pods"), field_selector=selector)
        configmaps, cm_rev = self.api.list(self.api.resource("configmaps"))
        secrets, secret_rev = self.api.list(self.api.resource("secrets"))
        self.sources.replace({(o["kind"], _meta(o).get("namespace", ""), _meta(o)["name"]): o
                              for o in configmaps + secrets})
        fresh = {_meta(p)["uid"]: p for p in pods}
        old = self.pods.replace(fresh)
        for uid, pod in old.items():
            if uid not in fresh:
                self._forget_pod(uid, pod)
        for uid in fresh:
            self.queue.add(uid)
        # The three lists may have seen different revisions: watch from the oldest (the
        # cache ignores versions older than what it holds).
        return min(pods_rev, cm_rev, secret_rev)

    def _watch(self, rev: int) -> int:
        """Follow changes after `rev` until stopped; the revision reached (a re-list's on Gone)."""
        try:
            for change_type, obj in self.api.watch(None, since=rev, stop=self._stop):
                rev = max(rev, _rv(obj))
                try:
                    self.handle(change_type, obj)
                except Exception as exc:
                    log.error("node %s: cannot handle a change of %s %s: %s", self.node_name, obj.get("kind"),
                              _meta(obj).get("name"), exc, exc_info=log.isEnabledFor(logging.DEBUG))
        except Gone:
            log.info("node %s: watch too far behind (Gone): listing again", self.node_name)
            return self._relist_or(rev)
        except Exception as exc:
            log.error("node %s: watch failed: %s; listing again", self.node_name, exc)
            self._stop.wait(1.0)
            return self._relist_or(rev)
        return rev

    def _relist_or(self, rev: int) -> int:
        try:
            return self.relist()
        except Exception as exc:
            log.error("node %s: cannot list: %s", self.node_name, exc)
            self._stop.wait(1.0)
            return rev

    def handle(self, change_type: str, obj: dict) -> None:
        """Apply one watched change to the cache and queue the pods it concerns."""
        if obj.get("apiVersion") != "v1" or obj.get("kind") not in WATCHED_KINDS:
            return
        if obj["kind"] == "Pod":
            self._handle_pod(change_type, obj)
        else:
            self._handle_source(change_type, obj)

    def _handle_pod(self, change_type: str, pod: dict) -> None:
        uid = _meta(pod).get("uid", "")
        bound_here = (pod.get("spec") or {}).get("nodeName") == self.node_name
        if change_type == "DELETED" or not bound_here:
            gone = self.pods.pop(uid, rv=_rv(pod))
            with self._removed_lock:
                finished = uid in self._finished
                self._finished.discard(uid)
            if gone is not None and not finished:
                self._forget_pod(uid, pod if change_type == "DELETED" else gone)
            return
        old = self.pods.offer(uid, pod)
        if old is None or (_rv(pod) > _rv(old) and _desired_part(old) != _desired_part(pod)):
            self.queue.add(uid)

    def _forget_pod(self, uid: str, last: dict) -> None:
        """A Pod object left this node: its containers are stopped by a worker."""
        with self._removed_lock:
            self._removed[uid] = last
        self.queue.add(uid)

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
        for uid in self.pods.keys():
            self.queue.add(uid)
        with self._removed_lock:
            removed = list(self._removed)
        for uid in removed:
            self.queue.add(uid)

    def _handle_source(self, change_type: str, obj: dict) -> None:
        meta = _meta(obj)
        key = (obj["kind"], meta.get("namespace", ""), meta.get("name", ""))
        if change_type == "DELETED":
            if self.sources.pop(key, rv=_rv(obj)) is None:
                return
        else:
            old = self.sources.offer(key, obj)
            if old is not None and _rv(old) > _rv(obj):
                return
        for pod in self.pods.values():
            if _meta(pod).get("namespace") == key[1] and (key[0], key[2]) in references(pod):
                self.queue.add(_meta(pod)["uid"])

    def _clean_orphans(self) -> None:
        try:
            removed = _podsync().cleanup_orphans(self.runtime, keep_uids=set(self.pods.keys()))
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
        """Write the pod's status if it changed; False on a Conflict (after re-reading the pod)."""
        if status is None or not status_differs(pod.get("status"), status):
            return True
        meta = _meta(pod)
        new = copy.deepcopy(pod)
        new["status"] = status
        try:
            stored = self.api.update_status(new)
        except NotFound:
            return True
        except Conflict:
            self._reread(pod)
            return False
        self.pods.offer(meta["uid"], stored)
        return True

    def _reread(self, pod: dict) -> None:
        meta = _meta(pod)
        try:
            current = self.api.get(self.api.resource("pods"), meta["name"], namespace=meta.get("namespace"))
        except NotFound:
            return
        if _meta(current).get("uid") == meta["uid"]:
            self.pods.offer(meta["uid"], current)


# -- one agent per Node ---------------------------------------------------------------------

def node_connection(node: dict) -> tuple[str, str]:
    """(Podman URL, SSH identity) from a Node's annotations; "" when unset."""
    annotations = _meta(node).get("annotations") or {}
    return annotations.get(ANNOTATION_PODMAN_URL, ""), annotations.get(ANNOTATION_SSH_IDENTITY, "")


class NodeAgentSupervisor:
    """Runs a NodeAgent for every Node with a Podman URL; follows Nodes added, changed, removed.

    A Node whose runtime cannot be made (bad URL, key missing) is tried again every
    `retry` seconds. Stopping leaves every container running.
    """

    def __init__(self, api: API, *, runtime_for_node: Callable[[dict], object], retry: float = 10.0,
                 agent_factory: Callable[..., NodeAgent] = NodeAgent, own_node: str | None = None,
                 **agent_options) -> None:
        self.api = api
        # Node mode (`kctl daemon --server`): the agent of this one Node only. Otherwise every
        # Node but those whose own host runs their agent (annotated kctl.io/agent=node).
        self.own_node = own_node
        self.runtime_for_node = runtime_for_node
        self.retry = retry
        self.agent_factory = agent_factory
        self.agent_options = agent_options
        self.agents: dict[str, NodeAgent] = {}
        self._connections: dict[str, tuple[str, str]] = {}
        self._failures: dict[str, str] = {}  # node -> the last error met starting its agent
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="node-agents", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        """Stop following Nodes and stop every agent (in parallel)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        stoppers = [threading.Thread(target=self._retire, args=(agent, timeout), daemon=True)
                    for agent in self.agents.values()]
        for thread in stoppers:
            thread.start()
        for thread in stoppers:
            thread.join(timeout)
        self.agents.clear()
        self._connections.clear()

    def _run(self) -> None:
        rt = self.api.resource("nodes")
        while not self._stop.is_set():
            try:
                nodes, rev = self.api.list(rt)
                self.reconcile(nodes)
                # Wake on the first Node change, or after `retry` s to retry failed nodes.
                for _ in self.api.watch(rt, since=rev, stop=self._stop, timeout=self.retry):
                    break
            except Exception as exc:
                log.error("node agents: %s", exc)
                self._stop.wait(1.0)

    def reconcile(self, nodes: list[dict]) -> None:
        """Start, restart or stop agents so there is one per usable Node."""
        wanted: dict[str, dict] = {}
        owners: dict[str, str] = {}  # Podman URL -> the node it serves
        for node in sorted(nodes, key=lambda n: _meta(n)["name"]):
            name, (url, _) = _meta(node)["name"], node_connection(node)
            if not url or _meta(node).get("deletionTimestamp"):
                continue
            if self.own_node is not None:
                if name != self.own_node:
                    continue
            elif (_meta(node).get("annotations") or {}).get(ANNOTATION_AGENT) == AGENT_NODE_MODE:
                continue  # its own host runs its agent
            if url in owners:
                # Two agents on one Podman would remove each other's pods as orphans.
                self._failed(name, f"its Podman {url} is already node {owners[url]}'s; no agent for it")
                continue
            owners[url] = name
            wanted[name] = node
        for name in [n for n in self.agents if n not in wanted or
                     self._connections.get(n) != node_connection(wanted[n])]:
            self._stop_agent(name)
        for name, node in wanted.items():
            if name not in self.agents and not self._stop.is_set():
                self._start_agent(node)

    def _start_agent(self, node: dict) -> None:
        name = _meta(node)["name"]
        url, identity = node_connection(node)
        try:
            runtime = self.runtime_for_node(node)
        except Exception as exc:
            self._failed(name, f"cannot reach Podman at {url}: {exc}")
            return
        try:
            agent = self.agent_factory(self.api, name, runtime, host_ip=node_address(node),
                                       remote=url.startswith("ssh://"), **self.agent_options)
            agent.start()
        except Exception as exc:
            self._failed(name, f"cannot start its agent: {type(exc).__name__}: {exc}")
            close = getattr(runtime, "close", None)
            if callable(close):
                close()
            return
        self._failures.pop(name, None)
        self.agents[name] = agent
        self._connections[name] = (url, identity)

    def _failed(self, name: str, message: str) -> None:
        """Log a failure to start a node's agent once per distinct error (retries stay quiet)."""
        (log.debug if self._failures.get(name) == message else log.error)("node %s: %s (retrying)", name, message)
        self._failures[name] = message

    def _stop_agent(self, name: str) -> None:
        agent = self.agents.pop(name)
        self._connections.pop(name, None)
        self._retire(agent)

    @staticmethod
    def _retire(agent: NodeAgent, timeout: float = 10.0) -> None:
        """Stop an agent, then close the runtime connection made for it (SSH tunnel...)."""
        agent.stop(timeout)
        close = getattr(agent.runtime, "close", None)
        if callable(close):
            try:
                close()
            except Exception as exc:
                log.warning("node %s: closing the runtime connection: %s", agent.node_name, exc)


__all__ = ["NodeAgent", "NodeAgentSupervisor", "has_probes", "node_connection", "references", "status_differs"]
