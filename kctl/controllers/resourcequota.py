"""The ResourceQuota controller: every quota's `status.hard` and `status.used`, kept current.

As kube-controller-manager's `resourcequota` controller (pkg/controller/resourcequota): the
key is a namespace; reconcile recomputes, for every ResourceQuota in it, what the
namespace's objects use of each `spec.hard` name (kctl.admission.quota: the same evaluators
the ResourceQuota admission plugin uses, so `kctl get quota` agrees with what admission
refuses) and writes `status: {hard: spec.hard, used: ...}` when it changed. A namespace is
queued when one of its quotas changes, and when a pod (only when what it charges changes:
created, terminal, deleted, resized), Service, claim, ConfigMap or Secret in it comes or
goes (Kubernetes' replenishment); other `count/<resource>` names are recounted (one list of
that kind) on those passes and on every resync (`resync_seconds`, five minutes as
Kubernetes' `--resource-quota-sync-period`). Run by the controller manager in `kctl daemon`
(registered in kctl/daemon/controllers.py as "resourcequota").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from kctl.admission import quota as q
from kctl.machinery.errors import APIError

if TYPE_CHECKING:
    from kctl.client.informer import Informer
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext
    from kctl.machinery.resources import ResourceType

log = logging.getLogger("kctl.controllers.resourcequota")

#: the kinds whose changes queue their namespace (watched); other charged kinds are listed when needed
WATCHED = ("pods", "services", "persistentvolumeclaims", "configmaps", "secrets")


@dataclass(frozen=True)
class ResourceQuotaSettings:
    """How often every quota is recomputed even without a change (kube's resource-quota-sync-period)."""

    resync_seconds: float = 300.0


class ResourceQuotaController:
    """Writes each ResourceQuota's status.hard (= spec.hard) and status.used (recomputed)."""

    name = "resourcequota"

    def __init__(self, *, settings: ResourceQuotaSettings = ResourceQuotaSettings()) -> None:
        self.settings = settings

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        from kctl.client.statuswriter import StatusWriter

        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.status_writer = StatusWriter(self.api)
        self.quotas = ctx.informers.informer("resourcequotas")
        self.quotas.add_handler(self._on_object, lambda old, new: self._on_quota_update(old, new), self._on_object)
        self.watched: dict[str, Informer] = {}
        for resource in WATCHED:
            informer = ctx.informers.informer(resource)
            self.watched[informer.rt.group_kind] = informer
            if resource == "pods":
                informer.add_handler(self._on_charged, self._on_pod_update, self._on_charged)
            else:
                informer.add_handler(self._on_charged, self._on_update, self._on_charged)

    def object_for(self, key: str) -> dict | None:
        """The first quota of the namespace (a permanent failure's Warning Event goes on it)."""
        quotas = self.quotas.list(key)
        return quotas[0] if quotas else None

    # -- handlers ------------------------------------------------------------------------

    def _on_object(self, obj: dict) -> None:
        namespace = (obj.get("metadata") or {}).get("namespace")
        if namespace:
            self.queue.add(namespace)

    def _on_quota_update(self, old: dict, new: dict) -> None:
        if old.get("spec") != new.get("spec") or (new.get("status") or {}).get("hard") != (new.get("spec") or {}).get(
                "hard") or old is new:
            self._on_object(new)

    def _on_charged(self, obj: dict) -> None:
        namespace = (obj.get("metadata") or {}).get("namespace")
        if namespace and self.quotas.list(namespace):
            self.queue.add(namespace)

    def _on_update(self, old: dict, new: dict) -> None:
        if old is new or old.get("spec") != new.get("spec") or (old.get("metadata") or {}).get(
                "annotations") != (new.get("metadata") or {}).get("annotations"):
            self._on_charged(new)

    def _on_pod_update(self, old: dict, new: dict) -> None:
        """A pod change matters when what it charges changed (it finished, or its resources did), or on resync."""
        namespace = (new.get("metadata") or {}).get("namespace")
        if namespace and self.quotas.list(namespace) and (old is new or q.pod_usage(old) != q.pod_usage(new)):
            self.queue.add(namespace)

    # -- reconcile ---------------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        """Recompute and write the status of every quota in namespace `key`; look again after the resync period."""
        quotas = self.quotas.list(key)
        if not quotas:
            return None
        listed: dict[str, list[dict]] = {}
        statuses = [(quota, self._status(quota, key, listed)) for quota in quotas]
        for quota, status in statuses:
            self.status_writer.write(quota, status)
        return self.settings.resync_seconds or None

    def _status(self, quota: dict, namespace: str, listed: dict[str, list[dict]]) -> dict:
        hard = dict((quota.get("spec") or {}).get("hard") or {})
        kinds: dict[str, ResourceType] = {}
        for name in hard:
            rt = q.kind_charged_by(name, self._resource)
            if rt is not None and rt.namespaced:
                kinds[rt.group_kind] = rt
        used: q.Usage = {}
        for group_kind, rt in kinds.items():
            if group_kind not in listed:
                listed[group_kind] = self._objects(rt, namespace)
            used.update(q.kind_usage(quota, rt, listed[group_kind]))
        formats = {name: q.hard_format(quota, name) for name in hard}
        amounts = {name: used.get(name, Fraction(0)) for name in hard}
        return {"hard": hard, "used": q.written(amounts, formats)}

    def _resource(self, name: str) -> "ResourceType | None":
        try:
            return self.api.resource(name)
        except APIError:
            return None

    def _objects(self, rt: "ResourceType", namespace: str) -> list[dict]:
        """The kind's objects in the namespace: from its informer when watched, else one list."""
        informer = self.watched.get(rt.group_kind)
        if informer is not None:
            return informer.list(namespace)
        return self.api.list(rt, namespace=namespace)[0]


__all__ = ["ResourceQuotaController", "ResourceQuotaSettings", "WATCHED"]
