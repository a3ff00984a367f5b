"""The ServiceLB controller: a `type: LoadBalancer` Service's status lists the hosts' addresses.

Run by the controller manager in `kctl daemon` (kctl.daemon.controllers registers it as
"servicelb"). k3s's ServiceLB (klipper-lb) model, simplified: k3s runs a `svclb` pod per
Service on every node to answer the Service's port on the node's addresses; kctl needs no
such pods, because its kube-proxy (kctl.agent.proxy) already answers a LoadBalancer
Service's own port on every host's addresses. What remains is the status, which this
controller writes, as k3s does:

- for every `type: LoadBalancer` Service without `spec.loadBalancerClass` (a class names
  another implementation, which k3s leaves alone too), `status.loadBalancer.ingress` is
  the InternalIP of every Ready, schedulable Node, sorted, each `{"ip": ..., "ipMode":
  "VIP"}`; no such Node: no ingress (`kctl get svc` prints `<pending>`);
- it follows Nodes: a Node added, removed, turning Ready / NotReady, cordoned or
  uncordoned, or changing its InternalIP re-queues every LoadBalancer Service;
- a Service that stops being a LoadBalancer (or gets a loadBalancerClass) has the
  ingress it wrote cleared.

Queue keys are Service keys; the status goes through kctl.client.statuswriter (written only
when it changed). A Normal Event `UpdatedIngressIP` (k3s's reason) records each change.
Deviation from k3s: ExternalIPs of Nodes are not preferred over InternalIPs, and there is
no per-node pool selection (`svccontroller.k3s.cattle.io/enablelb` labels).
"""

from __future__ import annotations

import ipaddress
import logging
from typing import TYPE_CHECKING

from kctl.client.statuswriter import StatusWriter
from kctl.controllers.base import Recorder, key_of, split_key

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.servicelb")

COMPONENT = "service-lb-controller"
UPDATED_REASON = "UpdatedIngressIP"


# -- pure ---------------------------------------------------------------------------------

def _node_ready(node: dict) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def node_ingress_ip(node: dict) -> str | None:
    """The address a Ready, schedulable Node offers LoadBalancer Services (its InternalIP), else None."""
    if (node.get("metadata") or {}).get("deletionTimestamp") or (node.get("spec") or {}).get("unschedulable"):
        return None
    if not _node_ready(node):
        return None
    for address in (node.get("status") or {}).get("addresses") or ():
        if isinstance(address, dict) and address.get("type") == "InternalIP":
            try:
                return str(ipaddress.ip_address(str(address.get("address"))))
            except ValueError:
                continue
    return None


def ingress_for(nodes: list[dict]) -> list[dict]:
    """The status.loadBalancer.ingress the Nodes give: their InternalIPs, sorted, ipMode VIP."""
    ips = {ip for ip in (node_ingress_ip(n) for n in nodes) if ip}
    ordered = sorted(ips, key=lambda a: (ipaddress.ip_address(a).version, int(ipaddress.ip_address(a))))
    return [{"ip": ip, "ipMode": "VIP"} for ip in ordered]


def handled(service: dict) -> bool:
    """Whether this controller owns the Service's load-balancer status."""
    spec = service.get("spec") or {}
    return spec.get("type") == "LoadBalancer" and not spec.get("loadBalancerClass")


def desired_status(service: dict, nodes: list[dict]) -> dict | None:
    """The Service's whole status as it should be; None when this controller has nothing to say."""
    status = dict(service.get("status") or {})
    current = (status.get("loadBalancer") or {}).get("ingress") or []
    if handled(service) and not (service.get("metadata") or {}).get("deletionTimestamp"):
        ingress = ingress_for(nodes)
    elif current and not (service.get("spec") or {}).get("loadBalancerClass"):
        ingress = []  # no longer a LoadBalancer: clear what was written for it
    else:
        return None
    if ingress:
        status["loadBalancer"] = {**(status.get("loadBalancer") or {}), "ingress": ingress}
    else:
        balancer = {k: v for k, v in (status.get("loadBalancer") or {}).items() if k != "ingress"}
        if balancer or "loadBalancer" in status:
            status["loadBalancer"] = balancer
    return status


# -- the controller -------------------------------------------------------------------------

class ServiceLBController:
    """Keeps every LoadBalancer Service's ingress equal to the Ready, schedulable Nodes' addresses."""

    name = "servicelb"

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.services = ctx.informers.informer("services")
        self.nodes = ctx.informers.informer("nodes")
        self.status_writer = StatusWriter(self.api)
        self.recorder = Recorder(self.api, component=COMPONENT)
        self.services.add_handler(self._enqueue, self._on_service_update, None)
        self.nodes.add_handler(lambda node: self._nodes_changed(), self._on_node_update,
                               lambda node: self._nodes_changed())

    def _enqueue(self, service: dict) -> None:
        self.queue.add(key_of(service))

    def _on_service_update(self, old: dict, new: dict) -> None:
        if old.get("spec") != new.get("spec") or old.get("status") != new.get("status") or old is new:
            self._enqueue(new)

    def _on_node_update(self, old: dict, new: dict) -> None:
        if node_ingress_ip(old) != node_ingress_ip(new):
            self._nodes_changed()

    def _nodes_changed(self) -> None:
        for service in self.services.list():
            if handled(service) or ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress"):
                self._enqueue(service)

    def reconcile(self, key: str) -> float | None:
        """Write the Service's load-balancer ingress when it differs from the Nodes' addresses."""
        service = self.services.get(*split_key(key))
        if service is None:
            return None
        nodes = self.nodes.list()
        wanted = desired_status(service, nodes)
        if wanted is None or wanted == (service.get("status") or {}):
            return None

        def status(current: dict) -> dict:
            return desired_status(current, nodes) or (current.get("status") or {})

        stored = self.status_writer.write(service, status)
        if stored is not None:
            ips = [i["ip"] for i in ((stored.get("status") or {}).get("loadBalancer") or {}).get("ingress") or ()]
            log.info("service %s: load-balancer ingress %s", key, ", ".join(ips) or "(none)")
            self.recorder.event(stored, "Normal", UPDATED_REASON,
                                f"LoadBalancer Ingress IP addresses updated: {', '.join(ips) or '<none>'}")
        return None

    def object_for(self, key: str) -> dict | None:
        """The Service a permanent error's Warning Event is about."""
        return self.services.get(*split_key(key))


__all__ = ["ServiceLBController", "desired_status", "handled", "ingress_for", "node_ingress_ip"]
