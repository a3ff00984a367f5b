"""A Node's life from its agent's side: registration, status, and the heartbeat.

`kctl daemon` (kctl.daemon.server) calls `register_node` for the host it runs on when
the store has no Node yet. Each NodeAgent (kctl.agent.agent) runs a `Heartbeat`, which
looks at its host over a connection of its own each beat (kctl.runtime.hostprobe),
renews the node's Lease in `kube-node-lease` while the host can be reached and writes
the Node's status (capacity from `podman info`, images, the Ready condition) when it
changes or every few beats, as the kubelet does. A host that cannot be reached gets no
heartbeat at all, only the cause (kctl.io/unreachable-* annotations, one Warning Event
per change); docs/node-lifecycle.md tells the whole story. The node lifecycle
controller reads the Lease and the status to tell a live node from a silent one.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import socket
import threading
import time
from typing import TYPE_CHECKING, Callable
from urllib.parse import urlparse

from kctl.machinery.errors import AlreadyExists, Conflict, NotFound
from kctl.client.retry import retry_on_conflict
from kctl.runtime.hostprobe import HostCheck, HostUnreachable
from kctl.runtime.interface import HostInfo, ImageInfo

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

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


def register_node(api: API, name: str, *, podman_url: str, identity: str | None = None,
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


def _mark_node_mode(api: API, node: dict, podman_url: str) -> dict:
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

def _ready_condition(ready: bool, message: str, previous: dict | None, now: float, reason: str = "") -> dict:
    status = "True" if ready else "False"
    old = next((c for c in ((previous or {}).get("conditions") or ()) if c.get("type") == "Ready"), None)
    transition = old.get("lastTransitionTime") if old and old.get("status") == status else None
    return {"type": "Ready", "status": status,
            "reason": "KubeletReady" if ready else (reason or "KubeletNotReady"),
            "message": message or (READY_MESSAGE if ready else "container runtime is down"),
            "lastHeartbeatTime": rfc3339(now),
            "lastTransitionTime": transition or rfc3339(now)}


def _images(images: list[ImageInfo]) -> list[dict]:
    ordered = sorted(images, key=lambda i: i.size, reverse=True)[:MAX_IMAGES]
    return [{"names": list(i.names) or [i.id], "sizeBytes": i.size} for i in ordered]


def node_status(info: HostInfo | None, images: list[ImageInfo] | None, *, ready: bool, message: str,
                previous: dict | None, now: float, internal_ip: str = "", hostname: str = "",
                reason: str = "") -> dict:
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
    status["conditions"] = others + [_ready_condition(ready, message, previous, now, reason)]
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

#: annotations on the Node naming why its agent cannot reach the host (docs/node-lifecycle.md)
ANNOTATION_UNREACHABLE_REASON = "kctl.io/unreachable-reason"
ANNOTATION_UNREACHABLE_MESSAGE = "kctl.io/unreachable-message"
ANNOTATION_UNREACHABLE_SINCE = "kctl.io/unreachable-since"
UNREACHABLE_ANNOTATIONS = (ANNOTATION_UNREACHABLE_REASON, ANNOTATION_UNREACHABLE_MESSAGE,
                           ANNOTATION_UNREACHABLE_SINCE)
#: a cause that lasts is logged again at most this often (seconds)
CAUSE_LOG_EVERY = 60.0
#: beats in a row that may merely run out of time before the host is called unreachable
DOUBTS = 1
#: beats (host looked at, Lease renewed) per heartbeat interval. Seeing a heal takes about a
#: second (ARP, a fresh ssh login); with two renewals per interval the last one before a cut
#: is at most half an interval old, so an outage shorter than grace - interval never makes
#: the node Unknown.
BEATS_PER_INTERVAL = 2
COMPONENT = "kubelet"


def check_timeout(interval: float) -> float:
    """How long one beat's look at the host may take: shorter than the interval (at least 1 s, at most 10 s)."""
    return min(10.0, max(1.0, 0.9 * interval))


def _check_by_calls(runtime, details: bool) -> HostCheck:
    """A runtime without check_host (the in-memory one): ask it info and images directly."""
    try:
        info = runtime.info()
        images = runtime.list_images()
    except HostUnreachable as exc:
        return HostCheck(reachable=False, answering=False, reason="HostUnreachable", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - any failure means "not answering"
        message = f"container runtime is not answering: {exc}".splitlines()[0]
        return HostCheck(reachable=True, answering=False, reason="PodmanNotAnswering", message=message)
    return HostCheck(reachable=True, answering=True, info=info, images=images)


class Heartbeat:
    """Renews the node's Lease twice every `interval` s and posts its status when it changed.

    Each beat looks at the host over a connection of its own (`check`, by default the
    runtime's check_host: an ssh of the heartbeat's own, kept between beats and ended at
    its first failure, each check bounded by check_timeout(interval)), never through the
    pod work's shared tunnel, and never waits on a lock pod work holds. Then:

    - host unreachable (ssh fails: cut off, refused, host key unknown or changed, login
      refused): nothing a lifecycle controller counts as a heartbeat is written: no Lease
      renewal, no status (so the node goes Unknown at the grace period and is tainted
      unreachable, as for a kubelet that cannot reach its API server). The cause goes on
      the Node as the kctl.io/unreachable-* annotations, and the pod work's connection is
      suspended (ended; its calls fail at once) until the host answers again;
    - host reachable, Podman not answering: the Lease is renewed and Ready=False posted
      with the cause as reason and message (a kubelet whose runtime is down);
    - all well: the Lease is renewed; when it was not well, `before_ready` (the agent's
      fence: stop what was evicted meanwhile) runs first, and the node is Ready again only
      after it returned True.

    A check that only ran out of time (no definite cause) renews nothing, but the host is
    called unreachable only when the next one fails too: a loaded host is not a lost one.
    After a beat spent failing to reach the host the next one starts at once, so a heal
    is seen within about a second.

    Every change of cause is logged once (and again at most every CAUSE_LOG_EVERY s while
    it lasts) and recorded as one Warning Event on the Node (repeats are counted).
    The status is also written every `status_every` intervals even when unchanged, so its
    lastHeartbeatTime stays fresh.
    """

    def __init__(self, api: API, node_name: str, runtime, *, interval: float = 5.0, status_every: int = 4,
                 lease_duration: int = LEASE_DURATION_SECONDS, internal_ip: str = "",
                 before_ready: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.time,
                 check: Callable[[bool], HostCheck] | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.node_name = node_name
        self.runtime = runtime
        self.interval = interval
        #: seconds between beats: each looks at the host and renews the Lease
        self.period = interval / BEATS_PER_INTERVAL
        #: beats between unconditional status writes (every `status_every` intervals)
        self.status_every = max(1, status_every) * BEATS_PER_INTERVAL
        self.lease_duration = lease_duration
        self.internal_ip = internal_ip
        self.clock = clock
        self.monotonic = monotonic
        self.before_ready = before_ready
        self.check = check or self._default_check()
        self.beats = 0
        self.answering: bool | None = None  # None: not asked yet
        self.reachable: bool | None = None  # None: not asked yet
        self.cause: tuple[str, str] | None = None  # (reason, message) of the trouble now, None when all is well
        self._doubts = 0  # beats in a row that only ran out of time
        self._cause_logged = 0.0  # monotonic time the cause was last logged
        self._annotated: tuple[str, str] | None | bool = True  # what the annotations say; True: not read yet
        self._warned: dict[str, tuple[str, float]] = {}  # what _warn said last, and when
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _default_check(self) -> Callable[[bool], HostCheck]:
        check_host = getattr(self.runtime, "check_host", None)
        if callable(check_host):
            timeout = check_timeout(self.interval)
            return lambda details: check_host(timeout=timeout, details=details, node=self.node_name)
        return lambda details: _check_by_calls(self.runtime, details)

    @property
    def paused(self) -> bool:
        """Whether pod work should wait: the last beat found the host unreachable or its Podman silent."""
        return self.answering is False

    # -- running -------------------------------------------------------------------------

    def start(self) -> None:
        """Beat now, then every `period` seconds (at a fixed rate), in a thread of its own."""
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
        due = time.monotonic()
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.beat()
            except Exception as exc:  # a heartbeat must outlive anything one beat meets
                log.error("node %s: heartbeat failed: %s: %s", self.node_name, type(exc).__name__, exc)
            due += self.period
            now = time.monotonic()
            if due < now or self._looking_for_host(now - started):
                due = now  # next one now (a beat that took the whole interval: no burst after)
            self._stop.wait(due - now)

    def _looking_for_host(self, took: float) -> bool:
        """Whether the last beat spent its whole time failing to reach the host: then the next starts at once,
        so the host is looked for without a pause and a heal is seen within about a second."""
        return self.reachable is False and took >= 0.5 * check_timeout(self.interval)

    def beat(self) -> None:
        """One beat: look at the host; renew the Lease and post the status as it allows. Logs, never raises."""
        try:
            details = self.beats % self.status_every == 0 or not self.answering
            observed = self.check(False)  # the ping alone: the Lease is renewed before info and images
            if not observed.reachable:
                if not observed.definite and self.reachable is not False and self._doubts < DOUBTS:
                    # Only out of time (a loaded host or link may be slow): this beat renews
                    # nothing, but the host is called unreachable only if the next one fails too.
                    self._doubts += 1
                    log.debug("node %s: no answer this beat (%s)", self.node_name, observed.message)
                    return
                self._unreachable(observed)
                return
            self._doubts = 0
            self._reached()
            # The host answered: that is a heartbeat, renewed at once (before the fence, which may
            # take a while; the Lease makes nothing Ready, only the status below does).
            self._renew()
            if details and observed.answering:
                detailed = self.check(True)  # over the connection the ping just used
                if detailed.answering:
                    observed = detailed
            if not observed.answering:
                self._note_cause(observed.reason, observed.message)
                self._post(observed, force=self.answering is not False)
                self.answering = False
                return
            if not self._may_report():
                return
            self._post(observed, force=self.beats % self.status_every == 0)
        finally:
            self.beats += 1

    def _renew(self) -> None:
        try:
            self.renew_lease()
        except Exception as exc:
            self._warn("lease", f"cannot renew lease: {exc}")

    def _post(self, observed: HostCheck, *, force: bool) -> None:
        try:
            self.post_status(observed, force=force)
        except Exception as exc:
            self._warn("status", f"cannot post status: {exc}")

    def _unreachable(self, observed: HostCheck) -> None:
        """The host cannot be reached: say why (once), suspend pod work, write no heartbeat."""
        reason = observed.reason or "HostUnreachable"
        message = observed.message or f"node {self.node_name}: the host cannot be reached"
        suspend = getattr(self.runtime, "suspend", None)
        if callable(suspend):
            suspend(message)
        self._note_cause(reason, message, annotate=True)
        self.reachable, self.answering = False, False

    def _reached(self) -> None:
        """The host answered ssh: pod work may reach it again (a fresh tunnel); the annotations go."""
        if self.reachable is False:
            resume = getattr(self.runtime, "resume", None)
            if callable(resume):
                resume()
            log.info("node %s: reachable again", self.node_name)
        self.reachable = True
        if self._annotated is not None:
            self._set_annotations(None)

    def _may_report(self) -> bool:
        """Podman answers: after trouble (or at start) the fence runs first; the cause is cleared."""
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
        self.cause = None
        return True

    # -- saying why ----------------------------------------------------------------------

    def _note_cause(self, reason: str, message: str, *, annotate: bool = False) -> None:
        """Log a new cause once (a lasting one again each CAUSE_LOG_EVERY s), Event it, annotate the Node."""
        now = self.monotonic()
        if self.cause is None or self.cause[0] != reason:  # a change of cause, not of its wording
            self.cause = (reason, message)
            self._cause_logged = now
            effect = "no heartbeat until it can be reached" if annotate else "Ready=False"
            log.warning("%s [%s]; %s", self._named(message), reason, effect)
            node = self._node_or_none()
            if node is not None:
                from kctl.client import events

                events.record(self.api, node, type="Warning", reason=reason, message=message,
                              component=COMPONENT, host=self.node_name)
        elif now - self._cause_logged >= CAUSE_LOG_EVERY:
            self._cause_logged = now
            log.warning("%s [%s, still]", self._named(message), reason)
        if annotate and (not isinstance(self._annotated, tuple) or self._annotated[0] != reason):
            self._set_annotations(self.cause)

    def _named(self, message: str) -> str:
        """The message, starting with "node NAME:" (the checks' messages already do)."""
        prefix = f"node {self.node_name}:"
        return message if message.startswith(prefix) else f"{prefix} {message}"

    def _set_annotations(self, cause: tuple[str, str] | None) -> None:
        """Make the Node's kctl.io/unreachable-* annotations say `cause` (None: remove them)."""
        node = self._node_or_none()
        if node is None:
            return
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        have = annotations.get(ANNOTATION_UNREACHABLE_REASON), annotations.get(ANNOTATION_UNREACHABLE_MESSAGE)
        if cause is None:
            patch = {key: None for key in UNREACHABLE_ANNOTATIONS if key in annotations}
        elif have == cause:
            patch = {}
        else:
            since = annotations.get(ANNOTATION_UNREACHABLE_SINCE) or rfc3339(self.clock())
            patch = {ANNOTATION_UNREACHABLE_REASON: cause[0], ANNOTATION_UNREACHABLE_MESSAGE: cause[1],
                     ANNOTATION_UNREACHABLE_SINCE: since}
        if patch:
            try:
                self.api.patch(self.api.resource("nodes"), self.node_name, {"metadata": {"annotations": patch}},
                               patch_type="merge")
            except NotFound:
                return
            except Exception as exc:
                self._warn("annotate", f"cannot annotate the cause: {exc}")
                return
        self._annotated = cause

    def _node_or_none(self) -> dict | None:
        """The Node, None when it is gone or the API cannot be reached (said once)."""
        try:
            return self._node()
        except Exception as exc:
            self._warn("read", f"cannot read the Node: {exc}")
            return None

    # -- the Lease -----------------------------------------------------------------------

    def renew_lease(self) -> dict:
        """Create or renew kube-node-lease/<node> (holderIdentity, duration, renewTime)."""
        rt = self.api.resource("leases")

        def renew() -> dict:
            renew_time = rfc3339_micro(self.clock())
            try:
                lease = self.api.get(rt, self.node_name, namespace=LEASE_NAMESPACE)
            except NotFound:
                return self._create_lease(renew_time)
            lease = copy.deepcopy(lease)
            spec = lease.setdefault("spec", {})
            spec.update({"holderIdentity": self.node_name, "leaseDurationSeconds": self.lease_duration,
                         "renewTime": renew_time})
            return self.api.update(lease)

        return retry_on_conflict(renew, attempts=3)

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

    def observe(self) -> HostCheck:
        """Look at the host now (with info and images)."""
        return self.check(True)

    def post_status(self, observed: HostCheck | None = None, *, force: bool = False) -> dict | None:
        """Write the Node status if it changed (or `force`); the Node as stored, None if it is gone.

        `observed` is what a check found (reachable); asked now when not given.
        """
        observed = observed if observed is not None else self.observe()
        ready = observed.answering
        message = READY_MESSAGE if ready else observed.message

        def post() -> dict | None:
            node = self._node()
            if node is None:
                self._warn("no-node", "no Node object; status not posted")
                return None
            previous = node.get("status")
            status = node_status(observed.info, observed.images, ready=ready, message=message, previous=previous,
                                 now=self.clock(), internal_ip=self.internal_ip, reason=observed.reason)
            if not force and not status_changed(previous, status):
                return node
            if _ready_of(previous) != _ready_of(status):
                log.info("node %s: Ready=%s%s", self.node_name, _ready_of(status), "" if ready else f" ({message})")
            node = copy.deepcopy(node)
            node["status"] = status
            return self.api.update_status(node)

        try:
            return retry_on_conflict(post, attempts=3)
        except Conflict:
            return None  # still contended: the next heartbeat posts it

    def _warn(self, key: str, text: str) -> None:
        """Log a warning about the API once per distinct text, and again at most each CAUSE_LOG_EVERY s."""
        now = self.monotonic()
        last = self._warned.get(key)
        if last is None or last[0] != text or now - last[1] >= CAUSE_LOG_EVERY:
            log.warning("node %s: %s", self.node_name, text)
            self._warned[key] = (text, now)


__all__ = ["AGENT_NODE_MODE", "ANNOTATION_AGENT", "ANNOTATION_PODMAN_URL", "ANNOTATION_SSH_IDENTITY",
           "ANNOTATION_UNREACHABLE_MESSAGE", "ANNOTATION_UNREACHABLE_REASON", "ANNOTATION_UNREACHABLE_SINCE",
           "CAUSE_LOG_EVERY", "Heartbeat", "UNREACHABLE_ANNOTATIONS", "check_timeout",
           "LEASE_NAMESPACE", "local_address", "node_address", "node_object", "node_status", "register_node", "rfc3339",
           "rfc3339_micro", "status_changed"]
