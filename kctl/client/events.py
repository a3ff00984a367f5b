"""Recording v1 Events about objects, as client-go's event recorder does.

The node agent (kctl.agent.agent) records what it does to pods ("Pulled", "Started",
"BackOff", ...) and controllers record their decisions here too; `kctl describe` shows
them. An Event this process repeats for the same object (same involvedObject uid,
reason, message and source) is not stored again: the existing Event's `count` and
`lastTimestamp` are bumped, as Kubernetes' event correlator does, from an in-memory
index (never by listing the namespace's Events). A bump is a read-modify-write retried
on Conflict (kctl.client.retry.retry_on_conflict, UPDATE_ATTEMPTS in all, then a warning).

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
        _record(api, involved, type=type, reason=reason, message=message[:MAX_MESSAGE], component=component,
                field_path=field_path, host=host)
    except Exception as exc:  # best effort: log and carry on
        meta = involved.get("metadata") or {}
        log.warning("cannot record event %s for %s %s/%s: %s", reason, involved.get("kind"),
                    meta.get("namespace", ""), meta.get("name"), exc)


def _record(api: API, involved: dict, *, type: str, reason: str, message: str, component: str, field_path: str,
            host: str) -> None:
    meta = involved.get("metadata") or {}
    namespace = meta.get("namespace") or DEFAULT_NAMESPACE
    uid = meta.get("uid", "")
    key: _Key = (api.where, namespace, uid, reason, message, component, host, field_path)
    rt = api.resource("events")

    def attempt() -> None:
        """Bump this process's Event for `key` (read again), or create it when there is none."""
        existing = _find(api, rt, key)
        if existing is not None:
            existing["count"] = int(existing.get("count") or 1) + 1
            existing["lastTimestamp"] = _now()
            try:
                api.update(existing)  # Conflict: someone else bumped it; read again
                return
            except NotFound:
                _INDEX.drop(key)  # deleted meanwhile (TTL): record it anew
        created = _create(api, involved, namespace, type=type, reason=reason, message=message,
                          component=component, field_path=field_path, host=host)
        _INDEX.put(key, created["metadata"]["name"])

    try:
        retry_on_conflict(attempt, attempts=UPDATE_ATTEMPTS)
    except Conflict:
        log.warning("event %s for %s/%s: gave up after %d conflicting updates", reason, namespace,
                    meta.get("name"), UPDATE_ATTEMPTS)


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
    return (involved.get("uid", "") == uid and event.get("reason") == reason and event.get("message") == message
            and source.get("component", "") == component and source.get("host", "") == host
            and involved.get("fieldPath", "") == field_path)


def _create(api: API, involved: dict, namespace: str, *, type: str, reason: str, message: str, component: str,
            field_path: str, host: str) -> dict:
    event = _event_object(involved, namespace, type=type, reason=reason, message=message, component=component,
                          field_path=field_path, host=host)
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

    Requests repeating one Event (same object, reason, message, source) count once each,
    as if recorded one after another; an Event this process recorded before is bumped.
    """
    grouped: dict[_Key, tuple[EventRequest, int]] = {}
    for req in requests:
        meta = req.involved.get("metadata") or {}
        namespace = meta.get("namespace") or DEFAULT_NAMESPACE
        key: _Key = (api.where, namespace, meta.get("uid", ""), req.reason, req.message[:MAX_MESSAGE],
                     req.component, req.host, req.field_path)
        first, count = grouped.get(key, (req, 0))
        grouped[key] = (first, count + 1)
    try:
        _record_grouped(api, grouped)
    except Exception as exc:  # best effort: log and carry on
        log.warning("cannot record %d events: %s", len(grouped), exc)


def _record_grouped(api: API, grouped: dict[_Key, tuple[EventRequest, int]]) -> None:
    creates: list[tuple[_Key, EventRequest, dict]] = []
    for key, (req, count) in grouped.items():
        if _INDEX.get(key) is not None:  # seen before: bump it (one update per repeat, as record does)
            for _ in range(count):
                record(api, req.involved, type=req.type, reason=req.reason, message=req.message,
                       component=req.component, field_path=req.field_path, host=req.host)
            continue
        event = _event_object(req.involved, key[1], type=req.type, reason=req.reason, message=key[4],
                              component=req.component, field_path=req.field_path, host=req.host, count=count)
        base = (req.involved.get("metadata") or {}).get("name") or "event"
        event["metadata"]["name"] = f"{base}.{time.time_ns():x}{secrets.token_hex(2)}"
        creates.append((key, req, event))
    if not creates:
        return
    results = api.write_all([("create", event) for _, _, event in creates])
    for (key, req, _), result in zip(creates, results):
        if result.error is None and result.obj is not None:
            _INDEX.put(key, result.obj["metadata"]["name"])
        elif isinstance(result.error, AlreadyExists):  # a name clash: the one-at-a-time path picks another
            record(api, req.involved, type=req.type, reason=req.reason, message=req.message,
                   component=req.component, field_path=req.field_path, host=req.host)
        elif result.error is not None:
            meta = req.involved.get("metadata") or {}
            log.warning("cannot record event %s for %s %s/%s: %s", req.reason, req.involved.get("kind"),
                        meta.get("namespace", ""), meta.get("name"), result.error)


__all__ = ["EventRequest", "record", "record_all", "involved_reference"]
