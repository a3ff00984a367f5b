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
`handle_reconcile_error` is what the manager does when a reconcile raises (client-go's
handleErr): a temporary error (kctl.client.errors) re-queues the key rate-limited; a
permanent one records a Warning Event on the object and looks at the key again only after
`ControllerSettings.permanent_error_retry_seconds` (or when the object changes).
"""

from __future__ import annotations

import datetime as dt
import logging
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

log = logging.getLogger("kctl.controllers")

#: "namespace/name", or "name" for a cluster-scoped object
ObjectKey = NewType("ObjectKey", str)


@dataclass(frozen=True)
class ControllerSettings:
    """Settings shared by the controllers (each controller may also take its own)."""

    #: most creations or deletions one reconcile issues (client-go's burstReplicas)
    burst_replicas: int = 500
    #: seconds between informer resyncs (on_update(obj, obj) for every object); 0 = never
    resync_seconds: float = 0.0
    #: seconds before a key whose reconcile failed permanently runs again (unless its object changes first)
    permanent_error_retry_seconds: float = 300.0


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

    def events(self, items: list[tuple[dict, str, str, str]]) -> None:
        """Record many (obj, type, reason, message) Events, the new ones in one transaction. Never raises."""
        from kctl.client import events

        events.record_all(self.api, [events.EventRequest(obj, type_, reason, message, self.component, host=self.host)
                                     for obj, type_, reason, message in items])


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
            self._record_all(taken)

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
        self._record_all(taken)
        return len(taken)

    @classmethod
    def flush_all(cls) -> int:
        """flush() every DeferredEvents of this process (a manager's term is ending)."""
        return sum(events.flush() for events in list(cls._instances))

    def _record(self, obj: dict, type_: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.event(obj, type_, reason, message)  # never raises

    def _record_all(self, taken: list[tuple[dict, str, str, str]]) -> None:
        """A pass's Events in one transaction (one fsync, not one per Event: they sat on the critical path)."""
        if self.recorder is None or not taken:
            return
        batch = getattr(self.recorder, "events", None)
        if callable(batch) and len(taken) > 1:
            batch(taken)  # never raises
        else:
            for args in taken:
                self.recorder.event(*args)


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
    again, or None. Raising makes the manager retry the key: with back-off when the error
    is temporary, after a long wait and with a Warning Event when it is permanent
    (`handle_reconcile_error`). A controller may also have `object_for(key) -> dict | None`,
    the object the key names, which that Event is recorded on.
    """

    name: str

    def register(self, ctx: ControllerContext, queue: "WorkQueue[str]") -> None: ...

    def reconcile(self, key: str) -> float | None: ...


def handle_reconcile_error(controller: Controller, queue: "WorkQueue[str]", key: str, exc: BaseException, *,
                           api: API, settings: ControllerSettings = ControllerSettings()) -> bool:
    """What follows a reconcile that raised `exc` (client-go's handleErr); True when it was temporary.

    Temporary (kctl.client.errors.is_temporary): one log line and the key re-queued after
    its back-off (or the TemporaryError's delay). Permanent: one log line, a Warning Event
    on the object (the PermanentError's, else `controller.object_for(key)`), the key's
    back-off forgotten and the key looked at again only after
    `settings.permanent_error_retry_seconds`, so it is not retried hot; a change of the
    object queues it at once, as always.
    """
    from kctl.client import errors

    message = errors.one_line(exc)
    if errors.is_temporary(exc):
        log.warning("controller %s: reconcile %s failed (retry %d): %s: %s", controller.name, key,
                    queue.num_requeues(key) + 1, type(exc).__name__, message)
        log.debug("controller %s: reconcile %s traceback", controller.name, key, exc_info=exc)
        delay = errors.retry_delay(exc)
        if delay is None:
            queue.add_rate_limited(key)
        else:
            queue.add_after(key, delay)
        return True
    wait = settings.permanent_error_retry_seconds
    log.warning("controller %s: reconcile %s failed, not retried for %.0f s unless it changes: %s: %s",
                controller.name, key, wait, type(exc).__name__, message)
    obj = _object_of(controller, key, exc)
    if obj is not None:
        Recorder(api, component=f"{controller.name}-controller").event(obj, "Warning", errors.event_reason(exc),
                                                                        message)
    queue.forget(key)
    queue.add_after(key, wait)
    return False


def _object_of(controller: Controller, key: str, exc: BaseException) -> dict | None:
    """The object a permanent failure is recorded on: the error's own, else the controller's for key."""
    obj = getattr(exc, "obj", None)
    if isinstance(obj, dict):
        return obj
    object_for = getattr(controller, "object_for", None)
    if not callable(object_for):
        return None
    try:
        found = object_for(key)
    except Exception:  # noqa: BLE001 - a failing lookup only costs the Event
        log.debug("controller %s: object_for(%s) failed", controller.name, key, exc_info=True)
        return None
    return found if isinstance(found, dict) else None


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
           "clock_now", "controller_ref", "handle_reconcile_error", "key_of", "owner_key", "split_key"]
