"""What the proxy renders, read from Services and EndpointSlices: one record per Service port.

Pure functions (no I/O), used by kctl.agent.proxy.nftables. `service_ports(services,
slices)` joins each Service port to the endpoints its EndpointSlices list for it (by
port name and protocol, as kube-proxy's EndpointSlice cache does), and reads the
Service's addresses (clusterIP, nodePort, externalIPs, load-balancer ingress), its
traffic policies and session affinity. `usable(endpoints)` picks the endpoints new
connections may go to, as kube-proxy's CategorizeEndpoints does: the ready ones, or,
only when none is ready, those still serving while they terminate.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Iterable

from kctl.machinery.wellknown import SERVICE_NAME_LABEL

#: kube-proxy's default sessionAffinityConfig.clientIP.timeoutSeconds (3 hours)
DEFAULT_AFFINITY_SECONDS = 10800
PROTOCOLS = ("TCP", "UDP", "SCTP")


@dataclass(frozen=True)
class Endpoint:
    """One backend of a Service port: an address and port, its conditions and node."""

    ip: str
    port: int
    ready: bool = True
    serving: bool = True
    terminating: bool = False
    node: str = ""


@dataclass(frozen=True)
class ServicePort:
    """One port of one Service, with everything the rules for it need."""

    namespace: str
    name: str
    port_name: str
    protocol: str  # TCP, UDP or SCTP
    port: int
    cluster_ips: tuple[str, ...] = ()
    node_port: int = 0
    #: addresses outside the cluster that lead to it: spec.externalIPs, status.loadBalancer.ingress[].ip
    external_ips: tuple[str, ...] = ()
    #: type LoadBalancer: `port` also answers on every node's addresses (k3s ServiceLB's way)
    load_balancer: bool = False
    external_local: bool = False  # externalTrafficPolicy: Local
    internal_local: bool = False  # internalTrafficPolicy: Local
    affinity_seconds: int = 0  # sessionAffinity ClientIP timeout, 0 = none
    endpoints: tuple[Endpoint, ...] = field(default=())

    @property
    def ident(self) -> str:
        """`namespace/name/proto/port-name` (the port number when the port has no name)."""
        return f"{self.namespace}/{self.name}/{self.protocol.lower()}/{self.port_name or self.port}"

    @property
    def has_external(self) -> bool:
        return bool(self.node_port or self.external_ips or self.load_balancer)


def _ipv4(value: object) -> str | None:
    try:
        address = ipaddress.ip_address(str(value))
    except ValueError:
        return None
    return str(address) if address.version == 4 else None


def _cluster_ips(spec: dict) -> tuple[str, ...]:
    values = list(spec.get("clusterIPs") or ()) or [spec.get("clusterIP")]
    return tuple(dict.fromkeys(ip for ip in (_ipv4(v) for v in values if v and v != "None") if ip))


def _external_ips(service: dict) -> tuple[str, ...]:
    spec, status = service.get("spec") or {}, service.get("status") or {}
    values = list(spec.get("externalIPs") or ())
    values += [i.get("ip") for i in ((status.get("loadBalancer") or {}).get("ingress") or ()) if isinstance(i, dict)]
    return tuple(dict.fromkeys(ip for ip in (_ipv4(v) for v in values if v) if ip))


def _affinity_seconds(spec: dict) -> int:
    if spec.get("sessionAffinity") != "ClientIP":
        return 0
    config = ((spec.get("sessionAffinityConfig") or {}).get("clientIP") or {})
    try:
        seconds = int(config.get("timeoutSeconds") or DEFAULT_AFFINITY_SECONDS)
    except (TypeError, ValueError):
        seconds = DEFAULT_AFFINITY_SECONDS
    return max(1, min(seconds, 86400))


def _endpoints_by_port(slices: Iterable[dict]) -> dict[tuple[str, str], dict[tuple[str, int], Endpoint]]:
    """{(port name, protocol): {(ip, port): Endpoint}} over one Service's IPv4 slices."""
    found: dict[tuple[str, str], dict[tuple[str, int], Endpoint]] = {}
    for slice_ in slices:
        if slice_.get("addressType") != "IPv4":
            continue
        for port in slice_.get("ports") or ():
            number = port.get("port")
            if not isinstance(number, int) or not 0 < number < 65536:
                continue
            key = (port.get("name") or "", port.get("protocol") or "TCP")
            bucket = found.setdefault(key, {})
            for endpoint in slice_.get("endpoints") or ():
                conditions = endpoint.get("conditions") or {}
                ready = conditions.get("ready") is not False  # unknown counts as ready (EndpointConditions)
                serving = ready if conditions.get("serving") is None else bool(conditions.get("serving"))
                terminating = bool(conditions.get("terminating"))
                for address in (endpoint.get("addresses") or ())[:1]:
                    ip = _ipv4(address)
                    if ip is not None and (ip, number) not in bucket:
                        bucket[(ip, number)] = Endpoint(ip, number, ready, serving, terminating,
                                                        str(endpoint.get("nodeName") or ""))
    return found


def _ip_key(endpoint: Endpoint) -> tuple[int, int]:
    return int(ipaddress.ip_address(endpoint.ip)), endpoint.port


def service_ports(services: Iterable[dict], slices: Iterable[dict]) -> list[ServicePort]:
    """Every proxied Service port, sorted by namespace, name and spec order.

    ExternalName Services and headless Services without node ports have no rules; a
    port's endpoints are those its Service's slices list under the same port name and
    protocol.
    """
    by_service: dict[tuple[str, str], list[dict]] = {}
    for slice_ in slices:
        meta = slice_.get("metadata") or {}
        owner = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
        if owner:
            by_service.setdefault((meta.get("namespace") or "", owner), []).append(slice_)
    out: list[ServicePort] = []
    for service in sorted(services, key=lambda s: ((s.get("metadata") or {}).get("namespace") or "",
                                                    (s.get("metadata") or {}).get("name") or "")):
        meta, spec = service.get("metadata") or {}, service.get("spec") or {}
        if spec.get("type") == "ExternalName" or meta.get("deletionTimestamp"):
            continue
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        endpoints = _endpoints_by_port(by_service.get((namespace, name), ()))
        for sp in spec.get("ports") or ():
            protocol = sp.get("protocol") or "TCP"
            port = sp.get("port")
            if protocol not in PROTOCOLS or not isinstance(port, int) or not 0 < port < 65536:
                continue
            node_port = sp.get("nodePort") if spec.get("type") in ("NodePort", "LoadBalancer") else 0
            backends = sorted(endpoints.get((sp.get("name") or "", protocol), {}).values(), key=_ip_key)
            out.append(ServicePort(
                namespace=namespace, name=name, port_name=sp.get("name") or "", protocol=protocol, port=port,
                cluster_ips=_cluster_ips(spec), node_port=node_port if isinstance(node_port, int) else 0,
                external_ips=_external_ips(service), load_balancer=spec.get("type") == "LoadBalancer",
                external_local=spec.get("externalTrafficPolicy") == "Local",
                internal_local=spec.get("internalTrafficPolicy") == "Local",
                affinity_seconds=_affinity_seconds(spec), endpoints=tuple(backends)))
    return out


def usable(endpoints: Iterable[Endpoint]) -> list[Endpoint]:
    """The endpoints new connections go to: the ready ones, else the serving terminating ones."""
    endpoints = list(endpoints)
    ready = [e for e in endpoints if e.ready and not e.terminating]
    return ready or [e for e in endpoints if e.serving and e.terminating]


__all__ = ["DEFAULT_AFFINITY_SECONDS", "Endpoint", "ServicePort", "service_ports", "usable"]
