"""The daemon's cluster DNS: serve kctl.dns while leading, and keep the kube-system/kube-dns Service pointing at it.

kctl.daemon.controlplane starts one ClusterDNSRunner beside the scheduler. For each
leadership term of the controller manager (only the leading daemon serves, as only it
runs controllers) it:

- serves kctl.dns.server.ClusterDNS on `0.0.0.0:<--cluster-dns-port>` (UDP and TCP) for
  `--cluster-domain`, answering from the term's shared informers of Services and
  EndpointSlices and forwarding other names to this host's resolvers. It is not an open
  resolver: a question whose source is not loopback, a Node's InternalIP or inside
  `--cluster-cidr` gets REFUSED (SourcePolicy). A port that cannot be bound is one log
  line and a Warning Event (ClusterDNSListenFailed, on the kube-dns Service), then tried
  again every few seconds; it never stops the daemon.
- keeps the Service `kube-system/kube-dns` as kubeadm makes it (ClusterIP `--cluster-dns`,
  ports dns 53/UDP and dns-tcp 53/TCP, labels k8s-app=kube-dns and
  kubernetes.io/name=CoreDNS) but without a selector, and its one EndpointSlice
  `kube-system/kube-dns` (managed-by cluster-dns.kctl.io; the EndpointSlice controller
  leaves selector-less Services' slices alone) listing this host's address(es) as the
  Nodes reach it (`advertise_addresses`: the source address of the route to each Node's
  InternalIP, or `--cluster-dns-advertise-address`) with the DNS port, ready while the
  server listens. Every host's kube-proxy rules then carry pods' queries for
  10.96.0.10:53 here, also on agentless hosts where nothing of kctl's runs. A new leader
  rewrites the slice with its own address.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterable

from kctl.machinery.errors import AlreadyExists, APIError, Conflict, NotFound
from kctl.machinery.wellknown import SERVICE_NAME_LABEL

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.client.informer import Informer, InformerFactory
    from kctl.controllers.manager import ControllerManager
    from kctl.daemon.settings import DaemonSettings

log = logging.getLogger("kctl.clusterdns")

NAMESPACE = "kube-system"
SERVICE = "kube-dns"
SLICE = "kube-dns"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "cluster-dns.kctl.io"  # a label value: no "/" (as endpointslice-controller.k8s.io)
SERVICE_LABELS = {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}
BIND_ADDRESS = "0.0.0.0"
COMPONENT = "kctl-cluster-dns"
#: seconds between tries to bind the DNS port after a failure
BIND_RETRY_SECONDS = 5.0
#: seconds between checks of the kube-dns Service and slice (changes to them or to Nodes wake it sooner)
RECONCILE_SECONDS = 10.0
#: the longest the serving loop sleeps between looks at leadership and the times above (join() wakes it)
LOOP_SECONDS = 0.5
#: seconds the Node addresses of the source check are cached
NODE_ADDRESS_SECONDS = 1.0


# -- who may ask ------------------------------------------------------------------------------

class SourcePolicy:
    """Allow a query's source: loopback, a Node's InternalIP, or an address inside the cluster CIDR."""

    def __init__(self, *, cluster_cidr: str, node_addresses: Callable[[], Iterable[str]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cluster = ipaddress.ip_network(cluster_cidr, strict=False)
        self.node_addresses = node_addresses
        self.clock = clock
        self._lock = threading.Lock()
        self._nodes: frozenset[str] = frozenset()
        self._until = 0.0

    def __call__(self, source: str) -> bool:
        try:
            ip = ipaddress.ip_address(source)
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if ip.is_loopback or (ip.version == self.cluster.version and ip in self.cluster):
            return True
        return str(ip) in self._node_set()

    def _node_set(self) -> frozenset[str]:
        now = self.clock()
        with self._lock:
            if now >= self._until:
                self._nodes = frozenset(self.node_addresses())
                self._until = now + NODE_ADDRESS_SECONDS
            return self._nodes


def node_internal_ips(nodes: Iterable[dict]) -> list[str]:
    """Every InternalIP of the Nodes, in order, without repeats."""
    found: dict[str, None] = {}
    for node in nodes:
        for address in (node.get("status") or {}).get("addresses") or ():
            if address.get("type") == "InternalIP" and address.get("address"):
                found.setdefault(str(address["address"]), None)
    return list(found)


# -- where the Nodes reach this host ----------------------------------------------------------

def route_source(destination: str) -> str | None:
    """The source address this host uses towards `destination` (as `ip route get`), None without a route."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((destination, 53))  # a UDP connect sends nothing: it only picks the route
        return str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()


def advertise_addresses(node_ips: Iterable[str], *, override: Iterable[str] = (),
                        source: Callable[[str], str | None] = route_source) -> list[str]:
    """This host's addresses as the Nodes reach it: `override` if given, else the route source towards each
    Node (loopback left out: a pod cannot be sent there), else the source of the default route."""
    chosen = [a for a in override if a]
    if chosen:
        return list(dict.fromkeys(chosen))
    found: dict[str, None] = {}
    for ip in node_ips:
        src = source(ip)
        if src and not ipaddress.ip_address(src).is_loopback:
            found.setdefault(src, None)
    if not found:
        src = source("10.255.255.255")
        if src and not ipaddress.ip_address(src).is_loopback:
            found[src] = None
    return list(found)


# -- the kube-dns Service and its EndpointSlice ----------------------------------------------

def kube_dns_service(cluster_ip: str, port: int) -> dict:
    """kubeadm's kube-dns Service without a selector: dns 53/UDP and dns-tcp 53/TCP to `port`."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": dict(SERVICE_LABELS)},
            "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "clusterIPs": [cluster_ip],
                     "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": port},
                               {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": port}]}}


def kube_dns_slice(addresses: Iterable[str], port: int, *, ready: bool, service: dict | None = None) -> dict:
    """The EndpointSlice of kube-dns: one endpoint per address, the DNS port for UDP and TCP."""
    meta: dict = {"name": SLICE, "namespace": NAMESPACE,
                  "labels": {SERVICE_NAME_LABEL: SERVICE, MANAGED_BY_LABEL: MANAGED_BY, "k8s-app": "kube-dns"}}
    uid = ((service or {}).get("metadata") or {}).get("uid")
    if uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Service", "name": SERVICE, "uid": uid,
                                    "controller": True, "blockOwnerDeletion": True}]
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta, "addressType": "IPv4",
            "endpoints": [{"addresses": [a], "conditions": {"ready": ready, "serving": ready, "terminating": False}}
                          for a in addresses],
            "ports": [{"name": "dns", "port": port, "protocol": "UDP"},
                      {"name": "dns-tcp", "port": port, "protocol": "TCP"}]}


def _service_matches(current: dict, wanted: dict) -> bool:
    spec, want = current.get("spec") or {}, wanted["spec"]
    labels = (current.get("metadata") or {}).get("labels") or {}
    ports = [{k: p.get(k) for k in ("name", "port", "protocol", "targetPort")} for p in spec.get("ports") or []]
    return (not spec.get("selector") and ports == want["ports"] and spec.get("type", "ClusterIP") == "ClusterIP"
            and all(labels.get(k) == v for k, v in SERVICE_LABELS.items()))


def ensure_service(api: API, cluster_ip: str, port: int) -> dict:
    """kube-system/kube-dns as kube_dns_service says (made again when its ClusterIP differs); the stored one.

    APIError when it cannot be written (e.g. the address is another Service's, or outside the range)."""
    rt = api.resource("services")
    wanted = kube_dns_service(cluster_ip, port)
    try:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    except AlreadyExists:
        pass
    try:
        current = api.get(rt, SERVICE, namespace=NAMESPACE)
    except NotFound:
        return api.create(wanted, namespace=NAMESPACE)
    if (current.get("spec") or {}).get("clusterIP") != cluster_ip:
        log.info("kube-dns: its ClusterIP %s is not --cluster-dns %s: making it again",
                 (current.get("spec") or {}).get("clusterIP"), cluster_ip)
        api.delete(rt, SERVICE, namespace=NAMESPACE)
        return api.create(wanted, namespace=NAMESPACE)
    if _service_matches(current, wanted):
        return current
    spec = {k: v for k, v in (current.get("spec") or {}).items() if k != "selector"}
    spec.update(type="ClusterIP", ports=wanted["spec"]["ports"])
    meta = dict(current["metadata"])
    meta["labels"] = {**(meta.get("labels") or {}), **SERVICE_LABELS}
    return api.update({**current, "metadata": meta, "spec": spec}, namespace=NAMESPACE)


def _slice_matches(current: dict, wanted: dict) -> bool:
    labels = (current.get("metadata") or {}).get("labels") or {}
    owners = (current.get("metadata") or {}).get("ownerReferences") or []
    return (all(labels.get(k) == v for k, v in wanted["metadata"]["labels"].items())
            and owners == wanted["metadata"].get("ownerReferences", owners)
            and current.get("addressType") == "IPv4"
            and current.get("endpoints") == wanted["endpoints"] and current.get("ports") == wanted["ports"])


def ensure_slice(api: API, service: dict | None, addresses: Iterable[str], port: int, *, ready: bool) -> dict:
    """The EndpointSlice kube-system/kube-dns as kube_dns_slice says; the stored one (APIError if it cannot be)."""
    rt = api.resource("endpointslices.discovery.k8s.io")
    wanted = kube_dns_slice(addresses, port, ready=ready, service=service)
    try:
        current = api.get(rt, SLICE, namespace=NAMESPACE)
    except NotFound:
        return api.create(wanted, namespace=NAMESPACE)
    if _slice_matches(current, wanted):
        return current
    meta = {**current["metadata"], "labels": {**(current["metadata"].get("labels") or {}),
                                              **wanted["metadata"]["labels"]}}
    if "ownerReferences" in wanted["metadata"]:
        meta["ownerReferences"] = wanted["metadata"]["ownerReferences"]
    return api.update({**current, "metadata": meta, "addressType": "IPv4", "endpoints": wanted["endpoints"],
                       "ports": wanted["ports"]}, namespace=NAMESPACE)


# -- the view the answers are made from -------------------------------------------------------

class InformerView:
    """kctl.dns.records.ClusterView over shared informers of Services and EndpointSlices."""

    def __init__(self, services: Informer, slices: Informer) -> None:
        self.services = services
        self.slices = slices

    def service(self, namespace: str, name: str) -> dict | None:
        return self.services.get(namespace, name)

    def endpoint_slices(self, namespace: str, service: str) -> list[dict]:
        return [s for s in self.slices.list(namespace)
                if ((s.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL) == service]


# -- the runner -------------------------------------------------------------------------------

class ClusterDNSRunner:
    """Serves cluster DNS and keeps kube-dns while the manager leads (module doc); start() then join()."""

    def __init__(self, api: API, settings: DaemonSettings, manager: ControllerManager) -> None:
        self.api = api
        self.settings = settings
        self.manager = manager
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._problem: str | None = None  # the last kube-dns write failure, logged once
        #: the port being served, None while not serving (tests read it)
        self.port: int | None = None

    def start(self, stop: threading.Event) -> None:
        """Follow the manager's terms in a thread until `stop` is set."""
        self._thread = threading.Thread(target=self._follow, args=(stop,), name="kctl-cluster-dns", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the loop to end (after its stop was set): woken now, not at its next LOOP_SECONDS."""
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _follow(self, stop: threading.Event) -> None:
        while not stop.is_set():
            if not self.manager.wait_until_running(timeout=1.0):
                continue
            informers = self.manager.informers
            if informers is None:
                continue
            try:
                self._term(informers, stop)
            except Exception:  # a bug here must not end DNS for good: the next pass starts over
                log.exception("cluster DNS: term failed; starting again")
                stop.wait(BIND_RETRY_SECONDS)

    def _term(self, informers: InformerFactory, stop: threading.Event) -> None:
        from kctl.dns.server import ClusterDNS

        services = informers.informer("services")
        slices = informers.informer("endpointslices.discovery.k8s.io")
        nodes = informers.informer("nodes")
        for informer in (services, slices, nodes):
            while not informer.wait_for_sync(0.5):
                if stop.is_set() or not self.manager.is_leader:
                    return
        self._watch(services, slices, nodes)
        policy = SourcePolicy(cluster_cidr=self.settings.cluster_cidr,
                              node_addresses=lambda: node_internal_ips(nodes.list()))
        server: ClusterDNS | None = None
        failure: str | None = None
        next_bind = next_check = 0.0
        try:
            while not stop.is_set() and self.manager.is_leader:
                now = time.monotonic()
                if now >= next_check or self._wake.is_set():  # first: a bind failure's Event needs the Service
                    self._wake.clear()
                    self._reconcile(nodes, server.port if server else None)
                    next_check = now + RECONCILE_SECONDS
                if server is None and now >= next_bind:
                    try:
                        server = ClusterDNS(InformerView(services, slices), address=BIND_ADDRESS,
                                            port=self.settings.cluster_dns_port or 0,
                                            zone=self.settings.cluster_domain, allow=policy)
                        server.start()
                        self.port, failure = server.port, None
                        self._wake.set()  # the slice: this port, ready
                        continue
                    except OSError as exc:
                        message = (f"cluster DNS cannot listen on {BIND_ADDRESS}:{self.settings.cluster_dns_port}: "
                                   f"{exc.strerror or exc}; trying again every {BIND_RETRY_SECONDS:g}s")
                        if message != failure:
                            log.warning("%s", message)
                            self._event(message)
                        failure, next_bind = message, now + BIND_RETRY_SECONDS
                self._wake.wait(LOOP_SECONDS)
        finally:
            self.port = None
            if server is not None:
                server.close()
                log.info("cluster DNS stopped")

    def _watch(self, services: Informer, slices: Informer, nodes: Informer) -> None:
        """Wake the loop when kube-dns or its slice changes, or a Node comes, goes or changes its address."""
        def ours(obj: dict) -> bool:
            meta = obj.get("metadata") or {}
            return meta.get("namespace") == NAMESPACE and meta.get("name") in (SERVICE, SLICE)

        def poke(obj: dict) -> None:
            if ours(obj):
                self._wake.set()

        for informer in (services, slices):
            informer.add_handler(None, lambda old, new: poke(new), poke)
        def node_changed(old: dict, new: dict) -> None:
            if node_internal_ips([old]) != node_internal_ips([new]):  # not every status heartbeat
                self._wake.set()

        nodes.add_handler(lambda obj: self._wake.set(), node_changed, lambda obj: self._wake.set())

    def _reconcile(self, nodes: Informer, port: int | None) -> None:
        """kube-dns and its slice as they should be now; problems are logged and tried again later."""
        wanted_port = port or self.settings.cluster_dns_port
        try:
            service = ensure_service(self.api, self.settings.cluster_dns, wanted_port or 53)
            if wanted_port:
                addresses = advertise_addresses(node_internal_ips(nodes.list()),
                                                override=self.settings.cluster_dns_advertise_addresses)
                ensure_slice(self.api, service, addresses, wanted_port, ready=port is not None)
        except Conflict:
            self._wake.set()  # changed meanwhile: look again at once
        except APIError as exc:
            message = f"cluster DNS: cannot keep {NAMESPACE}/{SERVICE}: {exc}"
            if message != self._problem:  # said once, not every pass
                log.warning("%s", message)
            self._problem = message
        else:
            self._problem = None

    def _event(self, message: str) -> None:
        from kctl.client.events import record

        try:
            service = self.api.get(self.api.resource("services"), SERVICE, namespace=NAMESPACE)
        except APIError:
            return
        record(self.api, service, type="Warning", reason="ClusterDNSListenFailed", message=message,
               component=COMPONENT)


__all__ = ["ClusterDNSRunner", "InformerView", "SourcePolicy", "advertise_addresses", "ensure_service",
           "ensure_slice", "kube_dns_service", "kube_dns_slice", "node_internal_ips", "route_source"]
