"""The EndpointSlice controller: which pods back each Service, as discovery.k8s.io/v1 EndpointSlices.

Run by the controller manager in `kctl daemon` (kctl.daemon.controllers registers it as
"endpointslice"); written after kube-controller-manager's pkg/controller/endpointslice
(endpointslice_controller.go, reconciler.go, utils.go). Queue keys are Service keys;
pod, node and EndpointSlice events map to the keys of the Services they concern. For
each Service with a selector it:

- computes one endpoint per selected pod that has an IPv4 address and has not
  finished: `conditions` as Kubernetes computes them (serving = the pod is Ready;
  terminating = it is being deleted; ready = serving and not terminating;
  `publishNotReadyAddresses` makes serving and ready true), `nodeName`, `zone` (the
  Node's topology.kubernetes.io/zone label), `targetRef`, and `hostname` for pods whose
  `subdomain` names the Service;
- resolves the Service's ports per pod (a named targetPort is looked up in each pod's
  container ports), so pods that resolve differently land in different slices, and a
  port a pod does not have is left out for that pod;
- writes slices of at most `max_endpoints_per_slice` (100) endpoints, named
  `<service>-<5 random chars>` by generateName, labelled kubernetes.io/service-name and
  endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io, owned by the
  Service (so the garbage collector removes them with it); existing slices are updated
  in place, filled before new ones are made, and only changed slices are written; a
  Service with no endpoints keeps one empty placeholder slice, as Kubernetes does.

A Service without a selector (or ExternalName) is left to its user: slices it may have
that this controller did not make are never touched. Deviation: slices this controller
made for a Service that lost its selector are deleted (Kubernetes leaves them stale).
Endpoints are IPv4 only (kctl's pod network is IPv4). A write's result is remembered
per Service until the informer's cache has caught up with it, so a stale cache never
makes the controller create a slice twice (Kubernetes' endpointSliceTracker).
"""

from __future__ import annotations

import copy
import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable

from kctl.machinery.wellknown import SERVICE_NAME_LABEL
from kctl.client.claim import owner_reference
from kctl.client.errors import TemporaryError
from kctl.controllers.base import key_of, split_key
from kctl.client.pods import pod_ready, pod_terminating
from kctl.controllers.servicebackends import (ZONE_LABEL, ServiceIndex, endpoint_hostname, find_port, ip_sort_key,
                                              pod_endpoint_changed, pod_in_endpoints, pod_ipv4, selects,
                                              service_selector, target_ref)
from kctl.machinery.errors import AlreadyExists, APIError, Conflict, NotFound

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.endpointslice")

API_VERSION = "discovery.k8s.io/v1"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
CONTROLLER_NAME = "endpointslice-controller.k8s.io"
HEADLESS_LABEL = "service.kubernetes.io/headless"
ADDRESS_TYPE = "IPv4"
#: kube-controller-manager's --max-endpoints-per-slice default
DEFAULT_MAX_ENDPOINTS_PER_SLICE = 100

#: a slice's resolved ports, as a hashable, order-free key (name, port, protocol, appProtocol)
PortsKey = tuple[tuple[str, int, str, str], ...]
#: the endpoints of one port set: (ports, endpoints)
PortGroup = tuple[list[dict], list[dict]]


@dataclass(frozen=True)
class EndpointSliceSettings:
    """kube-controller-manager's EndpointSlice flags."""

    #: --max-endpoints-per-slice (Kubernetes allows 1-1000)
    max_endpoints_per_slice: int = DEFAULT_MAX_ENDPOINTS_PER_SLICE


@dataclass
class SlicePlan:
    """What one reconcile writes: new slices, changed slices (full objects), slices to delete."""

    create: list[dict] = field(default_factory=list)
    update: list[dict] = field(default_factory=list)
    delete: list[dict] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.create or self.update or self.delete)


# -- pure: endpoints and slices -------------------------------------------------------------

def endpoint_ports(service: dict, pod: dict) -> list[dict]:
    """getEndpointPorts: the Service's ports as this pod serves them (ports it lacks left out)."""
    ports: list[dict] = []
    for sp in (service.get("spec") or {}).get("ports") or ():
        number = find_port(pod, sp)
        if number is None:
            continue
        port = {"name": sp.get("name") or "", "port": number, "protocol": sp.get("protocol") or "TCP"}
        if sp.get("appProtocol"):
            port["appProtocol"] = sp["appProtocol"]
        ports.append(port)
    return ports


def ports_key(ports: Iterable[dict]) -> PortsKey:
    """The order-free identity of a slice's port list."""
    return tuple(sorted((p.get("name") or "", int(p.get("port") or 0), p.get("protocol") or "TCP",
                         p.get("appProtocol") or "") for p in ports or ()))


def pod_endpoint(service: dict, pod: dict, *, zone: str | None = None) -> dict:
    """podToEndpoint: the EndpointSlice endpoint of one pod (its conditions as Kubernetes computes them)."""
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    terminating = pod_terminating(pod)
    serving = publish or pod_ready(pod)
    ready = publish or (serving and not terminating)
    endpoint: dict = {"addresses": [pod_ipv4(pod)],
                      "conditions": {"ready": ready, "serving": serving, "terminating": terminating}}
    hostname = endpoint_hostname(pod, service)
    if hostname:
        endpoint["hostname"] = hostname
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        endpoint["nodeName"] = node
    endpoint["targetRef"] = target_ref(pod)
    if zone:
        endpoint["zone"] = zone
    return endpoint


def desired_endpoints(service: dict, pods: Iterable[dict], *,
                      zone_of: Callable[[str], str | None] = lambda node: None) -> dict[PortsKey, PortGroup]:
    """The Service's endpoints grouped by resolved ports: {key: (ports, endpoints sorted by address)}."""
    selector = service_selector(service)
    groups: dict[PortsKey, PortGroup] = {}
    if selector is None:
        return groups
    namespace = (service.get("metadata") or {}).get("namespace")
    for pod in pods:
        if (pod.get("metadata") or {}).get("namespace") != namespace or not selects(selector, pod):
            continue
        if not pod_in_endpoints(pod, include_terminating=True):
            continue
        ports = endpoint_ports(service, pod)
        node = (pod.get("spec") or {}).get("nodeName")
        endpoint = pod_endpoint(service, pod, zone=zone_of(node) if node else None)
        groups.setdefault(ports_key(ports), (ports, []))[1].append(endpoint)
    for _, endpoints in groups.values():
        endpoints.sort(key=lambda e: ip_sort_key(e["addresses"][0]))
    return groups


def slice_labels(service: dict) -> dict[str, str]:
    """setEndpointSliceLabels: the Service's labels, its name, the manager, and headless when it is."""
    labels = {k: v for k, v in ((service.get("metadata") or {}).get("labels") or {}).items()
              if k not in (SERVICE_NAME_LABEL, MANAGED_BY_LABEL, HEADLESS_LABEL)}
    labels[SERVICE_NAME_LABEL] = service["metadata"]["name"]
    labels[MANAGED_BY_LABEL] = CONTROLLER_NAME
    if (service.get("spec") or {}).get("clusterIP") == "None":
        labels[HEADLESS_LABEL] = ""
    return labels


def new_slice(service: dict, ports: list[dict], endpoints: list[dict]) -> dict:
    """A new slice of the Service (named by generateName `<service>-`), owned by it."""
    meta = service["metadata"]
    return {"apiVersion": API_VERSION, "kind": "EndpointSlice",
            "metadata": {"generateName": f"{meta['name']}-", "namespace": meta.get("namespace"),
                         "labels": slice_labels(service), "ownerReferences": [owner_reference(service, "Service")]},
            "addressType": ADDRESS_TYPE, "endpoints": endpoints, "ports": ports}


def managed_by_us(slice_: dict) -> bool:
    return ((slice_.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) == CONTROLLER_NAME


def _address(endpoint: dict) -> str:
    addresses = endpoint.get("addresses") or [""]
    return str(addresses[0])


def plan_slices(service: dict, desired: dict[PortsKey, PortGroup], existing: Iterable[dict], *,
                max_per_slice: int = DEFAULT_MAX_ENDPOINTS_PER_SLICE) -> SlicePlan:
    """The reconciler: turn the Service's existing slices into the desired ones with the fewest writes.

    Existing slices of a port set keep the endpoints that are still wanted (updated in
    place), then take new endpoints while they have room; what is left goes to new
    slices of `max_per_slice`. Slices left empty, of port sets no longer wanted or of
    another address type are deleted; with no endpoints at all one empty placeholder
    slice stays. Only slices whose content changes are in `update`.
    """
    plan = SlicePlan()
    labels = slice_labels(service)
    ours = sorted((s for s in existing if managed_by_us(s)), key=lambda s: s["metadata"].get("name") or "")
    by_key: dict[PortsKey, list[dict]] = {}
    for slice_ in ours:
        if slice_.get("addressType") != ADDRESS_TYPE:
            plan.delete.append(slice_)
        else:
            by_key.setdefault(ports_key(slice_.get("ports") or ()), []).append(slice_)
    if not any(endpoints for _, endpoints in desired.values()):
        return _placeholder(service, by_key, labels, plan)
    for key, (ports, endpoints) in desired.items():
        if not endpoints:
            continue
        wanted = {_address(e): e for e in endpoints}
        placed: set[str] = set()
        staged: list[tuple[dict, list[dict]]] = []
        for slice_ in by_key.pop(key, []):
            keep = []
            for old in slice_.get("endpoints") or ():
                address = _address(old)
                if address in wanted and address not in placed and len(keep) < max_per_slice:
                    keep.append(wanted[address])
                    placed.add(address)
            staged.append((slice_, keep))
        remaining = [e for e in endpoints if _address(e) not in placed]
        for _, keep in sorted(staged, key=lambda item: -len(item[1])):  # fill the fullest first
            while remaining and 0 < len(keep) < max_per_slice:
                keep.append(remaining.pop(0))
        for slice_, keep in staged:
            while remaining and not keep:  # an emptied slice is reused before a new one is made
                keep.extend(remaining[:max_per_slice])
                del remaining[:max_per_slice]
            if not keep:
                plan.delete.append(slice_)
                continue
            keep.sort(key=lambda e: ip_sort_key(_address(e)))
            _stage_update(plan, slice_, ports, keep, labels, service)
        for start in range(0, len(remaining), max_per_slice):
            plan.create.append(new_slice(service, copy.deepcopy(ports), remaining[start:start + max_per_slice]))
    for slices in by_key.values():
        plan.delete.extend(slices)
    return plan


def _placeholder(service: dict, by_key: dict[PortsKey, list[dict]], labels: dict[str, str],
                 plan: SlicePlan) -> SlicePlan:
    """No endpoints: one empty slice stays (an existing one is reused), the others go."""
    slices = [s for group in by_key.values() for s in group]
    slices.sort(key=lambda s: (bool(s.get("endpoints")), s["metadata"].get("name") or ""))
    if not slices:
        plan.create.append(new_slice(service, [], []))
        return plan
    _stage_update(plan, slices[0], [], [], labels, service)
    plan.delete.extend(slices[1:])
    return plan


def _stage_update(plan: SlicePlan, slice_: dict, ports: list[dict], endpoints: list[dict],
                  labels: dict[str, str], service: dict) -> None:
    """Add the slice with these contents to plan.update when anything differs."""
    meta = slice_.get("metadata") or {}
    refs = meta.get("ownerReferences") or []
    owner_uid = service["metadata"].get("uid")
    owned = any(r.get("uid") == owner_uid for r in refs)
    if (slice_.get("endpoints") or []) == endpoints and ports_key(slice_.get("ports") or ()) == ports_key(ports) \
            and (meta.get("labels") or {}) == labels and owned:
        return
    new = copy.deepcopy(slice_)
    new["endpoints"] = copy.deepcopy(endpoints)
    new["ports"] = copy.deepcopy(ports)
    new["metadata"]["labels"] = dict(labels)
    if not owned:
        new["metadata"]["ownerReferences"] = [r for r in refs if r.get("kind") != "Service"] + \
            [owner_reference(service, "Service")]
    plan.update.append(new)


# -- the controller -------------------------------------------------------------------------

class _WriteTracker:
    """endpointSliceTracker, cut down: the revision of the last write per Service, until the cache has it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._expected: dict[str, int] = {}

    def wrote(self, key: str, revision: int) -> None:
        with self._lock:
            self._expected[key] = max(self._expected.get(key, 0), revision)

    def stale(self, key: str, cache_revision: int) -> bool:
        """True while the cache has not seen this Service's last write (forgotten once it has)."""
        with self._lock:
            expected = self._expected.get(key)
            if expected is None:
                return False
            if cache_revision >= expected:
                del self._expected[key]
                return False
            return True

    def forget(self, key: str) -> None:
        with self._lock:
            self._expected.pop(key, None)


def _revision(obj: dict | None) -> int:
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


class EndpointSliceController:
    """Keeps each selector Service's EndpointSlices equal to the pods it selects."""

    name = "endpointslice"

    def __init__(self, *, settings: EndpointSliceSettings = EndpointSliceSettings()) -> None:
        if not 1 <= settings.max_endpoints_per_slice <= 1000:
            raise ValueError(f"max endpoints per slice must be 1-1000, not {settings.max_endpoints_per_slice}")
        self.settings = settings
        self._tracker = _WriteTracker()

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.services = ctx.informers.informer("services")
        self.pods = ctx.informers.informer("pods")
        self.nodes = ctx.informers.informer("nodes")
        self.slices = ctx.informers.informer("endpointslices.discovery.k8s.io")
        self._index = ServiceIndex(self.services)
        self.services.add_handler(self._enqueue, lambda old, new: self._enqueue(new), self._on_service_delete)
        self.pods.add_handler(self._on_pod, self._on_pod_update, self._on_pod)
        self.nodes.add_handler(None, self._on_node_update, None)
        self.slices.add_handler(self._on_slice, lambda old, new: self._on_slice(new), self._on_slice)
        self._slice_rt = self.api.resource("endpointslices.discovery.k8s.io")

    # -- event handlers ----------------------------------------------------------------------

    def _enqueue(self, service: dict) -> None:
        self.queue.add(key_of(service))

    def _on_service_delete(self, service: dict) -> None:
        self._tracker.forget(key_of(service))

    def _on_pod(self, pod: dict) -> None:
        for key in self._index.keys_for_pod(pod):
            self.queue.add(key)

    def _on_pod_update(self, old: dict, new: dict) -> None:
        if not pod_endpoint_changed(old, new):
            return
        for key in self._index.keys_for_pods([old, new]):
            self.queue.add(key)

    def _on_node_update(self, old: dict, new: dict) -> None:
        old_zone = ((old.get("metadata") or {}).get("labels") or {}).get(ZONE_LABEL)
        new_zone = ((new.get("metadata") or {}).get("labels") or {}).get(ZONE_LABEL)
        if old_zone != new_zone:
            for key in self._index.keys_for_pods(self.pods.by_index("node", new["metadata"]["name"])):
                self.queue.add(key)

    def _on_slice(self, slice_: dict) -> None:
        """A slice of ours changed or went (by us or anyone): look at its Service again."""
        meta = slice_.get("metadata") or {}
        service = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
        if service and managed_by_us(slice_):
            self.queue.add(f"{meta.get('namespace')}/{service}")

    # -- reconcile ---------------------------------------------------------------------------

    def _zone_of(self, node_name: str) -> str | None:
        node = self.nodes.get("", node_name)
        return ((node or {}).get("metadata") or {}).get("labels", {}).get(ZONE_LABEL) if node else None

    def reconcile(self, key: str) -> float | None:
        """syncService: write the difference between the Service's slices and its pods."""
        namespace, name = split_key(key)
        service = self.services.get(namespace, name)
        if service is None:
            self._tracker.forget(key)
            return None  # its slices go with it (garbage collection by ownerReference)
        if self._tracker.stale(key, self.slices.revision):
            return 0.05  # our last write is not in the cache yet: acting now could duplicate it
        if service["metadata"].get("deletionTimestamp"):
            return None
        existing = [s for s in self.slices.list(namespace)
                    if ((s.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL) == name]
        if service_selector(service) is None:
            plan = SlicePlan(delete=[s for s in existing if managed_by_us(s)])
        else:
            desired = desired_endpoints(service, self.pods.list(namespace), zone_of=self._zone_of)
            plan = plan_slices(service, desired, existing, max_per_slice=self.settings.max_endpoints_per_slice)
        if not plan.empty:
            self._apply(key, plan)
        return None

    def object_for(self, key: str) -> dict | None:
        """The Service a permanent error's Warning Event is about."""
        return self.services.get(*split_key(key))

    def _apply(self, key: str, plan: SlicePlan) -> None:
        """Write a plan: creates and updates in one transaction, then deletes.

        A slice that changed or went meanwhile is a TemporaryError (look again soon); any
        other failure is raised as it is, for the manager to judge (kctl.client.errors).
        """
        errors: list[APIError] = []
        ops = [("create", s) for s in plan.create] + [("update", s) for s in plan.update]
        if ops:
            for result in self.api.write_all(ops):
                if result.error is not None:
                    errors.append(result.error)
                elif result.obj is not None:
                    self._tracker.wrote(key, _revision(result.obj))
        for slice_ in plan.delete:
            meta = slice_["metadata"]
            try:
                gone = self.api.delete(self._slice_rt, meta["name"], namespace=meta.get("namespace"))
                self._tracker.wrote(key, _revision(gone))
            except NotFound:
                continue
            except APIError as exc:
                errors.append(exc)
        if not errors:
            return
        lasting = [e for e in errors if not isinstance(e, (Conflict, NotFound, AlreadyExists))]
        if lasting:
            raise lasting[0]
        raise TemporaryError(f"endpointslices of service {key}: {errors[0]}")


__all__ = ["CONTROLLER_NAME", "DEFAULT_MAX_ENDPOINTS_PER_SLICE", "EndpointSliceController", "EndpointSliceSettings",
           "MANAGED_BY_LABEL", "SERVICE_NAME_LABEL", "SlicePlan", "desired_endpoints", "endpoint_ports",
           "new_slice", "plan_slices", "pod_endpoint", "ports_key", "slice_labels"]
