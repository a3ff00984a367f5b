"""What every controller shares: the Controller protocol, its context, and object keys.

A controller (kctl/controllers/replicaset.py, ...) is handed a `ControllerContext` and its
own work queue by the ControllerManager (kctl/controllers/manager.py). In `register` it
asks `ctx.informers` for the informers it needs and adds handlers that put keys on the
queue; the manager's workers then call `reconcile(key)`. A key is "namespace/name" for a
namespaced object and "name" for a cluster-scoped one (`key_of`, `split_key`).
`owner_key` finds the key of an object's controller owner of one kind. `Recorder`
writes Events for a controller (kctl.client.events.record, never raises); `DeferredEvents`
holds a reconcile pass's Events until the pass ends, and `DeferredEvents.flush_all()`
(called by the manager when a term ends, e.g. on SIGTERM) records those of passes that
did not finish, so no Event about a write already made is lost on a clean stop.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, ClassVar, Iterator, NewType, Protocol, runtime_checkable

from kctl.client.claim import controller_ref  # the one definition (client-go's GetControllerOf)

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.client.informer import InformerFactory
    from kctl.client.workqueue import WorkQueue

#: "namespace/name", or "name" for a cluster-scoped object
ObjectKey = NewType("ObjectKey", str)


@dataclass(frozen=True)
class ControllerSettings:
    """Settings shared by the controllers (each controller may also take its own)."""

    #: most creations or deletions one reconcile issues (client-go's burstReplicas)
    burst_replicas: int = 500
    #: seconds between informer resyncs (on_update(obj, obj) for every object); 0 = never
    resync_seconds: float = 0.0


class Recorder:
    """Records Events about objects as one component (`replicaset-controller`, ...)."""

    def __init__(self, api: API, *, component: str, host: str = "") -> None:
        self.api = api
        self.component = component
        self.host = host

    def event(self, obj: dict, type_: str, reason: str, message: str) -> None:
        """Record (or bump) an Event of `type_` "Normal"/"Warning" about obj. Never raises."""
        from kctl.client import events

        events.record(self.api, obj, type=type_, reason=reason, message=message, component=self.component,
                      host=self.host)

    def __call__(self, obj: dict, type_: str, reason: str, message: str) -> None:
        self.event(obj, type_, reason, message)


class DeferredEvents:
    """Events a reconcile records after its writes (off the critical path), per worker thread.

    A controller wraps its pass in `with events.deferred():` and calls `events.add(...)`;
    outside such a block `add` records at once. Used by the ReplicaSet, Job and CronJob
    controllers, whose Events would otherwise sit between a create and the status write.
    `flush()` records, from any thread, what passes still running have deferred.
    """

    #: every instance, so that a stopping manager can flush them all
    _instances: ClassVar["weakref.WeakSet[DeferredEvents]"] = weakref.WeakSet()

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        #: the pending list of each pass now running (thread ident -> list)
        self._running: dict[int, list[tuple[dict, str, str, str]]] = {}
        self.recorder: Recorder | None = None
        DeferredEvents._instances.add(self)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        pending: list[tuple[dict, str, str, str]] = []
        ident = threading.get_ident()
        self._local.pending = pending
        with self._lock:
            self._running[ident] = pending
        try:
            yield
        finally:
            self._local.pending = None
            with self._lock:
                self._running.pop(ident, None)
                taken, pending[:] = list(pending), []
            for args in taken:
                self._record(*args)

    def add(self, obj: dict, type_: str, reason: str, message: str) -> None:
        pending = getattr(self._local, "pending", None)
        if pending is not None:
            with self._lock:
                pending.append((obj, type_, reason, message))
        else:
            self._record(obj, type_, reason, message)

    def flush(self) -> int:
        """Record now every Event deferred by passes still running; how many were recorded."""
        with self._lock:
            taken = [args for pending in self._running.values() for args in pending]
            for pending in self._running.values():
                pending.clear()
        for args in taken:
            self._record(*args)
        return len(taken)

    @classmethod
    def flush_all(cls) -> int:
        """flush() every DeferredEvents of this process (a manager's term is ending)."""
        return sum(events.flush() for events in list(cls._instances))

    def _record(self, obj: dict, type_: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.event(obj, type_, reason, message)  # never raises


@dataclass(frozen=True)
class ControllerContext:
    """What a controller is given at `register`: the API, shared informers, events, a clock."""

    api: API
    informers: "InformerFactory"
    recorder: Recorder
    clock: Callable[[], float] = time.time
    settings: ControllerSettings = field(default_factory=ControllerSettings)


@runtime_checkable
class Controller(Protocol):
    """A level-triggered reconciler run by the ControllerManager.

    `register` adds informer handlers that put keys on `queue` (and may keep ctx and
    queue); `reconcile` re-reads the object by key from the informer cache, acts on the
    difference between desired and observed, and returns seconds after which to look
    again, or None. Raising makes the manager retry the key with back-off.
    """

    name: str

    def register(self, ctx: ControllerContext, queue: "WorkQueue[str]") -> None: ...

    def reconcile(self, key: str) -> float | None: ...


def clock_now(clock: Callable[[], object] | None) -> dt.datetime:
    """The controller clock's now (ControllerContext.clock: epoch seconds) as an aware datetime."""
    value = clock() if callable(clock) else None
    if value is None:
        return dt.datetime.now(dt.timezone.utc)
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    return dt.datetime.fromtimestamp(float(value), dt.timezone.utc)


def key_of(obj: dict) -> str:
    """The queue key of an object: "namespace/name", or "name" when it has no namespace."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    return f"{namespace}/{meta['name']}" if namespace else meta["name"]


def split_key(key: str) -> tuple[str, str]:
    """(namespace, name) of a key; namespace is "" for a cluster-scoped key."""
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else ("", namespace)


def owner_key(obj: dict, kind: str) -> str | None:
    """The key of obj's controller owner when that owner is a `kind` (owners share obj's namespace)."""
    ref = controller_ref(obj)
    if ref is None or ref.get("kind") != kind or not ref.get("name"):
        return None
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    return f"{namespace}/{ref['name']}" if namespace else ref["name"]


__all__ = ["Controller", "ControllerContext", "ControllerSettings", "DeferredEvents", "ObjectKey", "Recorder",
           "clock_now", "controller_ref", "key_of", "owner_key", "split_key"]
