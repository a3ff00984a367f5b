"""The cluster zone's answers: one DNS question -> records, from Services and EndpointSlices.

Follows Kubernetes' DNS-based service discovery specification (kubernetes/dns,
docs/specification.md, version 1.1.0), as CoreDNS's kubernetes plugin serves it:

- `<svc>.<ns>.svc.<zone>`: A -> the ClusterIP; for a headless Service (clusterIP None),
  A -> the address of every ready endpoint; for an ExternalName Service, CNAME -> its
  externalName.
- `<hostname>.<svc>.<ns>.svc.<zone>`: A -> the ready endpoint with that hostname (a pod
  with `hostname` and `subdomain: <svc>`), headless Services only.
- `_<port>._<proto>.<svc>.<ns>.svc.<zone>`: SRV per named port -> `<svc>.<ns>.svc.<zone>`
  (ClusterIP), or one per ready endpoint -> `<hostname>.<svc>.<ns>.svc.<zone>` (headless;
  an endpoint without a hostname is named by its address with dashes, as CoreDNS does).
- `<a-b-c-d>.<ns>.pod.<zone>`: A -> a.b.c.d (CoreDNS's `pods insecure`, kubeadm's default).
- `dns-version.<zone>`: TXT "1.1.0".

A name of the zone that exists without records of the asked type answers NOERROR with no
records (so an AAAA lookup of a Service does not fail the A lookup beside it); anything
else of the zone is NXDOMAIN. PTR records are not served. Called by kctl.dns.server for
each question; `ClusterView` is what it reads (informer caches in the daemon, dicts in tests).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Protocol

SPEC_VERSION = "1.1.0"
#: seconds a cluster answer may be cached (CoreDNS's kubernetes plugin default)
TTL = 5


class ClusterView(Protocol):
    """The objects answers are made from."""

    def service(self, namespace: str, name: str) -> dict | None:
        """The Service namespace/name, or None."""

    def endpoint_slices(self, namespace: str, service: str) -> list[dict]:
        """The EndpointSlices labelled kubernetes.io/service-name=service in namespace."""


@dataclass(frozen=True)
class Record:
    """One resource record: name (absolute, with the final dot), type, TTL and data.

    data: an address (A, AAAA), a name (CNAME), text (TXT) or (priority, weight, port,
    target) for SRV.
    """

    name: str
    rtype: str
    data: object
    ttl: int = TTL


@dataclass
class Answer:
    """What the zone says about one question: NOERROR (possibly with no records) or NXDOMAIN."""

    rcode: str = "NOERROR"
    records: list[Record] = field(default_factory=list)


def in_zone(qname: str, zone: str) -> bool:
    """Whether qname is the zone or below it (case-insensitive, final dot optional)."""
    name, zone = _norm(qname), _norm(zone)
    return name == zone or name.endswith("." + zone)


def answer(qname: str, qtype: str, view: ClusterView, *, zone: str = "cluster.local") -> Answer:
    """The records for one question about a name in the zone (in_zone(qname, zone) must hold)."""
    name, zone = _norm(qname), _norm(zone)
    labels = name[: -len(zone)].rstrip(".").split(".") if name != zone else []
    absolute = name + "."
    if labels == []:
        return Answer()
    if labels == ["dns-version"]:
        return _only(qtype, [Record(absolute, "TXT", SPEC_VERSION)])
    if len(labels) == 3 and labels[2] == "pod":
        return _pod(absolute, labels[0], qtype)
    if labels[-1] != "svc":
        return Answer("NXDOMAIN")
    if len(labels) == 2:  # <ns>.svc: an empty non-terminal
        return Answer()
    if len(labels) == 3:
        return _service(absolute, labels[1], labels[0], qtype, view, zone)
    if len(labels) == 4:
        return _endpoint(absolute, labels[2], labels[1], labels[0], qtype, view)
    if len(labels) == 5 and labels[0].startswith("_") and labels[1].startswith("_"):
        return _srv(absolute, labels[3], labels[2], labels[0][1:], labels[1][1:], qtype, view, zone)
    return Answer("NXDOMAIN")


def _service(absolute: str, namespace: str, name: str, qtype: str, view: ClusterView, zone: str) -> Answer:
    svc = view.service(namespace, name)
    if svc is None:
        return Answer("NXDOMAIN")
    spec = svc.get("spec") or {}
    if spec.get("type") == "ExternalName":
        target = str(spec.get("externalName") or "").rstrip(".") + "."
        return Answer(records=[Record(absolute, "CNAME", target)]) if target != "." else Answer()
    if _headless(spec):
        return _only(qtype, [_address_record(absolute, ip) for ip, _ in _ready(view, namespace, name)])
    return _only(qtype, [_address_record(absolute, ip) for ip in _cluster_ips(spec)])


def _endpoint(absolute: str, namespace: str, service: str, hostname: str, qtype: str,
              view: ClusterView) -> Answer:
    svc = view.service(namespace, service)
    if svc is None or not _headless(svc.get("spec") or {}):
        return Answer("NXDOMAIN")
    found = [ip for ip, host in _ready(view, namespace, service) if host == hostname]
    if not found:
        return Answer("NXDOMAIN")
    return _only(qtype, [_address_record(absolute, ip) for ip in found])


def _srv(absolute: str, namespace: str, service: str, port_name: str, proto: str, qtype: str,
         view: ClusterView, zone: str) -> Answer:
    svc = view.service(namespace, service)
    if svc is None:
        return Answer("NXDOMAIN")
    spec = svc.get("spec") or {}
    base = f"{service}.{namespace}.svc.{zone}."
    records: list[Record] = []
    if _headless(spec):
        for slice_ in view.endpoint_slices(namespace, service):
            port = _named_port(slice_.get("ports") or [], port_name, proto)
            if port is None:
                continue
            for ip, host in _ready_in(slice_):
                target = f"{host or _dashed(ip)}.{base}"
                records.append(Record(absolute, "SRV", (0, 100, port, target)))
    else:
        port = _named_port(spec.get("ports") or [], port_name, proto, key="port")
        if port is not None:
            records.append(Record(absolute, "SRV", (0, 100, port, base)))
    if not records:
        return Answer("NXDOMAIN")
    return _only(qtype, records)


def _pod(absolute: str, dashed: str, qtype: str) -> Answer:
    try:
        ip = ipaddress.ip_address(dashed.replace("-", ".") if dashed.count("-") == 3 else dashed.replace("-", ":"))
    except ValueError:
        return Answer("NXDOMAIN")
    return _only(qtype, [_address_record(absolute, str(ip))])


def _only(qtype: str, records: list[Record]) -> Answer:
    """The records of the asked type (ANY: all); the name exists either way."""
    if qtype in ("ANY", "*"):
        return Answer(records=records)
    return Answer(records=[r for r in records if r.rtype == qtype])


def _address_record(name: str, ip: str) -> Record:
    return Record(name, "AAAA" if ":" in ip else "A", ip)


def _headless(spec: dict) -> bool:
    return spec.get("clusterIP") == "None"


def _cluster_ips(spec: dict) -> list[str]:
    ips = [ip for ip in spec.get("clusterIPs") or [] if ip and ip != "None"]
    if not ips and spec.get("clusterIP") not in (None, "", "None"):
        ips = [spec["clusterIP"]]
    return ips


def _ready(view: ClusterView, namespace: str, service: str) -> list[tuple[str, str | None]]:
    """(address, hostname) of every ready endpoint of the Service, in slice order, no repeats."""
    seen: dict[str, str | None] = {}
    for slice_ in view.endpoint_slices(namespace, service):
        for ip, host in _ready_in(slice_):
            seen.setdefault(ip, host)
    return list(seen.items())


def _ready_in(slice_: dict) -> list[tuple[str, str | None]]:
    out = []
    for endpoint in slice_.get("endpoints") or []:
        ready = (endpoint.get("conditions") or {}).get("ready")
        if ready is False:  # the API's nil means ready
            continue
        for ip in endpoint.get("addresses") or []:
            out.append((ip, endpoint.get("hostname")))
    return out


def _named_port(ports: list[dict], name: str, proto: str, *, key: str = "port") -> int | None:
    for port in ports:
        if (port.get("name") or "") == name and str(port.get("protocol") or "TCP").lower() == proto:
            value = port.get(key)
            return value if isinstance(value, int) else None
    return None


def _dashed(ip: str) -> str:
    return ip.replace(".", "-").replace(":", "-")


def _norm(name: str) -> str:
    return name.rstrip(".").lower()
