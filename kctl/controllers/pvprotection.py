"""The pv-protection controller: a Bound volume is not removed while its claim holds it.

Kubernetes' `persistentvolume-protection` controller (pkg/controller/volume/pvprotection);
run by the controller manager in `kctl daemon` (registered in kctl/daemon/controllers.py
under that name). New volumes get the finalizer `kubernetes.io/pv-protection` at
admission (kctl.admission.plugins.storageobjectinuseprotection; this controller adds it
to a volume that lacks it). A deleted volume stays, Terminating, while its phase is
Bound; once it is not (its claim went: Released, Available, Failed) the finalizer comes
off and the API layer removes it. Queue keys are volume names.
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING

from kctl.machinery.errors import NotFound
from kctl.machinery.persistentvolumes import PV_PROTECTION_FINALIZER

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.pvprotection")


class PVProtectionController:
    """Removes `kubernetes.io/pv-protection` from a deleted volume once it is not Bound."""

    name = "persistentvolume-protection"

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.volumes = ctx.informers.informer("persistentvolumes")
        self.volumes.add_handler(self._changed, lambda old, new: self._changed(new), None)

    def object_for(self, key: str) -> dict | None:
        return self.volumes.get("", key)

    def _changed(self, pv: dict) -> None:
        meta = pv.get("metadata") or {}
        finalizers = meta.get("finalizers") or ()
        deleting = bool(meta.get("deletionTimestamp"))
        if (deleting and PV_PROTECTION_FINALIZER in finalizers) or (not deleting
                                                                     and PV_PROTECTION_FINALIZER not in finalizers):
            self.queue.add(meta["name"])

    def reconcile(self, key: str) -> float | None:
        """Add the finalizer to a live volume that lacks it; remove it from a deleted one not Bound."""
        pv = self.volumes.get("", key)
        if pv is None:
            return None
        finalizers = list(pv["metadata"].get("finalizers") or ())
        if not pv["metadata"].get("deletionTimestamp"):
            if PV_PROTECTION_FINALIZER not in finalizers:
                self._write_finalizers(pv, finalizers + [PV_PROTECTION_FINALIZER])
            return None
        if PV_PROTECTION_FINALIZER not in finalizers or (pv.get("status") or {}).get("phase") == "Bound":
            return None
        self._write_finalizers(pv, [f for f in finalizers if f != PV_PROTECTION_FINALIZER])
        log.info("volume %s: not bound, protection removed", key)
        return None

    def _write_finalizers(self, pv: dict, finalizers: list[str]) -> None:
        new = copy.deepcopy(pv)
        new["metadata"]["finalizers"] = finalizers
        try:
            self.api.update(new)
        except NotFound:
            pass


__all__ = ["PVProtectionController"]
