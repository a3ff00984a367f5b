"""The garbage collector: ownerReferences cascade deletion, as Kubernetes' garbage collector.

Run by the controller manager in `kctl daemon` (`GarbageCollector()` is one of the
controllers the daemon wires in). It watches every
kind the API serves except Events (as Kubernetes does) through the shared informers and
keeps three promises:

- **background**: an object whose owners are all gone is deleted. An owner reference that
  names a missing owner is "dangling"; when the object still has a live owner the dangling
  references are dropped instead. Dependents whose owner vanished while the daemon was
  down are found at start-up, because the informers' initial list reports every object.
- **foreground**: an owner deleted with `propagationPolicy: Foreground` carries the
  `foregroundDeletion` finalizer (the API layer adds it). Its dependents are deleted (a
  dependent that has dependents of its own in the foreground too, so a chain waits link
  by link); once no dependent with `blockOwnerDeletion: true` is left, the finalizer is
  removed and the API removes the owner.
- **orphan**: an owner carrying the `orphan` finalizer has its reference dropped from
  every dependent, then the finalizer is removed. (The API layer orphans dependents in
  the delete transaction itself for `propagationPolicy: Orphan`; the finalizer path
  serves objects that carry `orphan` from elsewhere, as Kubernetes' legacy clients set.)

Queue keys are object uids. Owners are always checked live against the store (by uid),
never only against the cache: a new owner may not have reached this informer yet, and a
wrong "owner is gone" would delete a healthy object.
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING, Any

from kctl.machinery.errors import Conflict, NotFound
from kctl.machinery.resources import ResourceType
from kctl.client.retry import retry_on_conflict

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.garbagecollector")

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
#: kinds the collector does not track (Kubernetes' GC ignores events too)
IGNORED_KINDS = frozenset({"Event"})
UID_INDEX = "garbagecollector.uid"


def _uid_index(obj: dict) -> list[str]:
    uid = (obj.get("metadata") or {}).get("uid")
    return [uid] if uid else []


def _refs(obj: dict) -> list[dict]:
    return [r for r in (obj.get("metadata") or {}).get("ownerReferences") or () if isinstance(r, dict)]


def _finalizers(obj: dict) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or ())


class GarbageCollector:
    """Deletes dependents whose owners are gone; runs foreground and orphan finalizers."""

    name = "garbagecollector"

    def __init__(self, *, ignored_kinds: frozenset[str] = IGNORED_KINDS) -> None:
        self._ignored = ignored_kinds
        self._informers: dict[str, Any] = {}  # group_kind -> Informer
        self._types: dict[str, ResourceType] = {}

    # -- wiring ------------------------------------------------------------------------

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        for rt in list(self.api.registry):
            if rt.group_kind in self._ignored:
                continue
            informer = ctx.informers.informer(rt)
            informer.add_index(UID_INDEX, _uid_index)
            informer.add_handler(self._on_add, self._on_update, self._on_delete)
            self._informers[rt.group_kind] = informer
            self._types[rt.group_kind] = rt

    def _on_add(self, obj: dict) -> None:
        self._check(obj)

    def _on_update(self, old: dict, new: dict) -> None:
        om, nm = old.get("metadata") or {}, new.get("metadata") or {}
        if (om.get("ownerReferences") != nm.get("ownerReferences") or om.get("finalizers") != nm.get("finalizers")
                or om.get("deletionTimestamp") != nm.get("deletionTimestamp")):
            self._check(new)  # status-only writes (heartbeats, pod status) cannot change what GC decides
        kept = {r.get("uid") for r in _refs(new)}
        for ref in _refs(old):
            if ref.get("uid") not in kept:  # an owner may be waiting for this one to go
                self.queue.add(ref["uid"])

    def _on_delete(self, obj: dict) -> None:
        uid = (obj.get("metadata") or {}).get("uid")
        if uid:
            for dep in self._cached_dependents(uid):
                self.queue.add(dep["metadata"]["uid"])
        for ref in _refs(obj):
            if ref.get("uid"):
                self.queue.add(ref["uid"])

    def _check(self, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        if not meta.get("uid"):
            return
        if meta.get("ownerReferences") or (
                meta.get("deletionTimestamp") and {FOREGROUND, ORPHAN} & set(meta.get("finalizers") or ())):
            self.queue.add(meta["uid"])

    # -- reconcile ---------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        obj = self._cached(key)
        if obj is None:
            return None  # gone: nothing to collect
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            finalizers = _finalizers(obj)
            if ORPHAN in finalizers:
                return self._orphan_dependents(obj)
            if FOREGROUND in finalizers:
                return self._process_deleting_dependents(obj)
            return None  # already on its way out
        if not meta.get("ownerReferences"):
            return None
        return self._attempt_to_delete(obj)

    def _attempt_to_delete(self, obj: dict, *, retry: bool = True) -> float | None:
        """Kubernetes' attemptToDeleteItem: classify owners solid / dangling / waiting and act."""
        meta = obj["metadata"]
        solid, dangling, waiting = [], [], []
        for ref in _refs(obj):
            owner = self._live_owner(ref, meta.get("namespace"))
            if owner is None:
                dangling.append(ref)
            elif owner["metadata"].get("deletionTimestamp") and FOREGROUND in _finalizers(owner):
                waiting.append(ref)
            else:
                solid.append(ref)
        if solid:
            if dangling or waiting:
                drop = {r.get("uid") for r in dangling + waiting}
                return self._drop_owner_refs(obj, drop)
            return None
        if waiting and self._cached_dependents(meta["uid"]):
            policy = "Foreground"  # keep the chain blocking, link by link
        elif ORPHAN in _finalizers(obj):
            policy = "Orphan"
        elif FOREGROUND in _finalizers(obj):
            policy = "Foreground"
        else:
            policy = "Background"
        return self._delete(obj, policy, retry=retry)

    def _process_deleting_dependents(self, owner: dict) -> float | None:
        """An owner in foreground deletion: delete its dependents, then drop the finalizer."""
        uid = owner["metadata"]["uid"]
        blocking = 0
        for dep in self._cached_dependents(uid):
            dep_meta = dep["metadata"]
            if not dep_meta.get("deletionTimestamp") or FOREGROUND in _finalizers(dep):
                self.queue.add(dep_meta["uid"])
            if any(r.get("uid") == uid and r.get("blockOwnerDeletion") for r in _refs(dep)):
                live = self.api.get_by_uid(dep_meta["uid"])
                if live is not None and any(r.get("uid") == uid and r.get("blockOwnerDeletion")
                                            for r in _refs(live)):
                    blocking += 1
        if blocking:
            return None  # a dependent's deletion re-queues this owner
        return self._remove_finalizer(owner, FOREGROUND)

    def _orphan_dependents(self, owner: dict) -> float | None:
        uid = owner["metadata"]["uid"]
        for dep in self._cached_dependents(uid):
            requeue = self._drop_owner_refs(dep, {uid})
            if requeue is not None:
                return requeue
        return self._remove_finalizer(owner, ORPHAN)

    # -- writes ------------------------------------------------------------------------

    def _delete(self, obj: dict, policy: str, *, retry: bool) -> float | None:
        meta = obj["metadata"]
        rt = self._type_of(obj)
        if rt is None:
            return None
        try:
            self.api.delete(rt, meta["name"], namespace=meta.get("namespace"), propagation=policy,
                            resource_version=meta["resourceVersion"])
            log.info("garbage collected %s %s/%s (%s)", rt.kind, meta.get("namespace", ""), meta["name"], policy)
        except NotFound:
            return None
        except Conflict:
            if not retry:
                raise  # the work queue retries it, rate-limited
            # The cache was behind: decide once more on what the store holds now.
            live = self.api.get_by_uid(meta["uid"])
            if live is None or live["metadata"].get("deletionTimestamp") or not live["metadata"].get("ownerReferences"):
                return None
            return self._attempt_to_delete(live, retry=False)
        return None

    def _drop_owner_refs(self, obj: dict, uids: set[str]) -> float | None:
        meta = obj["metadata"]
        rt = self._type_of(obj)
        if rt is None:
            return None

        def drop() -> None:
            live = self.api.get(rt, meta["name"], namespace=meta.get("namespace"))
            if live["metadata"].get("uid") != meta["uid"]:
                return
            refs = [r for r in _refs(live) if r.get("uid") not in uids]
            if len(refs) == len(_refs(live)):
                return
            new = copy.deepcopy(live)
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            self.api.update(new)

        try:
            retry_on_conflict(drop, attempts=3)  # still conflicting: the work queue retries, rate-limited
        except NotFound:
            pass
        return None

    def _remove_finalizer(self, obj: dict, finalizer: str) -> float | None:
        meta = obj["metadata"]
        rt = self._type_of(obj)
        if rt is None:
            return None

        def remove() -> None:
            live = self.api.get(rt, meta["name"], namespace=meta.get("namespace"))
            if live["metadata"].get("uid") != meta["uid"] or finalizer not in _finalizers(live):
                return
            new = copy.deepcopy(live)
            new["metadata"]["finalizers"] = [f for f in _finalizers(live) if f != finalizer]
            if not new["metadata"]["finalizers"]:
                del new["metadata"]["finalizers"]
            self.api.update(new)

        try:
            retry_on_conflict(remove, attempts=3)  # still conflicting: the work queue retries, rate-limited
        except NotFound:
            pass
        return None

    # -- reads -------------------------------------------------------------------------

    def _cached(self, uid: str) -> dict | None:
        for informer in self._informers.values():
            found = informer.by_index(UID_INDEX, uid)
            if found:
                return found[0]
        return None

    def _cached_dependents(self, uid: str) -> list[dict]:
        deps: list[dict] = []
        for informer in self._informers.values():
            deps.extend(informer.by_index("owner", uid))
        return deps

    def _live_owner(self, ref: dict, namespace: str | None) -> dict | None:
        """The owner a reference names, read from the store; None when it is absent."""
        uid = ref.get("uid")
        if not uid:
            return None
        owner = self.api.get_by_uid(uid)
        if owner is None:
            return None
        if ref.get("kind") and owner.get("kind") != ref.get("kind"):
            return None
        owner_ns = (owner.get("metadata") or {}).get("namespace")
        if owner_ns and owner_ns != namespace:  # namespaced owners live beside their dependents
            return None
        return owner

    def _type_of(self, obj: dict) -> ResourceType | None:
        try:
            return self.api.resource_for(obj)
        except Exception:  # a kind whose CRD went away: nothing left to delete through
            return None


__all__ = ["GarbageCollector", "FOREGROUND", "ORPHAN"]
