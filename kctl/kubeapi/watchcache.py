"""One reader of kctl's change log per kind, fanned out to every HTTPS watch of it (kube-apiserver's cacher, cut down).

kctl.kubeapi.watch calls `subscribe(ctx, rt, ...)` for each watch request and reads the returned
`Watcher`'s queue on the event loop. Per kind (group and kind: every version of it shares one) a
`Broadcaster` runs one thread that follows `API.watch(rt, since=...)` from the newest revision;
each change is decoded once by the store and handed, as one shared `Event`, to every watcher,
which filters it by namespace, label and field selector as `API.watch` does (an object that stops
matching is DELETED for that watcher, one that starts matching is ADDED). An `Event` also keeps
the JSON line of each (type, version) it was written as, so 100 watchers encode a change once.

- A watcher from a revision the broadcaster has already passed first gets the changes in between
  from the API (one read on the pool: `API.watch(..., timeout=0)`), then the live ones it held
  meanwhile: every change once, in order; a compacted revision is an ERROR event with the 410
  Expired Status, as before.
- Each watcher's queue is bounded (WATCHER_QUEUE); a watcher that falls that far behind is ended,
  as kube-apiserver ends an unresponsive watcher (the client watches again from its last revision);
  the others go on.
- A broadcaster stops LINGER seconds after its last watcher left, when the server stops
  (ServerContext.stopping), or when its read fails (its watchers get the ERROR event).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import TYPE_CHECKING, Any, Callable

from kctl.kubeapi import status
from kctl.machinery.errors import APIError

if TYPE_CHECKING:
    from kctl.kubeapi.app import ServerContext
    from kctl.machinery.resources import ResourceType

log = logging.getLogger("kctl.kubeapi")

#: events a watcher may have queued before it is ended as too slow
WATCHER_QUEUE = 10_000
#: seconds a broadcaster keeps reading after its last watcher left (a client re-watching finds it running)
LINGER = 60.0
#: what a watcher's queue yields when its watch is over
END: Any = object()


def _revision(obj: dict) -> int:
    rv = (obj.get("metadata") or {}).get("resourceVersion") if isinstance(obj, dict) else None
    return int(rv) if rv is not None and str(rv).isdigit() else 0


class Event:
    """One change as the store decoded it, shared by every watcher (never modify `obj`)."""

    __slots__ = ("type", "obj", "revision", "_lines")

    def __init__(self, event_type: str, obj: dict) -> None:
        self.type, self.obj, self.revision = event_type, obj, _revision(obj)
        self._lines: dict[tuple[str, str | None], bytes] = {}

    def line(self, event_type: str, *, version: str | None = None,
             convert: Callable[[dict], dict] | None = None) -> bytes:
        """The watch line `{"type": event_type, "object": obj}` (obj converted to `version`), encoded once."""
        key = (event_type, version)
        line = self._lines.get(key)
        if line is None:
            obj = convert(self.obj) if convert is not None else self.obj
            line = json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"
            self._lines[key] = line
        return line


class Watcher:
    """One watch's view of a broadcaster: its filters and its bounded queue of (type, obj, Event | None) or END."""

    def __init__(self, *, namespace: str | None, since: int, label_selector: Any = None, field_selector: Any = None,
                 known: set | None = None, capacity: int = WATCHER_QUEUE) -> None:
        self.namespace, self.since = namespace, since
        self.label_selector, self.field_selector = label_selector, field_selector
        self.filtered = label_selector is not None or field_selector is not None
        self.matching = set(known or ())
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=capacity)
        self.done = False
        self.overflowed = False
        #: while the changes before the broadcaster's position are read: the live events that came meanwhile
        self.held: list[Event] | None = None
        self.broadcaster: Broadcaster | None = None

    def _selected(self, obj: dict) -> bool:
        if self.label_selector is not None and not self.label_selector.matches(
                (obj.get("metadata") or {}).get("labels") or {}):
            return False
        return self.field_selector is None or self.field_selector.matches(obj)

    def offer(self, event: Event) -> None:
        """Queue the event if it is this watcher's (as API.watch filters); end the watch if the queue is full."""
        if self.done:
            return
        if self.held is not None:
            self.held.append(event)
            return
        if event.revision and event.revision <= self.since:
            return
        obj = event.obj
        meta = obj.get("metadata") or {}
        if self.namespace is not None and (meta.get("namespace") or "") != self.namespace:
            return
        event_type = event.type
        if self.filtered:
            key = (meta.get("namespace") or "", meta.get("name") or "")
            if event_type != "DELETED" and self._selected(obj):
                event_type = "MODIFIED" if key in self.matching else "ADDED"
                self.matching.add(key)
            elif key in self.matching:
                self.matching.discard(key)
                event_type = "DELETED"
            else:
                return
        try:
            self.queue.put_nowait((event_type, obj, event))
        except asyncio.QueueFull:  # too slow: end it, as kube-apiserver does; the client watches again
            self.overflowed = True
            self.finish()

    def fail(self, error: dict) -> None:
        """End the watch with an ERROR event holding this Status."""
        if self.done:
            return
        try:
            self.queue.put_nowait(("ERROR", error, None))
        except asyncio.QueueFull:
            pass
        self.finish()

    def finish(self) -> None:
        """No more events; the consumer drains what is queued, then reads END."""
        if not self.done:
            self.done = True
            try:
                self.queue.put_nowait(END)
            except asyncio.QueueFull:
                pass

    async def get(self, timeout: float) -> Any:
        """The next queued item, or END; asyncio.TimeoutError after `timeout` seconds without one."""
        if self.done and self.queue.empty():
            return END
        return await asyncio.wait_for(self.queue.get(), timeout=timeout)

    def close(self) -> None:
        """The watch is over (the client left, its timeout, the server stopping): leave the broadcaster."""
        self.done = True
        if self.broadcaster is not None:
            self.broadcaster.remove(self)


class _Stop(threading.Event):
    """Set by the broadcaster, or through the server's `stopping` event."""

    def __init__(self, also: threading.Event) -> None:
        super().__init__()
        self._also = also

    def is_set(self) -> bool:
        return super().is_set() or self._also.is_set()


class Broadcaster:
    """One thread reading one kind's changes from the API, handing each to the watchers on the event loop."""

    def __init__(self, ctx: ServerContext, rt: ResourceType, loop: asyncio.AbstractEventLoop, *,
                 linger: float = LINGER, on_stop: Callable[[Broadcaster], None] | None = None) -> None:
        self.ctx, self.rt, self.loop, self.linger, self.on_stop = ctx, rt, loop, linger, on_stop
        self.watchers: set[Watcher] = set()
        self.position = 0
        self.stopped = False
        self.stop_event = _Stop(ctx.stopping)
        self.thread: threading.Thread | None = None
        self._idle: asyncio.TimerHandle | None = None

    # -- the reader thread --------------------------------------------------------------------------------
    def start(self, revision: int) -> None:
        """Read the changes after `revision` (the newest one when the first watcher came)."""
        self.position = revision
        self.thread = threading.Thread(target=self._run, args=(revision,), name=f"kubeapi-watchcache:{self.rt.plural}",
                                       daemon=True)
        self.thread.start()

    def _post(self, fn: Callable[..., None], *args: Any) -> bool:
        try:
            self.loop.call_soon_threadsafe(fn, *args)
            return True
        except RuntimeError:  # the loop closed: the server stopped
            self.stop_event.set()
            return False

    def _run(self, revision: int) -> None:
        error: dict | None = None
        try:
            for event_type, obj in self.ctx.api.watch(self.rt, since=revision, stop=self.stop_event):
                if self.stop_event.is_set() or not self._post(self._dispatch, Event(event_type, obj)):
                    break
        except APIError as exc:
            error = status.status_of(exc)
        except Exception as exc:  # noqa: BLE001 - the watches end with an error event, the server goes on
            log.exception("the watch cache of %s failed", self.rt.plural)
            error = status.unknown_error(exc)
        finally:
            if not self._post(self._ended, error) and self.on_stop is not None:  # no loop: forget it from here
                self.on_stop(self)

    # -- on the event loop ----------------------------------------------------------------------------------
    def _dispatch(self, event: Event) -> None:
        if self.stopped:
            return
        self.position = max(self.position, event.revision)
        for watcher in list(self.watchers):
            watcher.offer(event)

    def _ended(self, error: dict | None) -> None:
        self._shut()
        for watcher in list(self.watchers):
            if error is not None:
                watcher.fail(error)
            else:
                watcher.finish()
        self.watchers.clear()

    def _shut(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.stop_event.set()
            if self._idle is not None:
                self._idle.cancel()
            if self.on_stop is not None:
                self.on_stop(self)

    def add(self, watcher: Watcher) -> None:
        """Hand every later change to this watcher."""
        watcher.broadcaster = self
        self.watchers.add(watcher)
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def remove(self, watcher: Watcher) -> None:
        """The watcher left; the last one leaving starts the idle countdown."""
        self.watchers.discard(watcher)
        if not self.watchers and not self.stopped:
            if self.linger <= 0:
                self._shut()
            elif self._idle is None:
                self._idle = self.loop.call_later(self.linger, self._idle_check)

    def _idle_check(self) -> None:
        self._idle = None
        if not self.watchers:
            self._shut()


class WatchCache:
    """The broadcasters of one server (one per kind), made on demand."""

    def __init__(self, ctx: ServerContext, *, linger: float = LINGER) -> None:
        self.ctx, self.linger = ctx, linger
        self.broadcasters: dict[tuple[int, str], Broadcaster] = {}
        self._lock = threading.Lock()

    def _forget(self, broadcaster: Broadcaster) -> None:
        with self._lock:
            key = (id(broadcaster.loop), broadcaster.rt.group_kind)
            if self.broadcasters.get(key) is broadcaster:
                del self.broadcasters[key]

    async def broadcaster(self, rt: ResourceType) -> Broadcaster:
        """The running broadcaster of rt's kind on this loop (started at the newest revision if there was none)."""
        loop = asyncio.get_running_loop()
        key = (id(loop), rt.group_kind)
        with self._lock:
            found = self.broadcasters.get(key)
        if found is not None and not found.stopped:
            return found
        revision = await self.ctx.run(self.ctx.api.revision)
        with self._lock:  # another watch may have started one meanwhile (this loop ran other tasks)
            found = self.broadcasters.get(key)
            if found is not None and not found.stopped:
                return found
            made = Broadcaster(self.ctx, rt, loop, linger=self.linger, on_stop=self._forget)
            self.broadcasters[key] = made
        made.start(revision)
        return made

    async def subscribe(self, rt: ResourceType, *, namespace: str | None, since: int, label_selector: Any = None,
                        field_selector: Any = None, known: set | None = None,
                        capacity: int = WATCHER_QUEUE) -> Watcher:
        """A watcher of rt's changes after `since` that match (the semantics of API.watch)."""
        broadcaster = await self.broadcaster(rt)
        ns = namespace if rt.namespaced else None
        watcher = Watcher(namespace=ns, since=since, label_selector=label_selector, field_selector=field_selector,
                          known=known, capacity=capacity)
        position = broadcaster.position
        if since >= position:
            broadcaster.add(watcher)
            return watcher
        watcher.held = []  # the broadcaster is ahead: read (since, position] from the API, then the held events
        broadcaster.add(watcher)
        try:
            gap = await self.ctx.run(_read_gap, self.ctx, rt, since, position)
        except APIError as exc:
            watcher.held = None
            watcher.fail(status.status_of(exc))
            return watcher
        except Exception as exc:  # noqa: BLE001 - this watch ends with an error event
            log.exception("a watch of %s could not catch up", rt.plural)
            watcher.held = None
            watcher.fail(status.unknown_error(exc))
            return watcher
        held, watcher.held = watcher.held, None
        for event in gap:
            watcher.offer(event)
        for event in held:
            if event.revision > position or not event.revision:
                watcher.offer(event)
        return watcher


def _read_gap(ctx: ServerContext, rt: ResourceType, since: int, until: int) -> list[Event]:
    """rt's changes in (since, until], read from the API (Gone if `since` is compacted)."""
    events: list[Event] = []
    if until <= since:
        return events
    changes = ctx.api.watch(rt, since=since, timeout=0)
    try:
        for event_type, obj in changes:
            event = Event(event_type, obj)
            if event.revision > until:
                break
            events.append(event)
    finally:
        close = getattr(changes, "close", None)
        if close is not None:
            close()
    return events


_caches: dict[int, WatchCache] = {}
_caches_lock = threading.Lock()


def cache_of(ctx: ServerContext) -> WatchCache:
    """The watch cache of this server context (made on first use)."""
    with _caches_lock:
        for key in [key for key, cache in _caches.items() if cache.ctx.stopping.is_set()]:
            del _caches[key]  # stopped servers' (their readers end by themselves)
        cache = _caches.get(id(ctx))
        if cache is None or cache.ctx is not ctx:
            cache = _caches[id(ctx)] = WatchCache(ctx)
        return cache


async def subscribe(ctx: ServerContext, rt: ResourceType, *, namespace: str | None, since: int,
                    label_selector: Any = None, field_selector: Any = None, known: set | None = None) -> Watcher:
    """A watcher of rt's changes after `since` from this server's watch cache (see the module docstring)."""
    return await cache_of(ctx).subscribe(rt, namespace=namespace, since=since, label_selector=label_selector,
                                         field_selector=field_selector, known=known)


__all__ = ["END", "Event", "LINGER", "WATCHER_QUEUE", "Broadcaster", "WatchCache", "Watcher", "cache_of",
           "subscribe"]
