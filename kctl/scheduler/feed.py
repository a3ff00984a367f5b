"""The scheduler's own list + watch of Nodes and Pods, for when no shared informers are given.

kctl.scheduler.scheduler.Scheduler uses it when it is built without informers (tests,
benchmarks, or a daemon without the controller manager's InformerFactory). It calls the
same handlers an informer would (on_add, on_update(old, new), on_delete), lists first,
then follows the API's watch of every kind (kctl.apiserver.contract); on Gone (the change log
was compacted past it) it lists again and reports the differences, as client-go's
reflector does.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from kctl.machinery.errors import Gone

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.scheduler.feed")


@dataclass(frozen=True)
class Handlers:
    """An informer's three callbacks for one kind."""

    on_add: Callable[[dict], None]
    on_update: Callable[[dict, dict], None]
    on_delete: Callable[[dict], None]


def _group_kind(obj: dict) -> str:
    """The store's key of an object's kind (`Pod`, `Deployment.apps`), from apiVersion and kind."""
    api_version = obj.get("apiVersion") or ""
    group = api_version.split("/")[0] if "/" in api_version else ""
    kind = obj.get("kind") or ""
    return f"{kind}.{group}" if group else kind


def _key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name", "")


class StoreFeed:
    """List + watch of the kinds in `handlers` ("Node", "Pod") into their handlers."""

    def __init__(self, api: API, handlers: dict[str, Handlers]) -> None:
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
                for change_type, obj in self.api.watch(None, since=revision, stop=stop):
                    meta = obj["metadata"]
                    revision = int(meta["resourceVersion"])  # the revision of this change
                    kind = _group_kind(obj)
                    h = self.handlers.get(kind)
                    if h is None:
                        continue
                    known = self.known[kind]
                    key = (meta.get("namespace") or "", meta.get("name", ""))
                    if change_type == "DELETED":
                        old = known.pop(key, None)
                        h.on_delete(old if old is not None else obj)
                        continue
                    old = known.get(key)
                    known[key] = obj
                    if old is None:
                        h.on_add(obj)
                    else:
                        h.on_update(old, obj)
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
