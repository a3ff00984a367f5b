"""The Service ranges a daemon starts with, written to the store (kube-apiserver's start-up and repair).

`kctl daemon` (kctl.cli.daemon) calls `configure(api, service_cidr=..., node_port_range=...)`
once, before it runs anything, with its --service-cluster-ip-range and
--service-node-port-range. Every API server (the daemon's and each CLI command's, which
run in-process) allocates from what the store holds, so the flags only matter through
what this writes:

- the default ServiceCIDR `kubernetes` gets the flag's CIDR: made when missing, changed
  when no Service holds an address of the old range, else kept with a warning (as
  kube-apiserver keeps an existing default ServiceCIDR);
- the node-port bitmap (kctl.apiserver.services.nodeport) gets the flag's range and is
  rebuilt from the stored Services, as kube-apiserver's node-port repair loop does at
  start; a Service whose node port is outside the range is named in a warning;
- IPAddresses are repaired as kube-apiserver's repair loop does (one a Service holds
  but that was deleted by hand is made again, one of ours whose Service no longer holds
  the address is deleted), and Services stored before kctl allocated addresses get theirs.

Only a local store can be configured: with --server (node mode) there is nothing to do. The
transaction is the store's `transact`: several daemons starting at once on one etcd store run it
again until each sees the others' writes.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from typing import TYPE_CHECKING

from kctl.apiserver.services.clusterip import LABEL_MANAGED_BY, MANAGED_BY, ip_address_object, service_cidr_object
from kctl.apiserver.services.nodeport import RANGE_KIND, RANGE_NAME, bitmap_of, range_object, service_node_ports
from kctl.apiserver.services.strategy import fill_missing
from kctl.machinery.errors import APIError
from kctl.apiserver.services.ranges import (DEFAULT_SERVICE_CIDR_NAME, IP_ADDRESS_KIND, SERVICE_CIDR_KIND,
                                            parse_port_range, parse_service_cidr)

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.store.contract import Transaction


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def configure(api: API, *, service_cidr: str, node_port_range: str) -> list[str]:
    """Write the two ranges to a local store in one transaction; the warnings to log (ValueError: a bad flag)."""
    network = parse_service_cidr(service_cidr)
    ports = parse_port_range(node_port_range)
    from kctl.apiserver.server import APIServer

    if not isinstance(api, APIServer):
        return []
    now = _now()
    store = api.store

    def write(txn: Transaction) -> tuple[list[str], list[dict]]:
        """The ranges, the repair and the missing addresses in one transaction; (warnings, the Services)."""
        warnings: list[str] = []
        current = txn.get(SERVICE_CIDR_KIND, "", DEFAULT_SERVICE_CIDR_NAME)
        if current is None:
            txn.put(SERVICE_CIDR_KIND, "", DEFAULT_SERVICE_CIDR_NAME,
                    service_cidr_object(DEFAULT_SERVICE_CIDR_NAME, str(network), now=now), event="ADDED")
        elif (current.get("spec") or {}).get("cidrs") != [str(network)]:
            old = [str(c) for c in (current.get("spec") or {}).get("cidrs") or ()]
            used = [ip["metadata"]["name"] for ip in txn.list(IP_ADDRESS_KIND)
                    if _within(ip["metadata"]["name"], old) and not _within(ip["metadata"]["name"], [str(network)])]
            if used:
                warnings.append(
                    f'the default ServiceCIDR "{DEFAULT_SERVICE_CIDR_NAME}" keeps {", ".join(old)}, not '
                    f"--service-cluster-ip-range {network}: {len(used)} Service address(es) are in use there "
                    f"(e.g. {used[0]}); add a ServiceCIDR for the new range, or delete those Services first")
            else:
                current["spec"] = {**(current.get("spec") or {}), "cidrs": [str(network)]}
                txn.put(SERVICE_CIDR_KIND, "", DEFAULT_SERVICE_CIDR_NAME, current, event="MODIFIED")
        services = txn.list("Service")
        stored = txn.get(RANGE_KIND, "", RANGE_NAME)
        fresh = range_object(ports, bitmap_of(services, ports), now=now)
        if stored is not None:
            fresh["metadata"].update(uid=stored["metadata"].get("uid"),
                                     creationTimestamp=stored["metadata"].get("creationTimestamp"))
        if stored is None or (stored.get("range"), stored.get("data")) != (fresh["range"], fresh["data"]):
            txn.put(RANGE_KIND, "", RANGE_NAME, fresh, event="ADDED" if stored is None else "MODIFIED")
        warnings.extend(_repair_ip_addresses(txn, services, now=now))
        for svc in services:  # Services stored before kctl allocated addresses get theirs now
            meta = svc["metadata"]
            try:
                with store.transaction():
                    filled = fill_missing(txn, svc, now=now)
                    if filled is not None:
                        txn.put("Service", meta.get("namespace") or "", meta["name"], filled, event="MODIFIED")
            except APIError as exc:
                warnings.append(f"Service {meta.get('namespace')}/{meta['name']}: cannot allocate its addresses: "
                                f"{exc.message}")
        return warnings, services

    warnings, services = store.transact(write)
    for svc in services:
        outside = sorted(p for p in service_node_ports(svc) if p not in ports)
        if outside:
            meta = svc["metadata"]
            warnings.append(f'the node port(s) {", ".join(map(str, outside))} of Service {meta.get("namespace")}/'
                            f'{meta["name"]} are outside --service-node-port-range {ports}: recreate the Service')
    return warnings


def _repair_ip_addresses(txn: Transaction, services: list[dict], *, now: str) -> list[str]:
    """kube-apiserver's IPAddress repair: every Service address has its IPAddress, no IPAddress of ours is orphaned.

    An IPAddress deleted by hand while its Service holds the address is made again; one
    that names a Service which no longer holds its address is deleted; two Services
    holding one address are named in a warning (the first keeps the IPAddress).
    """
    warnings: list[str] = []
    holders: dict[str, tuple[str, str]] = {}
    for svc in services:
        meta, spec = svc["metadata"], svc.get("spec") or {}
        if spec.get("type") == "ExternalName":
            continue
        for ip in spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else []):
            if ip in (None, "", "None"):
                continue
            ref = (str(meta.get("namespace") or ""), str(meta["name"]))
            if ip in holders and holders[ip] != ref:
                warnings.append(f"the ClusterIP {ip} is held by both Service {'/'.join(holders[ip])} and "
                                f"{'/'.join(ref)}: recreate one of them")
                continue
            holders.setdefault(ip, ref)
    for obj in txn.list(IP_ADDRESS_KIND):
        meta = obj["metadata"]
        if (meta.get("labels") or {}).get(LABEL_MANAGED_BY) != MANAGED_BY:
            continue  # someone else's
        parent = (obj.get("spec") or {}).get("parentRef") or {}
        if holders.get(meta["name"]) != (parent.get("namespace"), parent.get("name")):
            txn.delete(IP_ADDRESS_KIND, "", meta["name"], obj)
    for ip, (namespace, name) in holders.items():
        if txn.get(IP_ADDRESS_KIND, "", ip) is None:
            txn.put(IP_ADDRESS_KIND, "", ip, ip_address_object(ip, namespace, name, now=now), event="ADDED")
    return warnings


def _within(ip: str, cidrs: list[str]) -> bool:
    try:
        address = ipaddress.ip_address(ip)
        return any(address in ipaddress.ip_network(c, strict=False) for c in cidrs)
    except ValueError:
        return False


__all__ = ["configure"]
