"""ClusterIP allocation inside a store transaction, on ServiceCIDR and IPAddress objects (networking.k8s.io/v1).

Used by kctl.apiserver.services.strategy while the API server commits a Service. As in
Kubernetes 1.33, the ranges are the stored ServiceCIDRs (the default one, "kubernetes",
is made from --service-cluster-ip-range; the first Service of a store that has none
makes it with the default 10.96.0.0/16) and every allocated address is one IPAddress
object named by the address, its `spec.parentRef` naming the Service. An address is
free when no IPAddress of that name exists. Because the check and the IPAddress's
write happen in the Service's own transaction (SQLite `BEGIN IMMEDIATE`: one writer at
a time), two writers, in one process or many, never get one address, and a create that
fails rolls its IPAddress back with it.

Dynamic allocation never hands out a range's first address (the `kubernetes` Service's
in Kubernetes) and prefers the upper band of the range (Kubernetes' static subrange:
the first min(max(16, size/16), 256) addresses are left for requests such as
10.96.0.10, kube-dns's by convention).
"""

from __future__ import annotations

import ipaddress
import random
import uuid
from typing import TYPE_CHECKING, Iterator

from kctl.apiserver.services.ranges import (DEFAULT_SERVICE_CIDR, DEFAULT_SERVICE_CIDR_NAME, IP_ADDRESS_KIND,
                                            SERVICE_CIDR_KIND, static_band)

if TYPE_CHECKING:
    from kctl.store.contract import Transaction

#: IPAddress labels kube-apiserver's allocator sets
LABEL_IP_FAMILY = "ipaddress.kubernetes.io/ip-family"
LABEL_MANAGED_BY = "ipaddress.kubernetes.io/managed-by"
MANAGED_BY = "ipallocator.k8s.io"
#: the DNS Service's address by convention (the 10th of the range): handed out only when asked for
DNS_OFFSET = 10


class AllocationError(Exception):
    """An address cannot be given; the message is Kubernetes' (the caller adds the field path)."""


class NotInRange(AllocationError):
    def __init__(self, valid: str) -> None:
        super().__init__(f"provided IP is not in the valid range. The range of valid IPs is {valid}")


class Allocated(AllocationError):
    def __init__(self) -> None:
        super().__init__("provided IP is already allocated")


class Full(AllocationError):
    def __init__(self) -> None:
        super().__init__("range is full")


def service_cidr_object(name: str, cidr: str, *, now: str) -> dict:
    """A new ServiceCIDR (Ready), as kube-apiserver makes its default one."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
            "metadata": {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": now},
            "spec": {"cidrs": [cidr]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now,
                                       "reason": "", "message": "Kubernetes Service CIDR is ready"}]}}


def ip_address_object(ip: str, namespace: str, name: str, *, now: str) -> dict:
    """The IPAddress that records `ip` as the Service namespace/name's."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
            "metadata": {"name": ip, "uid": str(uuid.uuid4()), "creationTimestamp": now,
                         "labels": {LABEL_IP_FAMILY: "IPv4", LABEL_MANAGED_BY: MANAGED_BY}},
            "spec": {"parentRef": {"group": "", "resource": "services", "namespace": namespace, "name": name}}}


def _networks(cidr_obj: dict) -> list[ipaddress.IPv4Network]:
    """The IPv4 networks of a ServiceCIDR (entries that do not parse are skipped)."""
    out = []
    for text in (cidr_obj.get("spec") or {}).get("cidrs") or ():
        try:
            network = ipaddress.ip_network(str(text), strict=False)
        except ValueError:
            continue
        if network.version == 4:
            out.append(network)
    return out


class ClusterIPAllocator:
    """Allocates and releases Service addresses in one transaction (made per commit; holds no state)."""

    def __init__(self, txn: Transaction, *, now: str, rng: random.Random | None = None) -> None:
        self.txn = txn
        self.now = now
        self.rng = rng or random.SystemRandom()
        self._ranges: list[ipaddress.IPv4Network] | None = None

    def ranges(self) -> list[ipaddress.IPv4Network]:
        """The usable Service ranges: the default ServiceCIDR's first, then the others by name.

        A store without any ServiceCIDR gets the default one now (in this transaction).
        ServiceCIDRs being deleted take no new addresses.
        """
        if self._ranges is None:
            cidrs = self.txn.list(SERVICE_CIDR_KIND)
            if not cidrs:
                made = service_cidr_object(DEFAULT_SERVICE_CIDR_NAME, DEFAULT_SERVICE_CIDR, now=self.now)
                self.txn.put(SERVICE_CIDR_KIND, "", DEFAULT_SERVICE_CIDR_NAME, made, event="ADDED")
                cidrs = [made]
            live = [c for c in cidrs if not (c.get("metadata") or {}).get("deletionTimestamp")]
            live.sort(key=lambda c: (c["metadata"]["name"] != DEFAULT_SERVICE_CIDR_NAME, c["metadata"]["name"]))
            self._ranges = [n for c in live for n in _networks(c)]
        return self._ranges

    def describe(self) -> str:
        """The valid ranges as a message names them (`10.96.0.0/16`)."""
        return ", ".join(str(n) for n in self.ranges()) or "empty (no ServiceCIDR)"

    def allocate(self, ip: str, namespace: str, name: str) -> str:
        """Give the requested `ip` to the Service; NotInRange or Allocated when it cannot be."""
        address = ipaddress.ip_address(ip)
        if not any(_usable(n, address) for n in self.ranges()):
            raise NotInRange(self.describe())
        if self.txn.get(IP_ADDRESS_KIND, "", str(address)) is not None:
            raise Allocated()
        self._record(str(address), namespace, name)
        return str(address)

    def allocate_next(self, namespace: str, name: str) -> str:
        """A free address for the Service (random, upper band first); Full when there is none."""
        for network in self.ranges():
            for address in self._candidates(network):
                if self.txn.get(IP_ADDRESS_KIND, "", str(address)) is None:
                    self._record(str(address), namespace, name)
                    return str(address)
        raise Full()

    def release(self, ip: str, namespace: str, name: str) -> None:
        """Free `ip` if its IPAddress is this Service's (another's is left alone)."""
        try:
            key = str(ipaddress.ip_address(ip))
        except ValueError:
            return
        held = self.txn.get(IP_ADDRESS_KIND, "", key)
        if held is None:
            return
        ref = (held.get("spec") or {}).get("parentRef") or {}
        if ref.get("resource") == "services" and ref.get("namespace") == namespace and ref.get("name") == name:
            self.txn.delete(IP_ADDRESS_KIND, "", key, held)

    def _record(self, ip: str, namespace: str, name: str) -> None:
        self.txn.put(IP_ADDRESS_KIND, "", ip, ip_address_object(ip, namespace, name, now=self.now), event="ADDED")

    def _candidates(self, network: ipaddress.IPv4Network) -> Iterator[ipaddress.IPv4Address]:
        """Every address dynamic allocation may take: the upper band from a random start, then the lower band."""
        base = int(network.network_address)
        size = network.num_addresses - 2  # offsets 1..size: not the network nor the broadcast address
        if size < 1:
            return
        band = static_band(size, low=16, high=256, step=16)
        for start, stop in ((band + 1, size), (2, min(band, size))):
            count = stop - start + 1
            if count <= 0:
                continue
            first = self.rng.randrange(count)
            for i in range(count):
                offset = start + (first + i) % count
                if offset in (1, DNS_OFFSET):  # the kubernetes Service's, kube-dns's: only on request
                    continue
                yield ipaddress.IPv4Address(base + offset)


def _usable(network: ipaddress.IPv4Network, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """In the network and neither its network nor its broadcast address."""
    return address.version == 4 and address in network \
        and address not in (network.network_address, network.broadcast_address)


__all__ = ["Allocated", "AllocationError", "ClusterIPAllocator", "DNS_OFFSET", "Full", "LABEL_IP_FAMILY",
           "LABEL_MANAGED_BY", "MANAGED_BY", "NotInRange", "ip_address_object", "service_cidr_object"]
