"""The `kubernetes` Service: how pods find the HTTPS API (kube-apiserver's bootstrap controller).

When `kctl daemon --listen ADDR:PORT` serves the Kubernetes API, the leading daemon's controller manager
runs this controller (kctl/daemon/controllers.py makes it from DaemonSettings.listen; without --listen it
does nothing). It keeps, as kube-apiserver's controlplane controller does:

- the Service `default/kubernetes`: ClusterIP the first address of the Service range (10.96.0.1 by
  default), port `https` 443/TCP -> the listen port, labels component=apiserver, provider=kubernetes,
  no selector (the EndpointSlice controller leaves it alone);
- its EndpointSlice `default/kubernetes` naming the address pods reach this daemon at (the advertise
  address: the listen address, or for 0.0.0.0/:: the host's default-route address) and the listen port.
  A daemon listening on loopback only has no address a pod can reach: the slice then has no endpoints
  (in-pod clients need `--listen 0.0.0.0:6443` or the host's address; docs/security.md).

Its existence is what makes pods get API access: the ServiceAccount admission plugin mounts the token
volume and the node agent sets KUBERNETES_SERVICE_HOST/PORT while it exists. A new leader rewrites the
slice with its own address. Changes to either object by anyone else are put back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kctl.machinery.errors import AlreadyExists, APIError, Conflict, NotFound
from kctl.machinery.wellknown import SERVICE_NAME_LABEL

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.kubernetesservice")

NAMESPACE = "default"
NAME = "kubernetes"
KEY = f"{NAMESPACE}/{NAME}"
SERVICE_LABELS = {"component": "apiserver", "provider": "kubernetes"}
#: seconds before trying again after a write the API refused (e.g. the ClusterIP is taken)
RETRY_SECONDS = 30.0


@dataclass(frozen=True)
class KubernetesServiceSettings:
    """Where the HTTPS API is: the Service's ClusterIP, the listen port, the addresses pods reach it at."""

    cluster_ip: str = "10.96.0.1"
    #: the daemon's --listen port; None: the HTTPS API is not served, and the controller does nothing
    port: int | None = None
    advertise_addresses: tuple[str, ...] = ()


def kubernetes_service(settings: KubernetesServiceSettings) -> dict:
    """The Service as kube-apiserver makes it."""
    ip = settings.cluster_ip
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(SERVICE_LABELS)},
            "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip], "sessionAffinity": "None",
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": settings.port}]}}


def kubernetes_slice(settings: KubernetesServiceSettings) -> dict:
    """The Service's EndpointSlice: one ready endpoint per advertise address, the listen port."""
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {SERVICE_NAME_LABEL: NAME}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [a], "conditions": {"ready": True, "serving": True, "terminating": False}}
                          for a in settings.advertise_addresses],
            "ports": [{"name": "https", "port": settings.port, "protocol": "TCP"}]}


class KubernetesServiceController:
    """Keeps `default/kubernetes` and its EndpointSlice as KubernetesServiceSettings say."""

    name = "kubernetes-service"

    def __init__(self, *, settings: KubernetesServiceSettings) -> None:
        self.settings = settings

    def register(self, ctx: ControllerContext, queue: WorkQueue[str]) -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.services = ctx.informers.informer("services")
        self.slices = ctx.informers.informer("endpointslices")
        for informer in (self.services, self.slices):
            informer.add_handler(self._on_change, lambda old, new: self._on_change(new), self._on_change)
        queue.add(KEY)

    def object_for(self, key: str) -> dict | None:
        return self.services.get(NAMESPACE, NAME)

    def _on_change(self, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("namespace") == NAMESPACE and meta.get("name") == NAME:
            self.queue.add(KEY)

    def reconcile(self, key: str) -> float | None:
        """Create or correct the Service and its EndpointSlice."""
        if key != KEY or self.settings.port is None:
            return None
        try:
            self._ensure_service()
            self._ensure_slice()
        except (AlreadyExists, Conflict):
            return 0.5  # written meanwhile: look again
        except APIError as exc:
            log.warning("the kubernetes Service cannot be written: %s", exc.message)
            return RETRY_SECONDS
        return None

    def _ensure_service(self) -> None:
        rt = self.api.resource("services")
        wanted = kubernetes_service(self.settings)
        current = self.api.find(rt, NAME, namespace=NAMESPACE)
        if current is None:
            self.api.create(wanted)
            log.info("created Service default/kubernetes (%s:443 -> port %d)", self.settings.cluster_ip,
                     self.settings.port)
            return
        spec = current.get("spec") or {}
        if spec.get("clusterIP") != self.settings.cluster_ip:
            self.api.delete(rt, NAME, namespace=NAMESPACE)  # a ClusterIP cannot change: make it again
            self.api.create(wanted)
            return
        labels = (current.get("metadata") or {}).get("labels") or {}
        if spec.get("ports") == wanted["spec"]["ports"] and not spec.get("selector") \
                and all(labels.get(k) == v for k, v in SERVICE_LABELS.items()):
            return
        new_spec = {k: v for k, v in spec.items() if k != "selector"}
        new_spec["ports"] = wanted["spec"]["ports"]
        meta = {**current["metadata"], "labels": {**labels, **SERVICE_LABELS}}
        self.api.update({**current, "metadata": meta, "spec": new_spec})

    def _ensure_slice(self) -> None:
        rt = self.api.resource("endpointslices")
        wanted = kubernetes_slice(self.settings)
        try:
            current = self.api.get(rt, NAME, namespace=NAMESPACE)
        except NotFound:
            self.api.create(wanted)
            return
        if current.get("endpoints") == wanted["endpoints"] and current.get("ports") == wanted["ports"] \
                and ((current.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL) == NAME:
            return
        meta = {**current["metadata"], "labels": {**((current.get("metadata") or {}).get("labels") or {}),
                                                  SERVICE_NAME_LABEL: NAME}}
        self.api.update({**current, "metadata": meta, "addressType": "IPv4", "endpoints": wanted["endpoints"],
                         "ports": wanted["ports"]})


__all__ = ["KEY", "KubernetesServiceController", "KubernetesServiceSettings", "kubernetes_service",
           "kubernetes_slice"]
