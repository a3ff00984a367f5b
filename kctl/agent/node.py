"""A Node's life from its agent's side: registration, status, and the heartbeat.

`kctl daemon` (kctl.cli.daemon) calls `register_node` for the host it runs on when
the store has no Node yet. Each NodeAgent (kctl.agent.agent) runs a `Heartbeat`, which
renews the node's Lease in `kube-node-lease` every few seconds and writes the Node's
status (capacity from `podman info`, images, the Ready condition) when it changes or
every few beats, as the kubelet does. The node lifecycle controller reads both to tell
a live node from a silent one.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import socket
import threading
import time
from typing import Callable
from urllib.parse import urlparse

from kctl.api.errors import AlreadyExists, Conflict, NotFound
from kctl.runtime.interface import HostInfo, ImageInfo

log = logging.getLogger("kctl.agent.node")

ANNOTATION_PODMAN_URL = "kctl.io/podman-url"
ANNOTATION_SSH_IDENTITY = "kctl.io/ssh-identity"
#: `node` on a Node whose host runs its own agent (`kctl daemon --server`, node mode): the
#: control host's daemon runs no agent for it
ANNOTATION_AGENT = "kctl.io/agent"
AGENT_NODE_MODE = "node"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
KUBELET_VERSION = "kctl-v0.1.0"
MAX_POD_COUNT = "110"
#: the kubelet reports at most this many images, largest first
MAX_IMAGES = 50
READY_MESSAGE = "kubelet is posting ready status"


def rfc3339(ts: float) -> str:
    """Seconds since the epoch as Kubernetes' Time: 2026-12-02T16:00:00Z."""
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(ts: float) -> str:
    """Seconds since the epoch as Kubernetes' MicroTime: 2026-12-02T16:00:00.000000Z."""
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- registration --------------------------------------------------------------------------

def node_object(name: str, *, podman_url: str, identity: str | None = None,
                labels: dict[str, str] | None = None, node_mode: bool = False) -> dict:
    """A new Node object for a host reached at podman_url (node_mode: its host runs its agent)."""
    annotations = {ANNOTATION_PODMAN_URL: podman_url}
    if identity:
        annotations[ANNOTATION_SSH_IDENTITY] = identity
    if node_mode:
        annotations[ANNOTATION_AGENT] = AGENT_NODE_MODE
    all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": all_labels, "annotations": annotations},
            "spec": {}}


def register_node(api, name: str, *, podman_url: str, identity: str | None = None,
                  labels: dict[str, str] | None = None, node_mode: bool = False) -> dict:
    """The Node called `name`, created (labels, Podman URL annotations) if missing.

    node_mode: the Node is created, or an existing one marked in one write, as run by its
    own host's agent on podman_url (so no control host's daemon ever runs one for it too).
    """
    rt = api.resource("nodes")
    try:
        return _mark_node_mode(api, api.get(rt, name), podman_url) if node_mode else api.get(rt, name)
    except NotFound:
        pass
    try:
        node = api.create(node_object(name, podman_url=podman_url, identity=identity, labels=labels,
                                      node_mode=node_mode))
        log.info("registered node %s (podman %s)", name, podman_url)
        return node
    except AlreadyExists:  # another daemon registered it meanwhile
        return _mark_node_mode(api, api.get(rt, name), podman_url) if node_mode else api.get(rt, name)


def _mark_node_mode(api, node: dict, podman_url: str) -> dict:
    want = {ANNOTATION_AGENT: AGENT_NODE_MODE, ANNOTATION_PODMAN_URL: podman_url}
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    if all(annotations.get(k) == v for k, v in want.items()) and ANNOTATION_SSH_IDENTITY not in annotations:
        return node
    log.info("node %s: now run by its own agent (node mode, podman %s)", node["metadata"]["name"], podman_url)
    patch = {"metadata": {"annotations": {**want, ANNOTATION_SSH_IDENTITY: None}}}
    return api.patch(api.resource("nodes"), node["metadata"]["name"], patch, patch_type="merge")


def node_address(node: dict) -> str:
    """The InternalIP of a Node: the SSH host of its Podman URL, else this host's own address."""
    meta = node.get("metadata") or {}
    url = (meta.get("annotations") or {}).get(ANNOTATION_PODMAN_URL, "")
    for address in (node.get("status") or {}).get("addresses") or ():
        if address.get("type") == "InternalIP" and address.get("address"):
            return address["address"]
    parsed = urlparse(url)
    if parsed.scheme in ("ssh", "tcp", "http", "https") and parsed.hostname:
        try:
            return socket.gethostbyname(parsed.hostname)
        except OSError:
            return parsed.hostname
    return local_address()


def local_address() -> str:
    """This host's primary IPv4 address (the source of its default route), else 127.0.0.1."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.255", 1))  # UDP connect sends nothing: it only picks a route
        return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"
    finally:
        probe.close()


# -- status ----------------------------------------------------------------------------------

def _ready_condition(ready: bool, message: str, previous: dict | None, now: float) -> dict:
    status = "True" if ready else "False"
    old = next((c for c in ((previous or {}).get("conditions") or ()) if c.get("type") == "Ready"), None)
    transition = old.get("lastTransitionTime") if old and old.get("status") == status else None
    return {"type": "Ready", "status": status,
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": message or (READY_MESSAGE if ready else "container runtime is down"),
            "lastHeartbeatTime": rfc3339(now),
            "lastTransitionTime": transition or rfc3339(now)}


def _images(images: list[ImageInfo]) -> list[dict]:
    ordered = sorted(images, key=lambda i: i.size, reverse=True)[:MAX_IMAGES]
    return [{"names": list(i.names) or [i.id], "sizeBytes": i.size} for i in ordered]


def node_status(info: HostInfo | None, images: list[ImageInfo] | None, *, ready: bool, message: str,
                previous: dict | None, now: float, internal_ip: str = "", hostname: str = "") -> dict:
    """The Node status a kubelet would post; without `info` (runtime down) the last known capacity stays."""
    status = copy.deepcopy(previous) if previous else {}
    if info is not None:
        resources = {"cpu": str(info.cpus), "memory": f"{info.memory_bytes // 1024}Ki", "pods": MAX_POD_COUNT}
        status["capacity"] = resources
        status["allocatable"] = dict(resources)
        status["nodeInfo"] = {
            "operatingSystem": "linux", "osImage": info.os, "kernelVersion": info.kernel,
            "architecture": info.arch, "containerRuntimeVersion": info.runtime_version,
            "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
            "machineID": "", "systemUUID": "", "bootID": ""}
        hostname = hostname or info.hostname
    if images is not None:
        status["images"] = _images(images)
    addresses = [a for a in status.get("addresses") or () if a.get("type") not in ("InternalIP", "Hostname")]
    old = {a.get("type"): a.get("address") for a in status.get("addresses") or ()}
    internal_ip = internal_ip or old.get("InternalIP", "")
    hostname = hostname or old.get("Hostname", "")
    if internal_ip:
        addresses.append({"type": "InternalIP", "address": internal_ip})
    if hostname:
        addresses.append({"type": "Hostname", "address": hostname})
    status["addresses"] = addresses
    others = [c for c in status.get("conditions") or () if c.get("type") != "Ready"]
    status["conditions"] = others + [_ready_condition(ready, message, previous, now)]
    return status


def _without_heartbeat(status: dict | None) -> dict:
    """A status with its heartbeat times removed, to tell a real change from a beat."""
    out = copy.deepcopy(status or {})
    for condition in out.get("conditions") or ():
        condition.pop("lastHeartbeatTime", None)
    return out


def _ready_of(status: dict | None) -> str:
    """The Ready condition's status ("True", "False"), "Unknown" when there is none."""
    for condition in (status or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return condition.get("status", "Unknown")
    return "Unknown"


def status_changed(old: dict | None, new: dict | None) -> bool:
    """Whether two Node statuses differ in more than their heartbeat times."""
    return _without_heartbeat(old) != _without_heartbeat(new)


# -- the heartbeat ---------------------------------------------------------------------------

class Heartbeat:
    """Renews the node's Lease every `interval` s and posts its status when it changed.

    The status is also written every `status_every`-th beat even when unchanged, so its
    lastHeartbeatTime stays fresh. The Lease is renewed only while the host's runtime
    answers: a host that stops answering (cut off, down, Podman stopped) gets Ready=False
    with the error as message once, then silence, so the node lifecycle controller sees
    its Lease expire and marks it Unknown as it would a kubelet that died. When the host
    answers again, `before_ready` (the agent's fence: stop what was evicted meanwhile)
    runs first; the node is Ready again only after it returned True.
    """

    def __init__(self, api, node_name: str, runtime, *, interval: float = 5.0, status_every: int = 4,
                 lease_duration: int = LEASE_DURATION_SECONDS, internal_ip: str = "",
                 before_ready: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.api = api
        self.node_name = node_name
        self.runtime = runtime
        self.interval = interval
        self.status_every = max(1, status_every)
        self.lease_duration = lease_duration
        self.internal_ip = internal_ip
        self.clock = clock
        self.before_ready = before_ready
        self.beats = 0
        self.answering: bool | None = None  # None: not asked yet
        self.silence_reason = ""  # why the runtime last did not answer (logged when it changes)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- running -------------------------------------------------------------------------

    def start(self) -> None:
        """Beat now, then every `interval` seconds, in a thread of its own."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.node_name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self.beat()
            self._stop.wait(self.interval)

    def beat(self) -> None:
        """One beat: ask the runtime; renew the Lease and post the status if due. Logs, never raises."""
        observed = self.observe()
        try:
            if not self._may_report(observed):
                return
            try:
                self.renew_lease()
            except Exception as exc:
                log.warning("node %s: cannot renew lease: %s", self.node_name, exc)
            try:
                self.post_status(observed, force=self.beats % self.status_every == 0)
            except Exception as exc:
                log.warning("node %s: cannot post status: %s", self.node_name, exc)
        finally:
            self.beats += 1

    def _may_report(self, observed) -> bool:
        """Whether this beat renews the Lease: the runtime answers and, after silence, the fence ran."""
        answers = observed[2]
        if not answers:
            reason = observed[3]
            if self.answering is not False or reason != self.silence_reason:  # say why, once per reason
                log.warning("node %s: %s; the Lease is not renewed until it answers", self.node_name, reason)
            if self.answering is not False:  # just stopped answering: post NotReady once, then silence
                try:
                    self.post_status(observed, force=True)
                except Exception as exc:
                    log.warning("node %s: cannot post status: %s", self.node_name, exc)
            self.answering, self.silence_reason = False, reason
            return False
        if not self.answering and self.before_ready is not None:
            try:
                fenced = self.before_ready()
            except Exception as exc:
                log.warning("node %s: clean-up before Ready failed: %s", self.node_name, exc)
                fenced = False
            if not fenced:
                return False
        if self.answering is False:
            log.info("node %s: answering again", self.node_name)
        self.answering = True
        return True

    # -- the Lease -----------------------------------------------------------------------

    def renew_lease(self) -> dict:
        """Create or renew kube-node-lease/<node> (holderIdentity, duration, renewTime)."""
        rt = self.api.resource("leases")
        for _ in range(3):
            renew = rfc3339_micro(self.clock())
            try:
                lease = self.api.get(rt, self.node_name, namespace=LEASE_NAMESPACE)
            except NotFound:
                return self._create_lease(renew)
            lease = copy.deepcopy(lease)
            spec = lease.setdefault("spec", {})
            spec.update({"holderIdentity": self.node_name, "leaseDurationSeconds": self.lease_duration,
                         "renewTime": renew})
            try:
                return self.api.update(lease)
            except Conflict:
                continue
        raise Conflict(f"lease {LEASE_NAMESPACE}/{self.node_name}: renewal kept conflicting")

    def _create_lease(self, renew: str) -> dict:
        self._ensure_lease_namespace()
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": self.node_name, "namespace": LEASE_NAMESPACE},
                 "spec": {"holderIdentity": self.node_name, "leaseDurationSeconds": self.lease_duration,
                          "renewTime": renew}}
        node = self._node()
        if node is not None:
            lease["metadata"]["ownerReferences"] = [{
                "apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": node["metadata"]["uid"]}]
        try:
            return self.api.create(lease)
        except AlreadyExists:
            return self.renew_lease()

    def _ensure_lease_namespace(self) -> None:
        rt = self.api.resource("namespaces")
        try:
            self.api.get(rt, LEASE_NAMESPACE)
        except NotFound:
            try:
                self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NAMESPACE}})
            except AlreadyExists:
                pass

    # -- the Node status -----------------------------------------------------------------

    def _node(self) -> dict | None:
        try:
            return self.api.get(self.api.resource("nodes"), self.node_name)
        except NotFound:
            return None

    def observe(self) -> tuple[HostInfo | None, list[ImageInfo] | None, bool, str]:
        """Ask the runtime: (info, images, ready, message)."""
        try:
            info = self.runtime.info()
            images = self.runtime.list_images()
        except Exception as exc:
            message = f"container runtime is not reachable: {exc}".splitlines()[0]
            return None, None, False, message
        return info, images, True, READY_MESSAGE

    def post_status(self, observed=None, *, force: bool = False) -> dict | None:
        """Write the Node status if it changed (or `force`); the Node as stored, None if it is gone.

        `observed` is what observe() returned; asked now when not given.
        """
        info, images, ready, message = observed if observed is not None else self.observe()
        for _ in range(3):
            node = self._node()
            if node is None:
                log.warning("node %s: no Node object; status not posted", self.node_name)
                return None
            previous = node.get("status")
            status = node_status(info, images, ready=ready, message=message, previous=previous,
                                 now=self.clock(), internal_ip=self.internal_ip)
            if not force and not status_changed(previous, status):
                return node
            if _ready_of(previous) != _ready_of(status):
                log.info("node %s: Ready=%s%s", self.node_name, _ready_of(status), "" if ready else f" ({message})")
            node = copy.deepcopy(node)
            node["status"] = status
            try:
                return self.api.update_status(node)
            except Conflict:
                continue
        return None


__all__ = ["AGENT_NODE_MODE", "ANNOTATION_AGENT", "ANNOTATION_PODMAN_URL", "ANNOTATION_SSH_IDENTITY", "Heartbeat",
           "LEASE_NAMESPACE", "local_address", "node_address", "node_object", "node_status", "register_node", "rfc3339",
           "rfc3339_micro", "status_changed"]
