"""The ServiceAccount controller: every active Namespace has a ServiceAccount `default`.

As kube-controller-manager's `serviceaccount` controller (pkg/controller/serviceaccount):
when a Namespace appears (or changes) and when a ServiceAccount named `default` is deleted,
the namespace's key is queued; reconcile creates `default` in it if it is missing, unless
the Namespace is gone or Terminating. Run by the controller manager in `kctl daemon`
(registered in kctl/daemon/controllers.py). kctl mints no tokens for it (Kubernetes' token
controller is for the HTTPS API of issue 16); pods name it through spec.serviceAccountName,
which the API layer defaults to `default` (kctl.admission.defaults).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kctl.machinery.errors import AlreadyExists, Forbidden, NotFound

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.serviceaccount")

#: the ServiceAccount every namespace gets
DEFAULT_NAME = "default"


class ServiceAccountController:
    """Makes (and remakes) the `default` ServiceAccount of every active Namespace."""

    name = "serviceaccount"

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.namespaces = ctx.informers.informer("namespaces")
        self.accounts = ctx.informers.informer("serviceaccounts")
        self.namespaces.add_handler(self._on_namespace, lambda old, new: self._on_namespace(new), None)
        self.accounts.add_handler(None, None, self._on_account_deleted)

    def object_for(self, key: str) -> dict | None:
        """The cached Namespace of a key (a permanent failure's Warning Event goes on it)."""
        return self.namespaces.get("", key)

    def _on_namespace(self, ns: dict) -> None:
        self.queue.add(ns["metadata"]["name"])

    def _on_account_deleted(self, account: dict) -> None:
        meta = account.get("metadata") or {}
        if meta.get("name") == DEFAULT_NAME and meta.get("namespace"):
            self.queue.add(meta["namespace"])

    def reconcile(self, key: str) -> float | None:
        """Create `default` in namespace `key` if the Namespace is active and has none."""
        ns = self.namespaces.get("", key)
        if ns is None or not _active(ns):
            return None
        if self.accounts.get(key, DEFAULT_NAME) is not None:
            return None
        rt = self.api.resource("serviceaccounts")
        try:
            self.api.get(rt, DEFAULT_NAME, namespace=key)
            return None  # the cache is behind: it exists
        except NotFound:
            pass
        try:
            self.api.create({"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": DEFAULT_NAME, "namespace": key}})
            log.info("namespace %s: created ServiceAccount %s", key, DEFAULT_NAME)
        except AlreadyExists:
            pass
        except (Forbidden, NotFound):
            pass  # the namespace began terminating or went meanwhile: nothing to make
        return None


def _active(ns: dict) -> bool:
    """Not being deleted (no deletionTimestamp, phase not Terminating)."""
    return not ns["metadata"].get("deletionTimestamp") and (ns.get("status") or {}).get("phase") != "Terminating"


__all__ = ["DEFAULT_NAME", "ServiceAccountController"]
