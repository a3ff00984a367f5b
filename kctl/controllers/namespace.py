"""The namespace controller: a Terminating Namespace is emptied, then removed.

Run by the controller manager in `kctl daemon`. `kctl delete namespace X` goes through
the API layer, which marks a Namespace that still holds objects as Terminating
(deletionTimestamp, `spec.finalizers: [kubernetes]`, `status.phase: Terminating`) and
from then on refuses creates in it. This controller deletes every namespaced object in
it, kind by kind, with background propagation; Pods go through their graceful path (a
bound Pod is only marked for deletion, and its node agent stops it and removes it).
While anything is left it looks again after `recheck_seconds`. The API layer removes
the Namespace itself when its last object goes; when the Namespace is empty but still
there (its objects went by another path) this controller drops the `kubernetes`
finalizer from spec.finalizers, which lets the API remove it.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kctl.client.retry import retry_on_conflict
from kctl.machinery.errors import Conflict, NotFound

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.namespace")

FINALIZER = "kubernetes"


@dataclass(frozen=True)
class NamespaceSettings:
    """How the namespace controller paces itself."""

    #: objects deleted per reconcile before it yields to other keys
    batch: int = 500
    #: seconds between looks at a namespace whose objects are still terminating
    recheck_seconds: float = 1.0


class NamespaceController:
    """Deletes what a Terminating Namespace holds, then lets the Namespace go."""

    name = "namespace"

    def __init__(self, *, settings: NamespaceSettings = NamespaceSettings()) -> None:
        self.settings = settings

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.namespaces = ctx.informers.informer("namespaces")
        self.namespaces.add_handler(self._on_change, lambda old, new: self._on_change(new), lambda obj: None)

    def object_for(self, key: str) -> dict | None:
        """The cached Namespace of a key (a permanent failure's Warning Event goes on it)."""
        return self.namespaces.get("", key.rsplit("/", 1)[-1])

    def _on_change(self, ns: dict) -> None:
        if ns["metadata"].get("deletionTimestamp"):
            self.queue.add(ns["metadata"]["name"])

    def reconcile(self, key: str) -> float | None:
        name = key.rsplit("/", 1)[-1]
        ns = self.namespaces.get("", name)
        if ns is None:
            try:
                ns = self.api.get(self.api.resource("namespaces"), name)
            except NotFound:
                return None
        if not ns["metadata"].get("deletionTimestamp"):
            return None
        remaining = self._delete_content(name)
        if remaining:
            return self.settings.recheck_seconds
        return self._finalize(name)

    def _delete_content(self, namespace: str) -> int:
        """Delete up to `batch` objects in the namespace; how many objects are left in it."""
        remaining = deleted = 0
        for rt in list(self.api.registry):
            if not rt.namespaced:
                continue
            items, _ = self.api.list(rt, namespace=namespace)
            for obj in items:
                remaining += 1
                meta = obj["metadata"]
                if meta.get("deletionTimestamp") or deleted >= self.settings.batch:
                    continue
                try:
                    after = self.api.delete(rt, meta["name"], namespace=namespace, propagation="Background")
                except NotFound:
                    remaining -= 1
                    continue
                except Conflict:
                    continue
                deleted += 1
                if not after or after.get("metadata", {}).get("deletionTimestamp") is None:
                    remaining -= 1  # removed at once
        if deleted:
            log.info("namespace %s: deleted %d objects, %d left", namespace, deleted, remaining)
        return remaining

    def _finalize(self, name: str) -> float | None:
        """The namespace is empty: drop spec.finalizers' `kubernetes`; the API removes it.

        A read-modify-write of the live Namespace, read again on a Conflict (retry_on_conflict).
        """
        rt = self.api.resource("namespaces")

        def finalize() -> None:
            ns = self.api.get(rt, name)
            new = copy.deepcopy(ns)
            spec = new.setdefault("spec", {})
            spec["finalizers"] = [f for f in spec.get("finalizers") or () if f != FINALIZER]
            if not spec["finalizers"]:
                del spec["finalizers"]
            if new == ns:
                if ns["metadata"].get("finalizers"):
                    return  # someone else's finalizers: theirs to remove
                new["metadata"].setdefault("annotations", {})["kctl.io/namespace-finalized"] = "true"
            self.api.update(new)

        try:
            retry_on_conflict(finalize)  # still conflicting: the work queue retries, rate-limited
        except NotFound:
            pass
        return None


__all__ = ["NamespaceController", "NamespaceSettings", "FINALIZER"]
