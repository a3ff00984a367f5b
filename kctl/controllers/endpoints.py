"""The Endpoints controller: the v1 Endpoints of each selector Service, kept in step for old clients.

Run by the controller manager in `kctl daemon` (kctl.daemon.controllers registers it as
"endpoint", kube-controller-manager's name); written after kube-controller-manager's pkg/controller/endpoint
(endpoints_controller.go), which Kubernetes 1.33 still runs beside the EndpointSlice
controller. Queue keys are Service keys; pod events map to the Services that select
the pod. For each Service with a selector it writes an Endpoints object of the same
name whose subsets list the selected pods with an IPv4 address that have not
finished: Ready pods under `addresses`, the others under `notReadyAddresses`
(`publishNotReadyAddresses` puts every pod under `addresses`); a pod being deleted is
left out unless `publishNotReadyAddresses` is set. Ports are resolved per pod (named
targetPorts against each pod's container ports), and addresses that serve the same
ports share one subset (RepackSubsets). At most 1000 addresses are kept, ready ones
first, and the object is then annotated `endpoints.kubernetes.io/over-capacity:
truncated`. The Service's labels are copied, with `service.kubernetes.io/headless`
for a headless Service. An unchanged Endpoints is not written.

When the Service is gone its Endpoints are deleted, as Kubernetes does; deviation:
only an Endpoints this controller labelled (`endpoints.kubernetes.io/managed-by:
endpoint-controller`), so a user's Endpoints whose Service was deleted are not
removed. A Service without a selector is left to its user. The EndpointSlice
mirroring direction (a user's Endpoints copied into slices) is not done.
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING, Iterable

from kctl.client.errors import TemporaryError
from kctl.controllers.base import key_of, split_key
from kctl.client.pods import pod_ready
from kctl.controllers.servicebackends import (ServiceIndex, endpoint_hostname, find_port, ip_sort_key,
                                              pod_endpoint_changed, pod_in_endpoints, pod_ipv4, selects,
                                              service_selector)
from kctl.machinery.errors import AlreadyExists, Conflict, NotFound

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.endpoints")

#: the most addresses one Endpoints object holds (maxCapacity)
MAX_CAPACITY = 1000
OVER_CAPACITY_ANNOTATION = "endpoints.kubernetes.io/over-capacity"
MANAGED_BY_LABEL = "endpoints.kubernetes.io/managed-by"
CONTROLLER_NAME = "endpoint-controller"
HEADLESS_LABEL = "service.kubernetes.io/headless"


# -- pure: subsets --------------------------------------------------------------------------

def _address(service: dict, pod: dict) -> dict:
    meta = pod.get("metadata") or {}
    address: dict = {"ip": pod_ipv4(pod)}
    hostname = endpoint_hostname(pod, service)
    if hostname:
        address["hostname"] = hostname
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        address["nodeName"] = node
    address["targetRef"] = {"kind": "Pod", "namespace": meta.get("namespace"), "name": meta.get("name"),
                            "uid": meta.get("uid")}
    return address


def _ports(service: dict, pod: dict) -> list[dict]:
    ports: list[dict] = []
    for sp in (service.get("spec") or {}).get("ports") or ():
        number = find_port(pod, sp)
        if number is None:
            continue
        port: dict = {"port": number, "protocol": sp.get("protocol") or "TCP"}
        if sp.get("name"):
            port["name"] = sp["name"]
        if sp.get("appProtocol"):
            port["appProtocol"] = sp["appProtocol"]
        ports.append(port)
    return ports


def _port_sort_key(port: dict) -> tuple[str, int, str]:
    return port.get("name") or "", int(port.get("port") or 0), port.get("protocol") or "TCP"


def endpoint_subsets(service: dict, pods: Iterable[dict]) -> list[dict]:
    """The subsets of a Service's Endpoints: its pods, grouped by the ports they serve, sorted."""
    selector = service_selector(service)
    if selector is None:
        return []
    spec = service.get("spec") or {}
    publish = bool(spec.get("publishNotReadyAddresses"))
    namespace = (service.get("metadata") or {}).get("namespace")
    headless_no_ports = spec.get("clusterIP") == "None" and not spec.get("ports")
    groups: dict[tuple, tuple[list[dict], list[dict], list[dict]]] = {}
    for pod in pods:
        if (pod.get("metadata") or {}).get("namespace") != namespace or not selects(selector, pod):
            continue
        if not pod_in_endpoints(pod, include_terminating=publish):
            continue
        ports = sorted(_ports(service, pod), key=_port_sort_key)
        if not ports and not headless_no_ports:
            continue  # the pod serves none of the Service's ports
        key = tuple(_port_sort_key(p) + (p.get("appProtocol") or "",) for p in ports)
        group = groups.setdefault(key, (ports, [], []))
        (group[1] if publish or pod_ready(pod) else group[2]).append(_address(service, pod))
    subsets = []
    for key in sorted(groups):
        ports, ready, not_ready = groups[key]
        subset: dict = {}
        if ready:
            subset["addresses"] = sorted(ready, key=lambda a: ip_sort_key(a["ip"]))
        if not_ready:
            subset["notReadyAddresses"] = sorted(not_ready, key=lambda a: ip_sort_key(a["ip"]))
        if ports:
            subset["ports"] = ports
        subsets.append(subset)
    return subsets


def address_count(subsets: list[dict]) -> int:
    return sum(len(s.get("addresses") or ()) + len(s.get("notReadyAddresses") or ()) for s in subsets)


def truncate_subsets(subsets: list[dict], max_capacity: int = MAX_CAPACITY) -> tuple[list[dict], bool]:
    """truncateEndpoints: at most max_capacity addresses, ready ones kept first, cut across subsets in proportion.

    Returns the subsets and whether anything was cut.
    """
    total = address_count(subsets)
    if total <= max_capacity:
        return subsets, False
    subsets = copy.deepcopy(subsets)
    ready_total = sum(len(s.get("addresses") or ()) for s in subsets)
    if ready_total >= max_capacity:
        for s in subsets:
            s.pop("notReadyAddresses", None)
        _cut(subsets, "addresses", max_capacity)
    else:
        _cut(subsets, "notReadyAddresses", max_capacity - ready_total)
    return [s for s in subsets if s.get("addresses") or s.get("notReadyAddresses")], True


def _cut(subsets: list[dict], field: str, keep: int) -> None:
    """Keep `keep` addresses of `field` across subsets, each its proportional share (remainder to the first)."""
    sizes = [len(s.get(field) or ()) for s in subsets]
    total = sum(sizes)
    if total <= keep:
        return
    shares = [size * keep // total for size in sizes]
    left = keep - sum(shares)
    for i, size in enumerate(sizes):
        extra = min(left, size - shares[i])
        shares[i] += extra
        left -= extra
    for s, share in zip(subsets, shares):
        if field in s:
            s[field] = s[field][:share]
            if not s[field]:
                del s[field]


def endpoints_labels(service: dict) -> dict[str, str]:
    """The Service's labels, the manager's label, and headless for a headless Service."""
    labels = {k: v for k, v in ((service.get("metadata") or {}).get("labels") or {}).items()
              if k not in (HEADLESS_LABEL, MANAGED_BY_LABEL)}
    labels[MANAGED_BY_LABEL] = CONTROLLER_NAME
    if (service.get("spec") or {}).get("clusterIP") == "None":
        labels[HEADLESS_LABEL] = ""
    return labels


def desired_endpoints_object(service: dict, pods: Iterable[dict], *, current: dict | None = None,
                             max_capacity: int = MAX_CAPACITY) -> dict:
    """The Endpoints the Service should have (based on `current` when it exists)."""
    subsets, truncated = truncate_subsets(endpoint_subsets(service, pods), max_capacity)
    meta = service["metadata"]
    if current is not None:
        obj = copy.deepcopy(current)
    else:
        obj = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": meta["name"],
                                                                    "namespace": meta.get("namespace")}}
    obj["metadata"]["labels"] = endpoints_labels(service)
    annotations = dict(obj["metadata"].get("annotations") or {})
    if truncated:
        annotations[OVER_CAPACITY_ANNOTATION] = "truncated"
    else:
        annotations.pop(OVER_CAPACITY_ANNOTATION, None)
    if annotations:
        obj["metadata"]["annotations"] = annotations
    else:
        obj["metadata"].pop("annotations", None)
    if subsets:
        obj["subsets"] = subsets
    else:
        obj.pop("subsets", None)
    return obj


# -- the controller -------------------------------------------------------------------------

class EndpointsController:
    """Keeps each selector Service's v1 Endpoints equal to the pods it selects."""

    name = "endpoint"

    def __init__(self, *, max_capacity: int = MAX_CAPACITY) -> None:
        self.max_capacity = max_capacity

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.services = ctx.informers.informer("services")
        self.pods = ctx.informers.informer("pods")
        self.endpoints = ctx.informers.informer("endpoints")
        self._index = ServiceIndex(self.services)
        self.services.add_handler(self._enqueue, lambda old, new: self._enqueue(new), self._enqueue)
        self.pods.add_handler(self._on_pod, self._on_pod_update, self._on_pod)
        # an Endpoints of ours whose Service went while nothing watched (checkLeftoverEndpoints)
        self.endpoints.add_handler(self._on_endpoints, None, None)
        self._rt = self.api.resource("endpoints")

    def _enqueue(self, obj: dict) -> None:
        self.queue.add(key_of(obj))

    def _on_pod(self, pod: dict) -> None:
        for key in self._index.keys_for_pod(pod):
            self.queue.add(key)

    def _on_pod_update(self, old: dict, new: dict) -> None:
        if pod_endpoint_changed(old, new):
            for key in self._index.keys_for_pods([old, new]):
                self.queue.add(key)

    def _on_endpoints(self, endpoints: dict) -> None:
        labels = (endpoints.get("metadata") or {}).get("labels") or {}
        if labels.get(MANAGED_BY_LABEL) == CONTROLLER_NAME:
            self._enqueue(endpoints)

    def reconcile(self, key: str) -> float | None:
        """syncService: write the Service's Endpoints when they differ from its pods."""
        namespace, name = split_key(key)
        service = self.services.get(namespace, name)
        current = self.endpoints.get(namespace, name)
        if service is None:
            self._delete_leftover(namespace, name, current)
            return None
        if service_selector(service) is None or service["metadata"].get("deletionTimestamp"):
            return None
        desired = desired_endpoints_object(service, self.pods.list(namespace), current=current,
                                           max_capacity=self.max_capacity)
        if current is not None and desired == current:
            return None
        try:
            if current is None:
                self.api.create(desired)
            else:
                self.api.update(desired)
        except (AlreadyExists, Conflict, NotFound) as exc:  # the cache is behind: look again soon
            raise TemporaryError(f"endpoints {key}: {exc}") from None
        return None

    def object_for(self, key: str) -> dict | None:
        """The Service a permanent error's Warning Event is about."""
        return self.services.get(*split_key(key))

    def _delete_leftover(self, namespace: str, name: str, current: dict | None) -> None:
        if current is None:
            return
        labels = (current.get("metadata") or {}).get("labels") or {}
        if labels.get(MANAGED_BY_LABEL) != CONTROLLER_NAME:
            return
        try:
            self.api.delete(self._rt, name, namespace=namespace,
                            resource_version=current["metadata"].get("resourceVersion"))
        except NotFound:
            return
        except Conflict:
            raise TemporaryError(f"endpoints {namespace}/{name}: changed while deleting") from None


__all__ = ["EndpointsController", "MAX_CAPACITY", "OVER_CAPACITY_ANNOTATION", "desired_endpoints_object",
           "endpoint_subsets", "truncate_subsets"]
