"""NodePort allocation inside a store transaction, on one stored bitmap (Kubernetes' RangeAllocation).

Used by kctl.apiserver.services.strategy while the API server commits a Service, and by
kctl.apiserver.services.config when a daemon starts with --service-node-port-range. As
kube-apiserver keeps its node-port bitmap in etcd (a `RangeAllocation` written with
compare-and-swap), kctl keeps one object in the store: kind `RangeAllocation`, name
`servicenodeports`, with `range` ("30000-32767") and `data` (the bitmap, base64, bit i =
port base+i). It is an internal object as in Kubernetes, not a served kind. It is read
and written in the Service's own transaction (SQLite `BEGIN IMMEDIATE`: one writer at a
time), so two writers never get one port and a failed create frees its ports with its
rollback. A store without the object gets it on first use, its bitmap rebuilt from the
stored Services (Kubernetes' repair loop does the same at start).

Dynamic allocation is random and prefers the upper band (the first min(max(16,
size/32), 128) ports are left for requests, Kubernetes' static subrange).
"""

from __future__ import annotations

import base64
import random
import uuid
from typing import TYPE_CHECKING

from kctl.apiserver.services.ranges import DEFAULT_NODE_PORT_RANGE, PortRange, parse_port_range, static_band

if TYPE_CHECKING:
    from kctl.store.contract import Transaction

#: the store's key of the bitmap: kind, namespace, name
RANGE_KIND = "RangeAllocation"
RANGE_NAME = "servicenodeports"


class PortAllocationError(Exception):
    """A port cannot be given; the message is Kubernetes' (the caller adds the field path)."""


class PortNotInRange(PortAllocationError):
    def __init__(self, valid: PortRange) -> None:
        super().__init__(f"provided port is not in the valid range. The range of valid ports is {valid}")


class PortAllocated(PortAllocationError):
    def __init__(self) -> None:
        super().__init__("provided port is already allocated")


class PortsFull(PortAllocationError):
    def __init__(self) -> None:
        super().__init__("range is full")


def service_node_ports(svc: dict) -> set[int]:
    """Every node port a stored Service holds: its ports' nodePorts and its healthCheckNodePort."""
    spec = svc.get("spec") if isinstance(svc.get("spec"), dict) else {}
    ports = {p.get("nodePort") for p in spec.get("ports") or () if isinstance(p, dict)}
    ports.add(spec.get("healthCheckNodePort"))
    return {p for p in ports if isinstance(p, int) and not isinstance(p, bool) and p > 0}


def bitmap_of(services: list[dict], valid: PortRange) -> int:
    """The bitmap of the ports these Services hold within `valid`."""
    bits = 0
    for svc in services:
        for port in service_node_ports(svc):
            if port in valid:
                bits |= 1 << (port - valid.base)
    return bits


def range_object(valid: PortRange, bits: int, *, now: str) -> dict:
    """The stored RangeAllocation for `valid` with `bits` set."""
    data = bits.to_bytes((valid.size + 7) // 8, "little")
    return {"apiVersion": "v1", "kind": "RangeAllocation",
            "metadata": {"name": RANGE_NAME, "uid": str(uuid.uuid4()), "creationTimestamp": now},
            "range": str(valid), "data": base64.b64encode(data).decode()}


class NodePortAllocator:
    """Allocates and releases node ports in one transaction; `save()` writes the bitmap if it changed."""

    def __init__(self, txn: Transaction, *, now: str, rng: random.Random | None = None) -> None:
        self.txn = txn
        self.now = now
        self.rng = rng or random.SystemRandom()
        stored = txn.get(RANGE_KIND, "", RANGE_NAME)
        self._stored = stored
        try:
            self.range = parse_port_range(str(stored.get("range") or DEFAULT_NODE_PORT_RANGE))
            raw = base64.b64decode(str(stored.get("data") or ""), validate=True)
            self.bits = int.from_bytes(raw, "little") & ((1 << self.range.size) - 1)
            self._dirty = False
        except (AttributeError, ValueError):  # none stored yet (or unreadable): rebuilt from the Services
            self.range = parse_port_range(DEFAULT_NODE_PORT_RANGE)
            self.bits = bitmap_of(txn.list("Service"), self.range)
            self._dirty = True

    def allocate(self, port: int) -> None:
        """Take the requested port; PortNotInRange or PortAllocated when it cannot be."""
        if port not in self.range:
            raise PortNotInRange(self.range)
        bit = 1 << (port - self.range.base)
        if self.bits & bit:
            raise PortAllocated()
        self.bits |= bit
        self._dirty = True

    def allocate_next(self) -> int:
        """A free port (random, upper band first); PortsFull when there is none."""
        size = self.range.size
        band = static_band(size, low=16, high=128, step=32)
        for start, count in ((band, size - band), (0, band)):
            if count <= 0:
                continue
            first = self.rng.randrange(count)
            for i in range(count):
                offset = start + (first + i) % count
                if not self.bits >> offset & 1:
                    self.bits |= 1 << offset
                    self._dirty = True
                    return self.range.base + offset
        raise PortsFull()

    def release(self, port: int) -> None:
        """Free a port (one outside the range is ignored, as Kubernetes does)."""
        if port in self.range:
            self.bits &= ~(1 << (port - self.range.base))
            self._dirty = True

    def save(self) -> None:
        """Write the bitmap back in this transaction when it changed."""
        if not self._dirty:
            return
        obj = range_object(self.range, self.bits, now=self.now)
        if self._stored is not None:
            obj["metadata"].update(uid=self._stored["metadata"].get("uid"),
                                   creationTimestamp=self._stored["metadata"].get("creationTimestamp"))
        self.txn.put(RANGE_KIND, "", RANGE_NAME, obj, event="ADDED" if self._stored is None else "MODIFIED")
        self._stored, self._dirty = obj, False


__all__ = ["NodePortAllocator", "PortAllocated", "PortAllocationError", "PortNotInRange", "PortsFull", "RANGE_KIND",
           "RANGE_NAME", "bitmap_of", "range_object", "service_node_ports"]
