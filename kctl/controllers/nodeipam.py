"""Node IPAM: every Node gets a pod CIDR (`spec.podCIDR`, `spec.podCIDRs`) cut from the cluster CIDR.

Run by the controller manager in `kctl daemon` (name "node-ipam-controller", settings
--cluster-cidr and --node-cidr-mask-size); written after kube-controller-manager's
nodeipam range allocator (pkg/controller/nodeipam/ipam/range_allocator.go and its
cidrset). Queue keys are Node names.

- The set of subnets in use is kept in memory, as Kubernetes' cidrset: a Node seen
  with a podCIDR marks it used (so a Node that registers again with its podCIDR keeps
  it), a deleted Node's subnet is freed and the Nodes still waiting are looked at again.
- A Node without a podCIDR gets the next free subnet (the search goes on from where the
  last one ended, as cidrset's nextCandidate). The Node is read from the API first, and
  the patch pins its resourceVersion, so a Node that got a podCIDR meanwhile keeps its own.
- When no subnet is left the Node gets the Event Kubernetes records, reason
  `CIDRNotAvailable` ("Node NAME status is now: CIDRNotAvailable"), and is looked at again
  when a subnet is freed (and every RETRY_SECONDS).

A podCIDR is stable for the Node's life: nothing here ever changes one that is set.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from typing import TYPE_CHECKING

from kctl.apiserver.services.ranges import DEFAULT_CLUSTER_CIDR, DEFAULT_NODE_CIDR_MASK_SIZE, check_cluster_cidr
from kctl.controllers.base import Recorder, key_of
from kctl.machinery.errors import Conflict, NotFound

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.nodeipam")

#: the Event's reason and source when the cluster CIDR is exhausted (Kubernetes' words)
REASON_CIDR_NOT_AVAILABLE = "CIDRNotAvailable"
EVENT_COMPONENT = "cidrAllocator"
#: how often a Node still without a podCIDR is looked at again
RETRY_SECONDS = 60.0


class CIDRSet:
    """The node subnets of one cluster CIDR and which are in use (thread-safe).

    Index i is the subnet `cluster + i * 2^(32-mask)`; `occupy` marks every subnet a CIDR
    overlaps, `allocate_next` takes a free one, `release` frees those a CIDR overlaps.
    """

    def __init__(self, cluster_cidr: str, mask_size: int) -> None:
        self.cluster = check_cluster_cidr(cluster_cidr, mask_size)
        self.mask_size = mask_size
        self.count = 2 ** (mask_size - self.cluster.prefixlen)
        self._step = 2 ** (32 - mask_size)
        self._used: set[int] = set()
        self._next = 0
        self._lock = threading.Lock()

    def subnet(self, index: int) -> str:
        base = int(self.cluster.network_address) + index * self._step
        return f"{ipaddress.IPv4Address(base)}/{self.mask_size}"

    def _indices(self, cidr: str) -> range | None:
        """The subnet indices a CIDR covers; None when it is not inside the cluster CIDR."""
        try:
            network = ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            return None
        if network.version != 4 or not network.subnet_of(self.cluster):
            return None
        first = (int(network.network_address) - int(self.cluster.network_address)) // self._step
        last = (int(network.broadcast_address) - int(self.cluster.network_address)) // self._step
        return range(first, last + 1)

    def occupy(self, cidr: str) -> bool:
        """Mark a CIDR used; False when it is not inside the cluster CIDR."""
        indices = self._indices(cidr)
        if indices is None:
            return False
        with self._lock:
            self._used.update(indices)
        return True

    def allocate_next(self) -> str | None:
        """A free subnet, marked used; None when the cluster CIDR is exhausted."""
        with self._lock:
            for i in range(self.count):
                index = (self._next + i) % self.count
                if index not in self._used:
                    self._used.add(index)
                    self._next = (index + 1) % self.count
                    return self.subnet(index)
        return None

    def release(self, cidr: str) -> None:
        indices = self._indices(cidr)
        if indices is not None:
            with self._lock:
                self._used.difference_update(indices)

    def in_use(self) -> int:
        with self._lock:
            return len(self._used)


def pod_cidrs(node: dict) -> list[str]:
    """A Node's podCIDRs (podCIDR alone when only it is set)."""
    spec = node.get("spec") if isinstance(node.get("spec"), dict) else {}
    cidrs = spec.get("podCIDRs")
    if isinstance(cidrs, list) and cidrs:
        return [str(c) for c in cidrs]
    return [str(spec["podCIDR"])] if spec.get("podCIDR") else []


class NodeIPAMController:
    """Gives every Node a podCIDR from the cluster CIDR and frees it when the Node goes."""

    name = "node-ipam-controller"

    def __init__(self, *, cluster_cidr: str = DEFAULT_CLUSTER_CIDR,
                 node_cidr_mask_size: int = DEFAULT_NODE_CIDR_MASK_SIZE) -> None:
        self.cidrs = CIDRSet(cluster_cidr, node_cidr_mask_size)

    def register(self, ctx: ControllerContext, queue: WorkQueue[str]) -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.recorder = Recorder(ctx.api, component=EVENT_COMPONENT)
        self.nodes = ctx.informers.informer("nodes")
        self.nodes.add_handler(self._on_node, lambda old, new: self._on_node(new), self._on_node_delete)
        self._node_rt = self.api.resource("nodes")
        #: node name -> the podCIDRs it was seen with (what its deletion frees)
        self._seen: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def _on_node(self, node: dict) -> None:
        name = node["metadata"]["name"]
        cidrs = pod_cidrs(node)
        if cidrs:
            self._occupy(name, cidrs)
        else:
            self.queue.add(key_of(node))

    def _on_node_delete(self, node: dict) -> None:
        name = node["metadata"]["name"]
        with self._lock:
            cidrs = self._seen.pop(name, None) or pod_cidrs(node)
        for cidr in cidrs:
            self.cidrs.release(cidr)
        for other in self.nodes.list():  # a freed subnet may be what a waiting Node needs
            if not pod_cidrs(other):
                self.queue.add(key_of(other))

    def _occupy(self, name: str, cidrs: list[str]) -> None:
        with self._lock:
            before = self._seen.get(name) or []
            if before == cidrs:
                return
            self._seen[name] = cidrs
        for cidr in set(before) - set(cidrs):  # changed by hand: the old subnet is free again
            self.cidrs.release(cidr)
        for cidr in cidrs:
            if not self.cidrs.occupy(cidr):
                log.warning("node %s: podCIDR %s is not inside the cluster CIDR %s", name, cidr, self.cidrs.cluster)

    def reconcile(self, key: str) -> float | None:
        node = self.nodes.get("", key)
        if node is None or node["metadata"].get("deletionTimestamp"):
            return None
        if pod_cidrs(node):
            self._occupy(key, pod_cidrs(node))
            return None
        try:
            live = self.api.get(self._node_rt, key)
        except NotFound:
            return None
        if pod_cidrs(live):  # the cache is behind: it has one already
            self._occupy(key, pod_cidrs(live))
            return None
        cidr = self.cidrs.allocate_next()
        if cidr is None:
            self.recorder.event(live, "Normal", REASON_CIDR_NOT_AVAILABLE,
                                f"Node {key} status is now: {REASON_CIDR_NOT_AVAILABLE}")
            log.warning("node %s: no pod CIDR left in %s (/%d subnets)", key, self.cidrs.cluster, self.cidrs.mask_size)
            return RETRY_SECONDS
        patch = {"metadata": {"resourceVersion": live["metadata"]["resourceVersion"]},
                 "spec": {"podCIDR": cidr, "podCIDRs": [cidr]}}
        try:
            self.api.patch(self._node_rt, key, patch, patch_type="merge")
        except NotFound:
            self.cidrs.release(cidr)
            return None
        except Conflict:
            self.cidrs.release(cidr)
            raise  # looked at again (with back-off) against the newer Node
        except Exception:
            self.cidrs.release(cidr)
            raise
        self._occupy(key, [cidr])
        log.info("node %s: podCIDR %s", key, cidr)
        return None


__all__ = ["CIDRSet", "EVENT_COMPONENT", "NodeIPAMController", "REASON_CIDR_NOT_AVAILABLE", "RETRY_SECONDS",
           "pod_cidrs"]
