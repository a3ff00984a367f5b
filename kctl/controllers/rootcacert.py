"""The root CA publisher: every active Namespace has a ConfigMap `kube-root-ca.crt` holding the cluster CA.

As kube-controller-manager's `root-ca-cert-publisher` (pkg/controller/certificates/rootcacertpublisher):
when a Namespace appears or changes, and when a `kube-root-ca.crt` ConfigMap changes or is deleted, the
namespace's key is queued; reconcile creates the ConfigMap (data `ca.crt`, Kubernetes' description
annotation) or puts the CA back into it. Pods' projected `kube-api-access-*` volumes
(kctl.admission.plugins.serviceaccount) read `ca.crt` from it, so an in-pod client trusts the HTTPS API.

The CA is the store's PKI's `ca.crt` (kctl.kubeapi.pki, `<store>.pki/`; read here by path, as the
controller layer sits below kctl.kubeapi). A store whose CA was never made (no `kctl daemon --listen`,
no `kctl config kubeconfig`) gets no ConfigMaps; with `wait_for_ca` (the daemon serves the HTTPS API,
which makes the CA at start) a namespace is looked at again every CA_RETRY_SECONDS until it exists.
Registered in kctl/daemon/controllers.py.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from kctl.apiserver import keyfiles
from kctl.machinery.errors import AlreadyExists, Conflict, Forbidden, NotFound

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.rootcacert")

CONFIGMAP = "kube-root-ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
               "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
               "distributions of Kubernetes clusters.")
CA_RETRY_SECONDS = 10.0


class RootCACertPublisher:
    """Keeps `kube-root-ca.crt` (the cluster CA) in every active Namespace."""

    name = "root-ca-cert-publisher"

    def __init__(self, *, ca_file: Path | None = None, wait_for_ca: bool = False) -> None:
        self.ca_file, self.wait_for_ca = ca_file, wait_for_ca

    def register(self, ctx: ControllerContext, queue: WorkQueue[str]) -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        if self.ca_file is None and self.api.local_path:
            self.ca_file = keyfiles.pki_dir(self.api.local_path) / "ca.crt"
        self.namespaces = ctx.informers.informer("namespaces")
        self.configmaps = ctx.informers.informer("configmaps")
        self.namespaces.add_handler(self._on_namespace, lambda old, new: self._on_namespace(new), None)
        self.configmaps.add_handler(None, lambda old, new: self._on_configmap(new), self._on_configmap)

    def object_for(self, key: str) -> dict | None:
        """The cached Namespace of a key (a permanent failure's Warning Event goes on it)."""
        return self.namespaces.get("", key)

    def _on_namespace(self, ns: dict) -> None:
        self.queue.add(ns["metadata"]["name"])

    def _on_configmap(self, cm: dict) -> None:
        meta = cm.get("metadata") or {}
        if meta.get("name") == CONFIGMAP and meta.get("namespace"):
            self.queue.add(meta["namespace"])

    def _ca_pem(self) -> str | None:
        try:
            return self.ca_file.read_text() if self.ca_file is not None else None
        except OSError:
            return None

    def reconcile(self, key: str) -> float | None:
        """Create or correct `kube-root-ca.crt` in namespace `key` (if active and the CA exists)."""
        ns = self.namespaces.get("", key)
        if ns is None or ns["metadata"].get("deletionTimestamp") or (ns.get("status") or {}).get("phase") \
                == "Terminating":
            return None
        ca = self._ca_pem()
        if not ca:
            return CA_RETRY_SECONDS if self.wait_for_ca else None
        cached = self.configmaps.get(key, CONFIGMAP)
        if cached is not None and (cached.get("data") or {}).get("ca.crt") == ca:
            return None
        rt = self.api.resource("configmaps")
        try:
            current = self.api.find(rt, CONFIGMAP, namespace=key)
            if current is None:
                self.api.create({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": CONFIGMAP, "namespace": key,
                                              "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                                 "data": {"ca.crt": ca}})
                log.info("namespace %s: published ConfigMap %s", key, CONFIGMAP)
            elif (current.get("data") or {}).get("ca.crt") != ca:
                self.api.update({**current, "data": {**(current.get("data") or {}), "ca.crt": ca}})
        except (AlreadyExists, Conflict):
            return 0.5  # another writer meanwhile: look again
        except (Forbidden, NotFound):
            pass  # the namespace began terminating or went meanwhile
        return None


__all__ = ["CONFIGMAP", "RootCACertPublisher"]
