"""Which pods back a Service, on which ports: what the EndpointSlice and Endpoints controllers share.

Pure functions over Service and Pod objects, written after Kubernetes'
pkg/controller/util/endpoint (ShouldPodBeInEndpoints, podEndpointsChanged) and
pkg/api/v1/pod (FindPort). Used by kctl.controllers.endpointslice and
kctl.controllers.endpoints; `ServiceIndex` maps a pod event to the keys of the Services
whose selector matches it, so both controllers queue Service keys.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Iterable

from kctl.client.pods import pod_ready, pod_terminating
from kctl.controllers.base import key_of

if TYPE_CHECKING:
    from kctl.client.informer import Informer

#: the label that names a Pod's Node's zone (used for EndpointSlice `zone`)
ZONE_LABEL = "topology.kubernetes.io/zone"


def service_selector(service: dict) -> dict[str, str] | None:
    """The Service's spec.selector as a label map, or None for a Service without one.

    An empty selector counts as none (Kubernetes stores `{}` as nil), and so does an
    ExternalName Service: neither gets endpoints from a controller.
    """
    spec = service.get("spec") or {}
    if spec.get("type") == "ExternalName":
        return None
    selector = spec.get("selector")
    if not isinstance(selector, dict) or not selector:
        return None
    return {str(k): str(v) for k, v in selector.items()}


def selects(selector: dict[str, str], pod: dict) -> bool:
    """A Service's equality-based selector matches the pod's labels."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def pod_ipv4(pod: dict) -> str | None:
    """The pod's first IPv4 address (status.podIPs, else status.podIP), or None."""
    status = pod.get("status") or {}
    candidates = [p.get("ip") for p in status.get("podIPs") or () if isinstance(p, dict)]
    candidates.append(status.get("podIP"))
    for ip in candidates:
        if not ip:
            continue
        try:
            if ipaddress.ip_address(str(ip)).version == 4:
                return str(ip)
        except ValueError:
            continue
    return None


def pod_in_endpoints(pod: dict, *, include_terminating: bool) -> bool:
    """ShouldPodBeInEndpoints: has an IP, has not finished, and (unless asked) is not terminating."""
    if pod_ipv4(pod) is None:
        return False
    if not include_terminating and pod_terminating(pod):
        return False
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Failed", "Succeeded")


def find_port(pod: dict, service_port: dict) -> int | None:
    """FindPort: the container port a Service port's targetPort means in this pod, or None.

    A number is itself; a name is looked up among the pod's containers' ports of the
    same protocol (None when no container has it); no targetPort means `port`.
    """
    target = service_port.get("targetPort")
    if target is None or target == "":
        target = service_port.get("port")
    if isinstance(target, int):
        return target if target > 0 else None
    text = str(target)
    if text.isdigit():
        return int(text) or None
    protocol = service_port.get("protocol") or "TCP"
    for container in (pod.get("spec") or {}).get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("name") == text and (port.get("protocol") or "TCP") == protocol:
                number = port.get("containerPort")
                return int(number) if number else None
    return None


def endpoint_hostname(pod: dict, service: dict) -> str | None:
    """The pod's spec.hostname when its spec.subdomain names this Service (same namespace)."""
    spec = pod.get("spec") or {}
    hostname, subdomain = spec.get("hostname"), spec.get("subdomain")
    pod_ns = (pod.get("metadata") or {}).get("namespace")
    svc_meta = service.get("metadata") or {}
    if hostname and subdomain == svc_meta.get("name") and pod_ns == svc_meta.get("namespace"):
        return str(hostname)
    return None


def target_ref(pod: dict) -> dict:
    """The ObjectReference of an endpoint's pod."""
    meta = pod.get("metadata") or {}
    return {"kind": "Pod", "namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid")}


def ip_sort_key(ip: str) -> tuple[int, int | str]:
    """Addresses in numeric order (anything unparsable last, as text)."""
    try:
        return 0, int(ipaddress.ip_address(ip))
    except ValueError:
        return 1, ip


class ServiceIndex:
    """Maps pods to the keys of the Services that select them, from the Service informer's cache."""

    def __init__(self, services: "Informer") -> None:
        self.services = services

    def keys_for_pod(self, pod: dict) -> set[str]:
        """Keys of the Services in the pod's namespace whose selector matches the pod."""
        namespace = (pod.get("metadata") or {}).get("namespace")
        keys: set[str] = set()
        for service in self.services.list(namespace):
            selector = service_selector(service)
            if selector is not None and selects(selector, pod):
                keys.add(key_of(service))
        return keys

    def keys_for_pods(self, pods: Iterable[dict]) -> set[str]:
        keys: set[str] = set()
        for pod in pods:
            keys |= self.keys_for_pod(pod)
        return keys


def pod_endpoint_changed(old: dict, new: dict) -> bool:
    """podEndpointsChanged: a pod change that can change its endpoints (or which Services select it)."""
    if (old.get("metadata") or {}).get("resourceVersion") == (new.get("metadata") or {}).get("resourceVersion"):
        return False
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    os_, ns_ = old.get("spec") or {}, new.get("spec") or {}
    if om.get("labels") != nm.get("labels") or pod_terminating(old) != pod_terminating(new):
        return True
    if pod_ipv4(old) != pod_ipv4(new) or pod_ready(old) != pod_ready(new):
        return True
    if (old.get("status") or {}).get("phase") != (new.get("status") or {}).get("phase"):
        return True
    if any(os_.get(f) != ns_.get(f) for f in ("nodeName", "hostname", "subdomain")):
        return True
    ports = [[c.get("ports") for c in spec.get("containers") or ()] for spec in (os_, ns_)]
    return ports[0] != ports[1]


__all__ = ["ServiceIndex", "ZONE_LABEL", "endpoint_hostname", "find_port", "ip_sort_key", "pod_endpoint_changed",
           "pod_in_endpoints", "pod_ipv4", "selects", "service_selector", "target_ref"]
