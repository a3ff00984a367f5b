"""The persistentvolume-binder: claims meet volumes, and both carry the phase Kubernetes gives them.

Kubernetes' PV controller (pkg/controller/volume/persistentvolume/pv_controller.go), cut
down to what kctl needs; run by the controller manager in `kctl daemon` (registered in
kctl/daemon/controllers.py as "persistentvolume-binder"). Queue keys are `pvc:<ns>/<name>`
and `pv:<name>`; a claim is looked at when it or a volume naming it changes, when a free
volume or a class appears, and again every `resync_seconds` while Pending. Level-triggered:
each pass re-reads the caches and does only what is missing, so a pass cut short is
finished by the next.

A claim (syncClaim):
- not yet bound (no `pv.kubernetes.io/bind-completed`): without spec.volumeName, the best
  fitting volume (kctl.controllers.persistentvolume.matching) is bound to it; none fits:
  a WaitForFirstConsumer claim whose pod is not scheduled yet waits (Normal
  WaitForFirstConsumer), a claim of a `kctl.io/local-volume` class with a selected node is
  provisioned (kctl.controllers.persistentvolume.provisioner; ProvisioningSucceeded or
  ProvisioningFailed), an external provisioner's claim is annotated and waits
  (ExternalProvisioning), a claim with no class gets FailedBinding; it stays Pending. With
  spec.volumeName (the user's pre-binding) that volume is bound if it fits (else
  VolumeMismatch);
- bound: kept Bound while its volume names it; Lost when the volume is gone
  (ClaimLost) or bound to another claim (ClaimMisbound).
Binding writes the volume first (claimRef, phase Bound), then the claim (volumeName,
annotations `pv.kubernetes.io/bind-completed` / `bound-by-controller`, status phase Bound
with the volume's access modes and capacity).

A volume (syncVolume): no claimRef (or one without uid: pre-bound by its user) is
Available; its claim bound to it: Bound; its claim gone: Released, then the reclaim
policy: Retain keeps it Released; Delete of a `kctl.io/local-volume` volume is the node
agent's (it removes the Podman volume and the PV); Delete of any other volume and Recycle
fail (phase Failed, Kubernetes' message: kctl has no deleter or recycler plugins).
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING, Callable

from kctl.controllers.base import Recorder, clock_now, key_of
from kctl.controllers.persistentvolume.matching import best_match, mismatch, prebound_to
from kctl.controllers.persistentvolume.provisioner import ProvisioningFailed, claim_ref, provision
from kctl.machinery.persistentvolumes import (ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_PROVISIONED_BY,
                                              ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER, LOCAL_VOLUME_PROVISIONER,
                                              claim_class, claim_ref_key)
from kctl.machinery.times import format_time

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.persistentvolume")

#: seconds between passes over a Pending claim (kube-controller-manager's --pvclaimbinder-sync-period)
RESYNC_SECONDS = 15.0
#: the Event source, as Kubernetes names it
COMPONENT = "persistentvolume-controller"
CLAIM_PREFIX, VOLUME_PREFIX = "pvc:", "pv:"
#: the volumes informer's index of claimRef `namespace/name` (named for this controller: informers are shared)
CLAIM_INDEX = "persistentvolume-binder/claim"

WAIT_FOR_FIRST_CONSUMER = "waiting for first consumer to be created before binding"
NO_CLASS_NO_VOLUME = "no persistent volumes available for this claim and no storage class is set"
CLAIM_LOST_REFERENCE = "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"
CLAIM_LOST_VOLUME = "Bound claim has lost its PersistentVolume. Data on the volume is lost!"
CLAIM_MISBOUND = "Two claims are bound to the same volume, this one is bound incorrectly"
NO_RECYCLER = "No recycler plugin found for the volume!"


def no_deleter(volume: str) -> str:
    """Kubernetes' message for a Delete policy no plugin can carry out."""
    return f'error getting deleter volume plugin for volume "{volume}": no deletable volume plugin matched'


def external_provisioning(provisioner: str) -> str:
    return (f"Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually "
            "by the system administrator. If volume creation is delayed, please verify that the provisioner is "
            "running and correctly registered.")


class PersistentVolumeBinder:
    """Binds claims to volumes, provisions kctl.io/local-volume claims, keeps both phases (module doc)."""

    name = "persistentvolume-binder"

    def __init__(self, *, resync_seconds: float = RESYNC_SECONDS) -> None:
        self.resync_seconds = resync_seconds

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.recorder = Recorder(ctx.api, component=COMPONENT)
        self.claims = ctx.informers.informer("persistentvolumeclaims")
        self.volumes = ctx.informers.informer("persistentvolumes")
        self.classes = ctx.informers.informer("storageclasses.storage.k8s.io")
        self.volumes.add_index(CLAIM_INDEX, _claim_index)
        self.claims.add_handler(self._claim_changed, lambda old, new: self._claim_changed(new), self._claim_deleted)
        self.volumes.add_handler(self._volume_changed, lambda old, new: self._volume_changed(new),
                                 self._volume_changed)
        self.classes.add_handler(self._class_changed, lambda old, new: self._class_changed(new), None)

    def object_for(self, key: str) -> dict | None:
        """The cached claim or volume of a key (a permanent failure's Warning Event goes on it)."""
        if key.startswith(CLAIM_PREFIX):
            return self.claims.get_by_key(key.removeprefix(CLAIM_PREFIX))
        return self.volumes.get("", key.removeprefix(VOLUME_PREFIX))

    # -- what to look at ----------------------------------------------------------------------

    def _claim_changed(self, pvc: dict) -> None:
        self.queue.add(CLAIM_PREFIX + key_of(pvc))
        volume = (pvc.get("spec") or {}).get("volumeName")
        if volume:
            self.queue.add(VOLUME_PREFIX + volume)

    def _claim_deleted(self, pvc: dict) -> None:
        volume = (pvc.get("spec") or {}).get("volumeName")
        if volume:
            self.queue.add(VOLUME_PREFIX + volume)
        for pv in self.volumes.by_index(CLAIM_INDEX, key_of(pvc)):
            self.queue.add(VOLUME_PREFIX + pv["metadata"]["name"])

    def _volume_changed(self, pv: dict) -> None:
        self.queue.add(VOLUME_PREFIX + pv["metadata"]["name"])
        claim = claim_ref_key(pv)
        if claim:
            self.queue.add(CLAIM_PREFIX + claim)
        else:  # a free volume: the claims waiting for one may take it
            self._queue_pending(lambda pvc: True)

    def _class_changed(self, sc: dict) -> None:
        name = sc["metadata"]["name"]
        self._queue_pending(lambda pvc: claim_class(pvc) == name)

    def _queue_pending(self, wanted: Callable[[dict], bool]) -> None:
        for pvc in self.claims.list():
            if not (pvc.get("spec") or {}).get("volumeName") and wanted(pvc):
                self.queue.add(CLAIM_PREFIX + key_of(pvc))

    # -- reconcile ----------------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        if key.startswith(CLAIM_PREFIX):
            pvc = self.claims.get_by_key(key.removeprefix(CLAIM_PREFIX))
            return None if pvc is None else self.sync_claim(pvc)
        if key.startswith(VOLUME_PREFIX):
            pv = self.volumes.get("", key.removeprefix(VOLUME_PREFIX))
            return None if pv is None else self.sync_volume(pv)
        return None

    def sync_claim(self, pvc: dict) -> float | None:
        """One pass over a claim; seconds to the next look while it is Pending."""
        annotations = (pvc.get("metadata") or {}).get("annotations") or {}
        if annotations.get(ANN_BIND_COMPLETED):
            return self._sync_bound_claim(pvc)
        return self._sync_unbound_claim(pvc)

    def _sync_unbound_claim(self, pvc: dict) -> float | None:
        volume_name = (pvc.get("spec") or {}).get("volumeName")
        if volume_name:
            return self._sync_prebound_claim(pvc, volume_name)
        class_name = claim_class(pvc)
        storage_class = self.classes.get("", class_name) if class_name else None
        delay = (storage_class or {}).get("volumeBindingMode") == "WaitForFirstConsumer"
        pv = best_match(self.volumes.list(), pvc, delay_binding=delay)
        if pv is not None:
            self._bind(pvc, pv, controller_chose=True)
            return None
        annotations = (pvc.get("metadata") or {}).get("annotations") or {}
        if delay and not annotations.get(ANN_SELECTED_NODE):
            self.recorder(pvc, "Normal", "WaitForFirstConsumer", WAIT_FOR_FIRST_CONSUMER)
        elif not class_name:
            self.recorder(pvc, "Normal", "FailedBinding", NO_CLASS_NO_VOLUME)
        elif storage_class is None:
            self.recorder(pvc, "Warning", "ProvisioningFailed",
                          f'storageclass.storage.k8s.io "{class_name}" not found')
        elif storage_class.get("provisioner") == LOCAL_VOLUME_PROVISIONER:
            if self._provision(pvc, storage_class):
                return None
        elif str(storage_class.get("provisioner") or "").startswith("kubernetes.io/"):
            self.recorder(pvc, "Warning", "ProvisioningFailed", "no provisionable volume plugin matched")
        else:
            self._annotate_provisioner(pvc, str(storage_class.get("provisioner")))
            self.recorder(pvc, "Normal", "ExternalProvisioning",
                          external_provisioning(str(storage_class.get("provisioner"))))
        self._set_claim_phase(pvc, "Pending")
        return self.resync_seconds

    def _sync_prebound_claim(self, pvc: dict, volume_name: str) -> float | None:
        """The user named the volume: bind it if it is free (or names this claim) and fits."""
        pv = self.volumes.get("", volume_name)
        if pv is None:
            self._set_claim_phase(pvc, "Pending")
            return self.resync_seconds
        if not (pv.get("spec") or {}).get("claimRef"):
            reason = mismatch(pv, pvc)
            if reason is not None:
                self.recorder(pvc, "Warning", "VolumeMismatch", f'Cannot bind to requested volume "{volume_name}": '
                                                                 f"{reason}")
                self._set_claim_phase(pvc, "Pending")
                return self.resync_seconds
            self._bind(pvc, pv, controller_chose=False)
            return None
        if prebound_to(pv, pvc):
            self._bind(pvc, pv, controller_chose=False)
            return None
        self.recorder(pvc, "Warning", "FailedBinding", f'volume "{volume_name}" already bound to a different claim.')
        self._set_claim_phase(pvc, "Pending")
        return self.resync_seconds

    def _sync_bound_claim(self, pvc: dict) -> float | None:
        volume_name = (pvc.get("spec") or {}).get("volumeName")
        if not volume_name:
            self._lose(pvc, "ClaimLost", CLAIM_LOST_REFERENCE)
            return None
        pv = self.volumes.get("", volume_name) or self.api.find(self.volumes.rt, volume_name)
        if pv is None:
            self._lose(pvc, "ClaimLost", CLAIM_LOST_VOLUME)
            return None
        ref = (pv.get("spec") or {}).get("claimRef")
        if not ref or prebound_to(pv, pvc):
            self._bind(pvc, pv, controller_chose=False)  # completes what is missing, on both sides
            return None
        self._lose(pvc, "ClaimMisbound", CLAIM_MISBOUND)
        return None

    def sync_volume(self, pv: dict) -> float | None:
        """One pass over a volume: its phase from its claim, and the reclaim policy once Released."""
        name = pv["metadata"]["name"]
        ref = (pv.get("spec") or {}).get("claimRef")
        if not isinstance(ref, dict) or not ref.get("name"):
            self._set_volume_phase(pv, "Available")
            return None
        if not ref.get("uid"):  # pre-bound by its user; the claim's pass binds it
            self._set_volume_phase(pv, "Available")
            self.queue.add(CLAIM_PREFIX + f"{ref.get('namespace') or ''}/{ref['name']}")
            return None
        pvc = self._claim_of(ref)
        if pvc is None:
            self._release(pv)
            return None
        bound_to = (pvc.get("spec") or {}).get("volumeName")
        if not bound_to:
            self.queue.add(CLAIM_PREFIX + key_of(pvc))  # the claim's pass completes the binding
        elif bound_to == name:
            self._set_volume_phase(pv, "Bound")
        elif ((pv.get("metadata") or {}).get("annotations") or {}).get(ANN_BOUND_BY_CONTROLLER):
            self._unbind(pv)  # we bound it to a claim that went to another volume
        return None

    # -- actions ------------------------------------------------------------------------------

    def _claim_of(self, ref: dict) -> dict | None:
        """The claim a claimRef names, if it is that very claim (same uid); the API decides, not the cache."""
        namespace, name = ref.get("namespace") or "", ref["name"]
        pvc = self.claims.get(namespace, name)
        if pvc is not None and pvc["metadata"].get("uid") == ref.get("uid"):
            return pvc
        pvc = self.api.find(self.claims.rt, name, namespace=namespace)
        if pvc is not None and pvc["metadata"].get("uid") == ref.get("uid"):
            return pvc
        return None

    def _provision(self, pvc: dict, storage_class: dict) -> bool:
        """Provision a kctl.io/local-volume claim and bind it; False (and an Event) when it cannot be."""
        try:
            made = provision(self.api, pvc, storage_class)
        except ProvisioningFailed as exc:
            self.recorder(pvc, "Warning", "ProvisioningFailed", str(exc))
            return False
        if made.created:
            log.info("claim %s: provisioned volume %s", key_of(pvc), made.volume["metadata"]["name"])
            self.recorder(pvc, "Normal", "ProvisioningSucceeded",
                          f"Successfully provisioned volume {made.volume['metadata']['name']}")
        self._bind(pvc, made.volume, controller_chose=True)
        return True

    def _bind(self, pvc: dict, pv: dict, *, controller_chose: bool) -> None:
        """Bind both ways, writing only what is missing: the volume first, then the claim."""
        volume_name = pv["metadata"]["name"]
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        if ref.get("uid") != pvc["metadata"]["uid"] or ref.get("name") != pvc["metadata"]["name"]:
            new = copy.deepcopy(pv)
            new["spec"]["claimRef"] = claim_ref(pvc)
            new["metadata"].setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
            pv = self.api.update(new)
        self._set_volume_phase(pv, "Bound")
        meta = pvc.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        if (pvc.get("spec") or {}).get("volumeName") != volume_name or annotations.get(ANN_BIND_COMPLETED) != "yes":
            new = copy.deepcopy(pvc)
            new_annotations = new["metadata"].setdefault("annotations", {})
            if new["spec"].get("volumeName") != volume_name:
                new["spec"]["volumeName"] = volume_name
                if controller_chose:
                    new_annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
            new_annotations[ANN_BIND_COMPLETED] = "yes"
            pvc = self.api.update(new)
            log.info("claim %s: bound to volume %s", key_of(pvc), volume_name)
        status = dict(pvc.get("status") or {})
        status.update(phase="Bound", accessModes=list((pv.get("spec") or {}).get("accessModes") or ()),
                      capacity=dict((pv.get("spec") or {}).get("capacity") or {}))
        if status != (pvc.get("status") or {}):
            new = copy.deepcopy(pvc)
            new["status"] = status
            self.api.update_status(new)

    def _annotate_provisioner(self, pvc: dict, provisioner: str) -> None:
        """Say which external provisioner the claim waits for (setClaimProvisioner)."""
        annotations = (pvc.get("metadata") or {}).get("annotations") or {}
        if annotations.get(ANN_STORAGE_PROVISIONER) == provisioner:
            return
        new = copy.deepcopy(pvc)
        new["metadata"].setdefault("annotations", {})[ANN_STORAGE_PROVISIONER] = provisioner
        self.api.update(new)

    def _unbind(self, pv: dict) -> None:
        """Free a volume the controller bound to a claim that is now bound elsewhere."""
        new = copy.deepcopy(pv)
        new["spec"].pop("claimRef", None)
        new["metadata"].get("annotations", {}).pop(ANN_BOUND_BY_CONTROLLER, None)
        self._set_volume_phase(self.api.update(new), "Available")

    def _release(self, pv: dict) -> None:
        """The volume's claim is gone: Released, then what its reclaim policy says."""
        phase = (pv.get("status") or {}).get("phase")
        if phase == "Failed":
            return
        if phase != "Released":
            pv = self._set_volume_phase(pv, "Released")
            log.info("volume %s: released (its claim is gone)", pv["metadata"]["name"])
        policy = (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy") or "Retain"
        if policy == "Retain":
            return
        name = pv["metadata"]["name"]
        if policy == "Recycle":
            self._fail(pv, "VolumeFailedRecycle", NO_RECYCLER)
        elif policy == "Delete" and not _provisioned_locally(pv):
            self._fail(pv, "VolumeFailedDelete", no_deleter(name))
        # Delete of a kctl.io/local-volume volume: its node agent removes the Podman volume, then the PV

    def _fail(self, pv: dict, reason: str, message: str) -> None:
        self.recorder(pv, "Warning", reason, message)
        self._set_volume_phase(pv, "Failed", message=message)

    def _lose(self, pvc: dict, reason: str, message: str) -> None:
        if (pvc.get("status") or {}).get("phase") != "Lost":
            self.recorder(pvc, "Warning", reason, message)
        self._set_claim_phase(pvc, "Lost")

    def _set_claim_phase(self, pvc: dict, phase: str) -> dict:
        if (pvc.get("status") or {}).get("phase") == phase:
            return pvc
        new = copy.deepcopy(pvc)
        new.setdefault("status", {})["phase"] = phase
        return self.api.update_status(new)

    def _set_volume_phase(self, pv: dict, phase: str, *, message: str = "") -> dict:
        status = pv.get("status") or {}
        if status.get("phase") == phase and (status.get("message") or "") == message:
            return pv
        new = copy.deepcopy(pv)
        new_status = new.setdefault("status", {})
        if new_status.get("phase") != phase:
            new_status["lastPhaseTransitionTime"] = format_time(clock_now(self.ctx.clock))
        new_status["phase"] = phase
        if message:
            new_status["message"] = message
        else:
            new_status.pop("message", None)
            new_status.pop("reason", None)
        return self.api.update_status(new)


def _provisioned_locally(pv: dict) -> bool:
    annotations = (pv.get("metadata") or {}).get("annotations") or {}
    csi = (pv.get("spec") or {}).get("csi") or {}
    return annotations.get(ANN_PROVISIONED_BY) == LOCAL_VOLUME_PROVISIONER or \
        csi.get("driver") == LOCAL_VOLUME_PROVISIONER


def _claim_index(pv: dict) -> list[str]:
    key = claim_ref_key(pv)
    return [key] if key else []


__all__ = ["COMPONENT", "PersistentVolumeBinder", "RESYNC_SECONDS", "external_provisioning", "no_deleter"]
