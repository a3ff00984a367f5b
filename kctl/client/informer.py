"""client-go's shared informer: one resource listed and watched into an indexed cache.

Controllers (kctl/controllers/*) get their informers from the `InformerFactory` the
ControllerManager hands them in their context, so every controller that needs pods
shares one pod cache and one store watch; the scheduler (kctl/scheduler) registers on
the same factory's nodes and pods informers (or makes a factory of its own), and the node
agents use it too. An `Informer`:

- lists the resource through the APIServer, then watches from the list's revision; on
  Gone (the change log was compacted past it) it lists again, and on any other watch
  error it lists again after an exponential back-off. A re-list is diffed against the
  cache, so handlers see only what really changed (adds, updates, deletes);
- calls each handler's `on_add(obj)`, `on_update(old, new)`, `on_delete(obj)` in
  registration order, from its own thread, after the cache already holds the change;
  a handler added after start is first given `on_add` for every cached object;
- keeps indexes: "namespace", "owner" (ownerReferences[].uid), "node" (spec.nodeName)
  and any added with `add_index(name, fn)`; an event costs O(number of indexes);
- optionally re-delivers `on_update(obj, obj)` for every object every `resync` seconds;
- optionally holds only the objects a `label_selector` and/or `field_selector` select
  (client-go's filtered informer, `WithTweakListOptions`): both go to the API's list and
  watch, which filter server-side; an object that stops matching is DELETED for this
  informer (and one that starts matching ADDED), as a selector-filtered watch reports it.
  `InformerFactory.informer("pods", field_selector="spec.nodeName=h1")` shares one such
  informer per (resource, selectors);
- reports each event's trip to observers added with `observe(fn)`, for latency metrics:
  `fn(Delivery)` after the handlers ran, with `time.monotonic()` stamps of when the watch
  (or list) handed the change over, when the first handler was called and when the last
  returned. Event -> reconcile latency is then `reconcile start - delivery.received`
  (the store's commit time is not carried by a change; in one process the watch wakes
  at once on a commit, so `received` trails it by the informer's backlog only; the
  Delivery's `revision` joins it to a caller's own record of when it wrote that revision).
  The local API's watch of one kind decodes only that kind's changes (Store.watch(kind=)).

**Objects in the cache are shared** with every other reader: never change one; take a
`copy.deepcopy` first and write the copy through the API.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from kctl.machinery.errors import Gone

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.machinery.resources import ResourceType
    from kctl.machinery.selectors import FieldSelector, LabelSelector

log = logging.getLogger("kctl.client.informer")

IndexFunc = Callable[[dict], Iterable[str]]
AddHandler = Callable[[dict], None]
UpdateHandler = Callable[[dict, dict], None]
DeleteHandler = Callable[[dict], None]
_Key = tuple[str, str]  # (namespace or "", name)
_Event = tuple[str, "dict | None", dict]  # (ADDED | MODIFIED | DELETED, old object or None, object)

#: re-list back-off after a failed list or watch: first and largest delay (seconds)
RETRY_BASE_SECONDS = 0.2
RETRY_CAP_SECONDS = 30.0


# -- built-in indexes ------------------------------------------------------------------------

def namespace_index(obj: dict) -> list[str]:
    namespace = (obj.get("metadata") or {}).get("namespace")
    return [namespace] if namespace else []


def owner_index(obj: dict) -> list[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return [r["uid"] for r in refs if isinstance(r, dict) and r.get("uid")]


def node_index(obj: dict) -> list[str]:
    node = (obj.get("spec") or {}).get("nodeName") if isinstance(obj.get("spec"), dict) else None
    return [node] if isinstance(node, str) and node else []


BUILTIN_INDEXES: dict[str, IndexFunc] = {"namespace": namespace_index, "owner": owner_index, "node": node_index}


def _key(obj: dict) -> _Key:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def _revision(obj: dict) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def as_label_selector(selector: object) -> "LabelSelector | None":
    """A LabelSelector from what callers hold: a LabelSelector, `-l` text, a metav1.LabelSelector
    object ({"matchLabels": ..., "matchExpressions": ...}) or a plain {label: value} map."""
    from kctl.machinery.selectors import LabelSelector, from_label_selector_object, parse_label_selector

    if selector is None or isinstance(selector, LabelSelector):
        return selector
    if isinstance(selector, str):
        return parse_label_selector(selector)
    if isinstance(selector, dict):
        if selector and set(selector) <= {"matchLabels", "matchExpressions"}:
            return from_label_selector_object(selector)
        return from_label_selector_object({"matchLabels": selector})
    raise TypeError(f"not a label selector: {selector!r}")


def as_field_selector(selector: object, *, kind: str | None = None) -> "FieldSelector | None":
    """A FieldSelector from a FieldSelector or `--field-selector` text (parsed for `kind`'s
    field labels; BadRequest if invalid); None for None or an empty selector."""
    from kctl.machinery.selectors import FieldSelector, parse_field_selector

    if selector is None:
        return None
    if isinstance(selector, str):
        selector = parse_field_selector(selector, kind=kind)
    if not isinstance(selector, FieldSelector):
        raise TypeError(f"not a field selector: {selector!r}")
    return None if selector.is_empty else selector


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event's trip through an informer (given to `Informer.observe` observers).

    Times are `time.monotonic()`: `received` when the watch (or a list) handed the change
    to the informer, `dispatched` when the first handler was called, `done` when the last
    one returned.
    """

    type: str  # ADDED | MODIFIED | DELETED
    namespace: str
    name: str
    revision: int
    received: float
    dispatched: float
    done: float


Observer = Callable[[Delivery], None]


class _Handler:
    __slots__ = ("on_add", "on_update", "on_delete")

    def __init__(self, on_add: AddHandler | None, on_update: UpdateHandler | None,
                 on_delete: DeleteHandler | None) -> None:
        self.on_add, self.on_update, self.on_delete = on_add, on_update, on_delete


class Informer:
    """List + watch of one resource into an indexed cache, with event handlers (see module doc)."""

    def __init__(self, api: API, resource: "ResourceType | str", *, resync: float = 0.0,
                 retry_base: float = RETRY_BASE_SECONDS, retry_cap: float = RETRY_CAP_SECONDS,
                 label_selector: object = None, field_selector: object = None) -> None:
        self.api = api
        self.rt = api.resource(resource) if isinstance(resource, str) else resource
        #: only objects these select are listed, watched and cached (None: all)
        label = as_label_selector(label_selector)
        self.label_selector = None if label is None or label.is_empty else label
        self.field_selector = as_field_selector(field_selector, kind=self.rt.kind)
        self.resync = resync
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        #: the revision of the last list or event applied to the cache
        self.revision = 0
        #: how many times the resource was listed (1 + re-lists); for tests and metrics
        self.lists = 0
        self._lock = threading.RLock()  # cache and indexes
        self._dispatch = threading.RLock()  # handler calls (and handler registration)
        self._items: dict[_Key, dict] = {}
        self._indexers: dict[str, IndexFunc] = dict(BUILTIN_INDEXES)
        self._indices: dict[str, dict[str, dict[_Key, None]]] = {name: {} for name in self._indexers}
        self._indexed: dict[str, dict[_Key, tuple[str, ...]]] = {name: {} for name in self._indexers}
        self._handlers: list[_Handler] = []
        self._observers: list[Observer] = []
        #: events delivered to the handlers (re-list differences included, resyncs not)
        self.delivered = 0
        self._synced = threading.Event()
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        selectors = ", ".join(f"{what}={sel}" for what, sel in (("labels", self.label_selector),
                                                                   ("fields", self.field_selector)) if sel)
        return (f"Informer({self.rt.group_resource}{', ' + selectors if selectors else ''}, "
                f"{len(self._items)} cached, rev {self.revision})")

    # -- registration --------------------------------------------------------------------

    def add_handler(self, on_add: AddHandler | None = None, on_update: UpdateHandler | None = None,
                    on_delete: DeleteHandler | None = None) -> None:
        """Call these on every change, in registration order; late handlers first get on_add for all."""
        handler = _Handler(on_add, on_update, on_delete)
        with self._dispatch:
            with self._lock:
                existing = list(self._items.values())
                self._handlers.append(handler)
            if on_add is not None:
                for obj in existing:
                    self._call(on_add, obj)

    def observe(self, fn: Observer) -> None:
        """Call `fn(Delivery)` after the handlers ran for each event (see Delivery; for latency metrics).

        It runs on the informer's thread, so it must be quick (append to a list, bump a
        histogram); an observer that raises is logged and skipped.
        """
        with self._dispatch:
            self._observers.append(fn)

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Index the cache by `fn(obj)` (a list of strings); query it with `by_index(name, value)`."""
        with self._lock:
            if name in self._indexers:
                if self._indexers[name] is fn:
                    return
                raise ValueError(f"informer {self.rt.group_resource}: index {name!r} already exists")
            self._indexers[name] = fn
            self._indices[name] = {}
            self._indexed[name] = {}
            for key, obj in self._items.items():
                self._index_one(name, key, obj)

    # -- reading the cache ---------------------------------------------------------------

    def get(self, namespace: str | None, name: str) -> dict | None:
        """The cached object (shared: do not modify), or None. namespace "" or None if cluster-scoped."""
        with self._lock:
            return self._items.get(((namespace or "") if self.rt.namespaced else "", name))

    def get_by_key(self, key: str) -> dict | None:
        """The cached object of a queue key ("namespace/name" or "name"), or None."""
        namespace, sep, name = key.partition("/")
        return self.get(namespace, name) if sep else self.get("", namespace)

    def list(self, namespace: str | None = None, *, selector: object = None) -> list[dict]:
        """Cached objects (shared: do not modify), of one namespace or all, matching the labels."""
        label_selector = as_label_selector(selector)
        with self._lock:
            if namespace and self.rt.namespaced:
                keys = self._indices["namespace"].get(namespace, {})
                items = [self._items[k] for k in keys]
            else:
                items = list(self._items.values())
        if label_selector is not None:
            items = [o for o in items if label_selector.matches((o.get("metadata") or {}).get("labels"))]
        return items

    def by_index(self, name: str, value: str) -> list[dict]:
        """Cached objects whose index `name` holds `value` (shared: do not modify)."""
        with self._lock:
            index = self._indices.get(name)
            if index is None:
                raise KeyError(f"informer {self.rt.group_resource}: no index {name!r}")
            return [self._items[k] for k in index.get(value, ())]

    def index_values(self, name: str) -> list[str]:
        """Every value index `name` currently holds."""
        with self._lock:
            return list(self._indices[name])

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    # -- running -------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """True once the first list is in the cache and its on_add calls are done."""
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, stop: threading.Event) -> threading.Thread:
        """Run list + watch in a daemon thread until `stop` is set (a second call is a no-op)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.run, args=(stop,), daemon=True,
                                            name=f"informer-{self.rt.group_resource}")
            self._thread.start()
        return self._thread

    def run(self, stop: threading.Event) -> None:
        """List, then watch; re-list on Gone at once and on other errors after a back-off."""
        failures = 0
        next_resync = time.monotonic() + self.resync if self.resync > 0 else None
        need_list = True
        while not stop.is_set():
            try:
                filtered = self.label_selector is not None or self.field_selector is not None
                if need_list:
                    if filtered:
                        items, rev = self.api.list(self.rt, label_selector=self.label_selector,
                                                   field_selector=self.field_selector)
                    else:
                        items, rev = self.api.list(self.rt)
                    self.lists += 1
                    self._replace(items, rev)
                    need_list = False
                    failures = 0
                timeout = max(0.0, next_resync - time.monotonic()) if next_resync is not None else None
                if filtered:  # the server reports an object that stops matching as DELETED
                    with self._lock:
                        known = set(self._items)
                    changes = self.api.watch(self.rt, since=self.revision, stop=stop, timeout=timeout,
                                             label_selector=self.label_selector,
                                             field_selector=self.field_selector, known=known)
                else:
                    changes = self.api.watch(self.rt, since=self.revision, stop=stop, timeout=timeout)
                for type_, obj in changes:
                    self._apply(type_, obj)
                    if next_resync is not None and time.monotonic() >= next_resync:
                        break
                    if stop.is_set():
                        break
                if next_resync is not None and time.monotonic() >= next_resync:
                    self._resync()
                    next_resync = time.monotonic() + self.resync
            except Gone as exc:
                log.info("informer %s: %s; listing again", self.rt.group_resource, exc)
                need_list = True
            except Exception as exc:  # a broken store connection, a bad row: back off, re-list
                delay = min(self.retry_cap, self.retry_base * (2 ** min(failures, 16)))
                failures += 1
                log.warning("informer %s: watch failed (%s); listing again in %.1fs", self.rt.group_resource,
                            exc, delay)
                need_list = True
                stop.wait(delay)

    # -- applying changes ----------------------------------------------------------------

    def _replace(self, items: list[dict], rev: int) -> None:
        """Make the cache equal a fresh list; dispatch only the differences."""
        received = time.monotonic()
        events: list[_Event] = []
        with self._lock:
            seen: set[_Key] = set()
            for obj in items:
                key = _key(obj)
                seen.add(key)
                old = self._items.get(key)
                if old is None:
                    self._store(key, obj)
                    events.append(("ADDED", None, obj))
                elif old.get("metadata", {}).get("resourceVersion") != obj.get("metadata", {}).get("resourceVersion"):
                    self._store(key, obj)
                    events.append(("MODIFIED", old, obj))
            for key in [k for k in self._items if k not in seen]:
                events.append(("DELETED", None, self._remove(key)))
            self.revision = rev
        self._dispatch_all(events, received)
        self._synced.set()

    def _apply(self, type_: str, obj: dict) -> None:
        received = time.monotonic()
        key = _key(obj)
        with self._lock:
            old = self._items.get(key)
            if type_ == "DELETED":
                if old is None:
                    event = None
                else:
                    self._remove(key)
                    event = ("DELETED", None, obj)
            else:
                self._store(key, obj)
                event = ("ADDED", None, obj) if old is None else ("MODIFIED", old, obj)
            self.revision = max(self.revision, _revision(obj))
        if event is not None:
            self._dispatch_all([event], received)

    def _resync(self) -> None:
        with self._lock:
            items = list(self._items.values())
        self._dispatch_all([("MODIFIED", obj, obj) for obj in items], None)

    def _store(self, key: _Key, obj: dict) -> None:
        """Put obj in the cache and its indexes (holding _lock)."""
        self._items[key] = obj
        for name in self._indexers:
            self._index_one(name, key, obj)

    def _index_one(self, name: str, key: _Key, obj: dict) -> None:
        try:
            values = tuple(dict.fromkeys(self._indexers[name](obj) or ()))
        except Exception as exc:
            log.warning("informer %s: index %s failed on %s/%s: %s", self.rt.group_resource, name, *key, exc)
            values = ()
        indexed = self._indexed[name]
        before = indexed.get(key, ())
        if before == values:
            return
        index = self._indices[name]
        for value in before:
            if value not in values:
                bucket = index.get(value)
                if bucket is not None:
                    bucket.pop(key, None)
                    if not bucket:
                        del index[value]
        for value in values:
            index.setdefault(value, {})[key] = None
        if values:
            indexed[key] = values
        else:
            indexed.pop(key, None)

    def _remove(self, key: _Key) -> dict:
        """Drop key from the cache and its indexes (holding _lock); the removed object."""
        obj = self._items.pop(key)
        for name, indexed in self._indexed.items():
            index = self._indices[name]
            for value in indexed.pop(key, ()):
                bucket = index.get(value)
                if bucket is not None:
                    bucket.pop(key, None)
                    if not bucket:
                        del index[value]
        return obj

    def _dispatch_all(self, events: list[_Event], received: float | None) -> None:
        """Call the handlers for each event in turn; `received` None: a resync (not counted or observed)."""
        if not events:
            return
        with self._dispatch:
            handlers = list(self._handlers)
            observers = self._observers if received is not None else ()
            if received is not None:
                self.delivered += len(events)
            for type_, old, obj in events:
                dispatched = time.monotonic() if observers else 0.0
                for h in handlers:
                    if type_ == "ADDED":
                        if h.on_add is not None:
                            self._call(h.on_add, obj)
                    elif type_ == "MODIFIED":
                        if h.on_update is not None:
                            self._call(h.on_update, old, obj)
                    elif h.on_delete is not None:
                        self._call(h.on_delete, obj)
                if observers:
                    self._observed(observers, type_, obj, received, dispatched)

    def _observed(self, observers: list[Observer], type_: str, obj: dict, received: float,
                  dispatched: float) -> None:
        namespace, name = _key(obj)
        delivery = Delivery(type_, namespace, name, _revision(obj), received, dispatched, time.monotonic())
        for fn in observers:
            try:
                fn(delivery)
            except Exception:
                log.exception("informer %s: observer %s failed", self.rt.group_resource,
                              getattr(fn, "__qualname__", fn))

    def _call(self, fn: Callable, *args: dict) -> None:
        try:
            fn(*args)
        except Exception:
            meta = args[-1].get("metadata") or {}
            log.exception("informer %s: handler %s failed on %s/%s", self.rt.group_resource,
                          getattr(fn, "__qualname__", fn), meta.get("namespace", ""), meta.get("name"))


class InformerFactory:
    """One shared Informer per resource, created on first ask; started and synced together."""

    def __init__(self, api: API, *, resync: float = 0.0) -> None:
        self.api = api
        self.resync = resync
        self._lock = threading.Lock()
        self._informers: dict[str, Informer] = {}
        self._stop: threading.Event | None = None

    def informer(self, resource: "str | ResourceType", *, label_selector: object = None,
                 field_selector: object = None) -> Informer:
        """The informer of a resource ("pods", "deployments.apps", a ResourceType); started if
        the factory already runs. With selectors (text or parsed; see Informer), one shared
        informer per resource and selectors, holding only what they select."""
        rt = self.api.resource(resource) if isinstance(resource, str) else resource
        label = as_label_selector(label_selector)
        label = None if label is None or label.is_empty else label
        fields = as_field_selector(field_selector, kind=rt.kind)
        key = rt.group_kind
        if label is not None or fields is not None:
            labels = "(nothing)" if label is not None and label.match_nothing else str(label or "")
            key = f"{key}?labels={labels}&fields={fields or ''}"
        with self._lock:
            informer = self._informers.get(key)
            if informer is None:
                informer = Informer(self.api, rt, resync=self.resync, label_selector=label, field_selector=fields)
                self._informers[key] = informer
                if self._stop is not None:
                    informer.start(self._stop)
            return informer

    def informers(self) -> list[Informer]:
        with self._lock:
            return list(self._informers.values())

    def start(self, stop: threading.Event) -> None:
        """Start every informer asked for so far (and any asked for later) until `stop` is set."""
        with self._lock:
            self._stop = stop
            informers = list(self._informers.values())
        for informer in informers:
            informer.start(stop)

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """True once every informer has synced; False if `timeout` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in self.informers():
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.wait_for_sync(remaining):
                return False
        return True

    def has_synced(self) -> bool:
        return all(i.has_synced() for i in self.informers())


__all__ = ["BUILTIN_INDEXES", "Delivery", "Informer", "InformerFactory", "Observer", "as_field_selector",
           "as_label_selector", "node_index", "namespace_index", "owner_index"]
