"""The default StorageClass `local`: made when the control plane starts if it is missing.

k3s's local-path model: kctl ships one class, `local` (provisioner `kctl.io/local-volume`,
reclaimPolicy Delete, volumeBindingMode WaitForFirstConsumer, annotated
`storageclass.kubernetes.io/is-default-class: "true"`), so a claim without a class gets a
Podman named volume on its first pod's node (kctl.controllers.persistentvolume). This
controller (registered in kctl/daemon/controllers.py as "storageclass-default"; kctl's
own, Kubernetes has none) creates it once per control-plane term, when the controller
manager starts leading, if no class of that name exists. It never changes an existing
`local` (a user may edit its annotations or allowVolumeExpansion), does not bring it back
when a user deletes it (until the next start), and marks it default only when no other
class is marked default, so a user's own default class keeps winning.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kctl.machinery.errors import AlreadyExists
from kctl.machinery.persistentvolumes import (ANN_DEFAULT_CLASS, DEFAULT_CLASS_NAME, LOCAL_VOLUME_PROVISIONER,
                                              is_default_class)

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.storageclass")


def default_local_class(*, default: bool = True) -> dict:
    """The `local` StorageClass kctl makes (annotated default unless `default` is False)."""
    meta: dict = {"name": DEFAULT_CLASS_NAME}
    if default:
        meta["annotations"] = {ANN_DEFAULT_CLASS: "true"}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta,
            "provisioner": LOCAL_VOLUME_PROVISIONER, "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer"}


class DefaultStorageClassController:
    """Makes the `local` StorageClass if it is missing when the control plane starts."""

    name = "storageclass-default"

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.classes = ctx.informers.informer("storageclasses.storage.k8s.io")
        queue.add(DEFAULT_CLASS_NAME)  # once per term: a deleted `local` is not remade until the next start

    def object_for(self, key: str) -> dict | None:
        return None

    def reconcile(self, key: str) -> float | None:
        """Create `local` unless a class of that name exists."""
        if key != DEFAULT_CLASS_NAME or self.classes.get("", key) is not None:
            return None
        rt = self.classes.rt
        if self.api.find(rt, key) is not None:
            return None
        classes, _ = self.api.list(rt)
        other_default = any(is_default_class(sc) for sc in classes)
        try:
            self.api.create(default_local_class(default=not other_default))
            log.info("created the StorageClass %s%s", key, "" if other_default else " (default)")
        except AlreadyExists:
            pass
        return None


__all__ = ["DefaultStorageClassController", "default_local_class"]
