"""The scheduler's own list + watch of Nodes and Pods, for when no shared informers are given.

kctl.scheduler.scheduler.Scheduler uses it when it is built without informers (tests,
benchmarks, or a daemon without the controller manager's InformerFactory). It calls the
same handlers an informer would (on_add, on_update(old, new), on_delete), lists first,
then follows the store's change log; on Gone (the change log was compacted past it) it
lists again and reports the differences, as client-go's reflector does.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from kctl.api.errors import Gone

if TYPE_CHECKING:
    from kctl.api.apiserver import APIServer

log = logging.getLogger("kctl.scheduler.feed")


@dataclass(frozen=True)
class Handlers:
    """An informer's three callbacks for one kind."""

    on_add: Callable[[dict], None]
    on_update: Callable[[dict, dict], None]
    on_delete: Callable[[dict], None]


def _key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name", "")


class StoreFeed:
    """List + watch of the kinds in `handlers` ("Node", "Pod") into their handlers."""

    def __init__(self, api: APIServer, handlers: dict[str, Handlers]) -> None:
        self.api = api
        self.handlers = handlers
        self.known: dict[str, dict[tuple[str, str], dict]] = {kind: {} for kind in handlers}
        self.synced = threading.Event()

    def relist(self) -> int:
        """List every kind (nodes first), report what changed since the last list; the revision."""
        revision = 0
        for kind, h in self.handlers.items():
            items, rev = self.api.list(self.api.resource(kind.lower() + "s"))
            revision = rev if not revision else min(revision, rev)
            seen = {}
            known = self.known[kind]
            for obj in items:
                key = _key(obj)
                seen[key] = obj
                old = known.get(key)
                if old is None:
                    h.on_add(obj)
                elif old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                    h.on_update(old, obj)
            for key, old in known.items():
                if key not in seen:
                    h.on_delete(old)
            self.known[kind] = seen
        return revision

    def run(self, stop: threading.Event) -> None:
        revision = self.relist()
        self.synced.set()
        while not stop.is_set():
            try:
                for change in self.api.store.watch(revision, stop=stop):
                    revision = change.revision
                    h = self.handlers.get(change.kind)
                    if h is None:
                        continue
                    known = self.known[change.kind]
                    key = (change.namespace, change.name)
                    if change.type == "DELETED":
                        old = known.pop(key, None)
                        h.on_delete(old if old is not None else change.obj)
                        continue
                    old = known.get(key)
                    known[key] = change.obj
                    if old is None:
                        h.on_add(change.obj)
                    else:
                        h.on_update(old, change.obj)
            except Gone:
                log.info("scheduler watch fell behind the change log: listing again")
                revision = self.relist()
            except Exception:
                if stop.is_set():
                    return
                log.exception("scheduler watch failed; listing again")
                stop.wait(1.0)
                revision = self.relist()


__all__ = ["Handlers", "StoreFeed"]
