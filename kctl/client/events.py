"""Recording v1 Events about objects, as client-go's event recorder does.

The node agent (kctl.agent.agent) records what it does to pods ("Pulled", "Started",
"BackOff", ...) and controllers record their decisions here too; `kctl describe` shows
them. Every Event passes this process's `Correlator` first, as client-go's
EventCorrelator (tools/record/events_cache.go), with its defaults:

- aggregation: the 10th Event about one object from one source with the same type and
  reason but a new message within 10 minutes (and every later one) is recorded as one
  "(combined from similar events): <latest message>" Event whose count grows;
- a spam filter: a token bucket per source and object, a burst of 25 Events, refilled
  at one per 5 minutes; an Event that finds it empty is dropped (logged at debug).

So a ReplicaSet creating 100 pods at once records 9 SuccessfulCreate Events and one
combined Event of count 16, and its Events stop there until the bucket refills.

An Event this process repeats for the same object (same involvedObject uid, reason,
message and source) is not stored again: the existing Event's `count` and
`lastTimestamp` are bumped, from an in-memory index (never by listing the namespace's
Events). A bump is a read-modify-write retried on Conflict
(kctl.client.retry.retry_on_conflict, UPDATE_ATTEMPTS in all, then a warning).

`record` never raises: an Event is best effort, and failing to write one must not stop
the work it reports (the failure is logged). `record_all` records many Events at once, the
new ones in one transaction (client-go's broadcaster batches its sink writes likewise);
controllers use it for the Events of a reconcile pass (kctl.controllers.base.DeferredEvents).
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from kctl.client.retry import retry_on_conflict
from kctl.machinery.errors import AlreadyExists, APIError, Conflict, NotFound

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.machinery.resources import ResourceType

log = logging.getLogger("kctl.events")

#: Events of cluster-scoped objects (Nodes) go here, as in Kubernetes
DEFAULT_NAMESPACE = "default"
MAX_MESSAGE = 1024
INDEX_SIZE = 4096
UPDATE_ATTEMPTS = 3
#: client-go's EventCorrelator defaults: aggregate from the 10th similar Event in 10 minutes ...
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_WINDOW = 600.0
COMBINED_PREFIX = "(combined from similar events): "
#: ... and a burst of 25 Events per source and object, one more every 5 minutes
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0

#: (store, namespace, uid, reason, message, component, host, fieldPath)
_Key = tuple[str, str, str, str, str, str, str, str]


class _Index:
    """Which Event name holds each (store, namespace, uid, reason, message, source...) seen here."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._names: OrderedDict[_Key, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _Key) -> str | None:
        with self._lock:
            name = self._names.get(key)
            if name is not None:
                self._names.move_to_end(key)
            return name

    def put(self, key: _Key, name: str) -> None:
        with self._lock:
            self._names[key] = name
            self._names.move_to_end(key)
            while len(self._names) > self._size:
                self._names.popitem(last=False)

    def drop(self, key: _Key) -> None:
        with self._lock:
            self._names.pop(key, None)


_INDEX = _Index(INDEX_SIZE)


class Correlator:
    """Aggregation and spam filter of the Events this process records (see module doc).

    `correlate` takes an Event's key and returns the key and message to record it under
    (its own, or its similar Events' combined one), or None when the spam filter drops
    it. One per process (`CORRELATOR`), as client-go keeps one per broadcaster; its caches
    are LRUs of INDEX_SIZE entries. A dropped Event counts nowhere (client-go's cache
    would still count it in the next Event that passes).
    """

    def __init__(self, *, clock=time.monotonic, size: int = INDEX_SIZE) -> None:
        self.clock = clock
        self._size = size
        self._lock = threading.Lock()
        #: (store, namespace, uid, type, reason, component, host) -> (messages seen, last seen)
        self._similar: OrderedDict[tuple, tuple[set[str], float]] = OrderedDict()
        #: (store, namespace, uid, component, host) -> (tokens, when counted)
        self._buckets: OrderedDict[tuple, tuple[float, float]] = OrderedDict()

    def correlate(self, key: _Key, type_: str) -> tuple[_Key, str] | None:
        where, namespace, uid, reason, message, component, host, field_path = key
        now = self.clock()
        with self._lock:
            routed, text = key, message
            similar = (where, namespace, uid, type_, reason, component, host)
            seen, last = self._similar.pop(similar, (set(), now))
            if now - last > AGGREGATE_WINDOW:
                seen = set()
            seen.add(message)
            if len(seen) >= AGGREGATE_MAX_EVENTS:
                seen.pop()  # the set stays below the maximum, as client-go's PopAny keeps it
                routed = (where, namespace, uid, reason, COMBINED_PREFIX, component, host, field_path)
                text = (COMBINED_PREFIX + message)[:MAX_MESSAGE]
            self._remember(self._similar, similar, (seen, now))
            source = (where, namespace, uid, component, host)
            tokens, counted = self._buckets.pop(source, (float(SPAM_BURST), now))
            tokens = min(float(SPAM_BURST), tokens + (now - counted) / SPAM_REFILL_SECONDS)
            allowed = tokens >= 1.0
            self._remember(self._buckets, source, (tokens - 1.0 if allowed else tokens, now))
        return (routed, text) if allowed else None

    def _remember(self, cache: OrderedDict, key: tuple, value: tuple) -> None:
        cache[key] = value
        while len(cache) > self._size:
            cache.popitem(last=False)


CORRELATOR = Correlator()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def involved_reference(obj: dict, *, field_path: str = "") -> dict:
    """The ObjectReference of an object, as an Event's involvedObject."""
    meta = obj.get("metadata") or {}
    ref = {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "name": meta.get("name", ""),
           "uid": meta.get("uid", "")}
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    if field_path:
        ref["fieldPath"] = field_path
    return ref


def record(api: API, involved: dict, *, type: str, reason: str, message: str, component: str,
           field_path: str = "", host: str = "") -> None:
    """Record an Event about `involved` (a Pod, Node, ...), or bump the matching one's count.

    `type` is "Normal" or "Warning". Never raises.
    """
    try:
        routed = CORRELATOR.correlate(_key(api, involved, reason, message[:MAX_MESSAGE], component, host,
                                           field_path), type)
        if routed is None:
            _dropped(involved, reason)
            return
        key, text = routed
        _record(api, involved, key, type=type, message=text)
    except Exception as exc:  # best effort: log and carry on
        meta = involved.get("metadata") or {}
        log.warning("cannot record event %s for %s %s/%s: %s", reason, involved.get("kind"),
                    meta.get("namespace", ""), meta.get("name"), exc)


def _key(api: API, involved: dict, reason: str, message: str, component: str, host: str, field_path: str) -> _Key:
    meta = involved.get("metadata") or {}
    return (api.where, meta.get("namespace") or DEFAULT_NAMESPACE, meta.get("uid", ""), reason, message, component,
            host, field_path)


def _dropped(involved: dict, reason: str) -> None:
    meta = involved.get("metadata") or {}
    log.debug("event %s for %s %s/%s dropped by the spam filter", reason, involved.get("kind"),
              meta.get("namespace", ""), meta.get("name"))


def _record(api: API, involved: dict, key: _Key, *, type: str, message: str, count: int = 1) -> None:
    """Bump the Event stored for `key` by `count` (its message becomes `message`), or create it."""
    _, namespace, _, reason, _, component, host, field_path = key
    rt = api.resource("events")

    def attempt() -> None:
        """Bump this process's Event for `key` (read again), or create it when there is none."""
        existing = _find(api, rt, key)
        if existing is not None:
            existing["count"] = int(existing.get("count") or 1) + count
            existing["lastTimestamp"] = _now()
            existing["message"] = message  # a combined Event shows the latest of its similar Events
            try:
                api.update(existing)  # Conflict: someone else bumped it; read again
                return
            except NotFound:
                _INDEX.drop(key)  # deleted meanwhile (TTL): record it anew
        created = _create(api, involved, namespace, type=type, reason=reason, message=message,
                          component=component, field_path=field_path, host=host, count=count)
        _INDEX.put(key, created["metadata"]["name"])

    try:
        retry_on_conflict(attempt, attempts=UPDATE_ATTEMPTS)
    except Conflict:
        log.warning("event %s for %s/%s: gave up after %d conflicting updates", reason, namespace,
                    (involved.get("metadata") or {}).get("name"), UPDATE_ATTEMPTS)


def _find(api: API, rt: ResourceType, key: _Key) -> dict | None:
    """The stored Event for `key`, if this process recorded it and it still exists.

    Only the process-local index is consulted, never a list of the namespace's Events: a
    list costs time in proportion to the Events stored and sat on every controller's
    critical path. As in client-go, whose correlator cache is in memory, an Event first
    recorded by another process (or before a restart) gets a new Event, not a bump.
    """
    name = _INDEX.get(key)
    if name is None:
        return None
    try:
        event = api.get(rt, name, namespace=key[1])
        if _matches(event, key):
            return event
    except NotFound:
        pass
    _INDEX.drop(key)
    return None


def _matches(event: dict, key: _Key) -> bool:
    _, _, uid, reason, message, component, host, field_path = key
    involved = event.get("involvedObject") or {}
    source = event.get("source") or {}
    text = event.get("message") or ""
    same_message = text.startswith(message) if message == COMBINED_PREFIX else text == message
    return (involved.get("uid", "") == uid and event.get("reason") == reason and same_message
            and source.get("component", "") == component and source.get("host", "") == host
            and involved.get("fieldPath", "") == field_path)


def _create(api: API, involved: dict, namespace: str, *, type: str, reason: str, message: str, component: str,
            field_path: str, host: str, count: int = 1) -> dict:
    event = _event_object(involved, namespace, type=type, reason=reason, message=message, component=component,
                          field_path=field_path, host=host, count=count)
    base = (involved.get("metadata") or {}).get("name") or "event"
    for suffix in (f"{time.time_ns():x}", secrets.token_hex(8)):
        event["metadata"]["name"] = f"{base}.{suffix}"
        try:
            return api.create(event)
        except AlreadyExists:
            continue
    raise APIError(f"no free Event name for {base}")


def _event_object(involved: dict, namespace: str, *, type: str, reason: str, message: str, component: str,
                  field_path: str, host: str, count: int = 1) -> dict:
    """A new Event (metadata.name still to be set)."""
    now = _now()
    source = {"component": component}
    if host:
        source["host"] = host
    event = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"namespace": namespace},
        "involvedObject": involved_reference(involved, field_path=field_path),
        "reason": reason, "message": message, "type": type, "source": source,
        "firstTimestamp": now, "lastTimestamp": now, "count": count,
        "reportingComponent": component, "reportingInstance": host,
    }
    return event


@dataclass(frozen=True)
class EventRequest:
    """One Event to record with `record_all` (the arguments of `record`)."""

    involved: dict
    type: str
    reason: str
    message: str
    component: str
    field_path: str = ""
    host: str = ""


def record_all(api: API, requests: Iterable[EventRequest]) -> None:
    """`record` for many Events: the new ones created in one transaction, repeats bumped. Never raises.

    Each request passes the Correlator in order, as if recorded one after another; those
    that end up as one Event (repeats, or similar ones combined) are written once, with
    their count (a bump adds it in one update).
    """
    grouped: dict[_Key, tuple[EventRequest, int, str]] = {}
    try:
        for req in requests:
            routed = CORRELATOR.correlate(_key(api, req.involved, req.reason, req.message[:MAX_MESSAGE],
                                               req.component, req.host, req.field_path), req.type)
            if routed is None:
                _dropped(req.involved, req.reason)
                continue
            key, text = routed
            first, count, _ = grouped.get(key, (req, 0, text))
            grouped[key] = (first, count + 1, text)
        _record_grouped(api, grouped)
    except Exception as exc:  # best effort: log and carry on
        log.warning("cannot record %d events: %s", len(grouped), exc)


def _record_grouped(api: API, grouped: dict[_Key, tuple[EventRequest, int, str]]) -> None:
    creates: list[tuple[_Key, EventRequest, int, str, dict]] = []
    for key, (req, count, text) in grouped.items():
        if _INDEX.get(key) is not None:  # seen before: bump it by count, in one update
            _record_one(api, req, key, text, count)
            continue
        event = _event_object(req.involved, key[1], type=req.type, reason=req.reason, message=text,
                              component=req.component, field_path=req.field_path, host=req.host, count=count)
        base = (req.involved.get("metadata") or {}).get("name") or "event"
        event["metadata"]["name"] = f"{base}.{time.time_ns():x}{secrets.token_hex(2)}"
        creates.append((key, req, count, text, event))
    if not creates:
        return
    results = api.write_all([("create", event) for *_, event in creates])
    for (key, req, count, text, _), result in zip(creates, results):
        if result.error is None and result.obj is not None:
            _INDEX.put(key, result.obj["metadata"]["name"])
        elif isinstance(result.error, AlreadyExists):  # a name clash: the one-at-a-time path picks another
            _record_one(api, req, key, text, count)
        elif result.error is not None:
            meta = req.involved.get("metadata") or {}
            log.warning("cannot record event %s for %s %s/%s: %s", req.reason, req.involved.get("kind"),
                        meta.get("namespace", ""), meta.get("name"), result.error)


def _record_one(api: API, req: EventRequest, key: _Key, text: str, count: int) -> None:
    try:
        _record(api, req.involved, key, type=req.type, message=text, count=count)
    except Exception as exc:  # best effort: log and carry on
        meta = req.involved.get("metadata") or {}
        log.warning("cannot record event %s for %s %s/%s: %s", req.reason, req.involved.get("kind"),
                    meta.get("namespace", ""), meta.get("name"), exc)


__all__ = ["CORRELATOR", "Correlator", "EventRequest", "record", "record_all", "involved_reference"]
