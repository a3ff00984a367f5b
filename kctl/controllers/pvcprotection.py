"""The pvc-protection controller: a claim a pod still uses is not removed until the pod is done with it.

Kubernetes' `persistentvolumeclaim-protection` controller (pkg/controller/volume/
pvcprotection); run by the controller manager in `kctl daemon` (registered in
kctl/daemon/controllers.py under that name). New claims get the finalizer
`kubernetes.io/pvc-protection` at admission (kctl.admission.plugins.
storageobjectinuseprotection; this controller adds it to a claim that lacks it). When a
claim is deleted it stays, Terminating, until no pod uses it; then this controller takes
the finalizer off and the API layer removes the claim. A pod uses a claim when it is
scheduled (spec.nodeName), names the claim (persistentVolumeClaim.claimName, or the
claim of its ephemeral volume), is not Succeeded or Failed, and was not force-deleted.
The cache says "in use" quickly; "unused" is confirmed by a live list of the namespace's
pods, as Kubernetes asks the API server before it lets a claim go.
Queue keys are claim keys; a pod's change queues the claims it names.
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING

from kctl.controllers.base import key_of, split_key
from kctl.machinery.errors import NotFound
from kctl.machinery.persistentvolumes import PVC_PROTECTION_FINALIZER, pod_claim_names

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.pvcprotection")

#: the pods informer's index of the claims a pod names, `namespace/name` (informers are shared)
CLAIMS_INDEX = "pvcprotection/claims"


def pod_uses_claim(pod: dict, claim_name: str) -> bool:
    """The pod holds the claim: scheduled, names it, not finished, not force-deleted (podUsesPVC)."""
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod.get("metadata") or {}
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return False
    if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds") == 0:
        return False
    return claim_name in pod_claim_names(pod)


class PVCProtectionController:
    """Removes `kubernetes.io/pvc-protection` from a deleted claim once no pod uses it."""

    name = "persistentvolumeclaim-protection"

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.claims = ctx.informers.informer("persistentvolumeclaims")
        self.pods = ctx.informers.informer("pods")
        self.pods.add_index(CLAIMS_INDEX, _pod_claims_index)
        self.claims.add_handler(self._claim_changed, lambda old, new: self._claim_changed(new), None)
        self.pods.add_handler(self._pod_changed, lambda old, new: self._pod_changed(new), self._pod_changed)

    def object_for(self, key: str) -> dict | None:
        return self.claims.get_by_key(key)

    def _claim_changed(self, pvc: dict) -> None:
        finalizers = (pvc.get("metadata") or {}).get("finalizers") or ()
        deleting = bool(pvc["metadata"].get("deletionTimestamp"))
        if (deleting and PVC_PROTECTION_FINALIZER in finalizers) or (not deleting
                                                                      and PVC_PROTECTION_FINALIZER not in finalizers):
            self.queue.add(key_of(pvc))

    def _pod_changed(self, pod: dict) -> None:
        namespace = (pod.get("metadata") or {}).get("namespace") or ""
        for claim in pod_claim_names(pod):
            self.queue.add(f"{namespace}/{claim}")

    def reconcile(self, key: str) -> float | None:
        """Add the finalizer to a live claim that lacks it; remove it from a deleted claim no pod uses."""
        pvc = self.claims.get_by_key(key)
        if pvc is None:
            return None
        finalizers = list(pvc["metadata"].get("finalizers") or ())
        if not pvc["metadata"].get("deletionTimestamp"):
            if PVC_PROTECTION_FINALIZER not in finalizers:
                self._write_finalizers(pvc, finalizers + [PVC_PROTECTION_FINALIZER])
            return None
        if PVC_PROTECTION_FINALIZER not in finalizers:
            return None
        namespace, name = split_key(key)
        if self._in_use(namespace, name):
            log.debug("claim %s is being deleted but still used by a pod: kept", key)
            return None
        self._write_finalizers(pvc, [f for f in finalizers if f != PVC_PROTECTION_FINALIZER])
        log.info("claim %s: no pod uses it any more, protection removed", key)
        return None

    def _in_use(self, namespace: str, name: str) -> bool:
        if any(pod_uses_claim(pod, name) for pod in self.pods.by_index(CLAIMS_INDEX, f"{namespace}/{name}")):
            return True
        pods, _ = self.api.list(self.pods.rt, namespace=namespace)  # the cache may be behind: ask the API
        return any(pod_uses_claim(pod, name) for pod in pods)

    def _write_finalizers(self, pvc: dict, finalizers: list[str]) -> None:
        new = copy.deepcopy(pvc)
        new["metadata"]["finalizers"] = finalizers
        try:
            self.api.update(new)
        except NotFound:
            pass  # gone meanwhile: nothing to protect


def _pod_claims_index(pod: dict) -> list[str]:
    namespace = (pod.get("metadata") or {}).get("namespace") or ""
    return [f"{namespace}/{claim}" for claim in pod_claim_names(pod)]


__all__ = ["PVCProtectionController", "pod_uses_claim"]
