"""The event TTL controller: Events live for a bounded time (default one hour).

Run by the controller manager in `kctl daemon`. Kubernetes bounds an Event's life with
an etcd lease (kube-apiserver's `--event-ttl`, default 1h); kctl's store has no leases,
so this controller does it: every Event is queued when it is seen, and its reconcile
deletes it once its last sighting (lastTimestamp, else eventTime, firstTimestamp or
creationTimestamp) is older than the TTL, or asks to be called again when it will be.
An Event bumped by kctl.client.events (count + lastTimestamp) in the meantime gets a new
lease on life: the delete carries the resourceVersion it judged, so a bump in between
makes it a Conflict and the Event is judged again.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kctl.machinery.errors import Conflict, NotFound
from kctl.machinery.times import parse_time
from kctl.controllers.base import clock_now

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.eventttl")

DEFAULT_TTL_SECONDS = 3600.0


@dataclass(frozen=True)
class EventTTLSettings:
    """How long Events are kept."""

    ttl_seconds: float = DEFAULT_TTL_SECONDS


def last_seen(event: dict) -> dt.datetime | None:
    """When an Event last happened, as kubectl's LAST SEEN reads it."""
    series = event.get("series") or {}
    for text in (series.get("lastObservedTime"), event.get("lastTimestamp"), event.get("eventTime"),
                 event.get("firstTimestamp"), (event.get("metadata") or {}).get("creationTimestamp")):
        when = parse_time(text)
        if when is not None:
            return when
    return None


class EventTTLController:
    """Deletes Events whose last sighting is older than the TTL."""

    name = "eventttl"

    def __init__(self, *, settings: EventTTLSettings = EventTTLSettings()) -> None:
        self.settings = settings

    def register(self, ctx: "ControllerContext", queue: "WorkQueue[str]") -> None:
        from kctl.controllers.base import key_of

        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self._key_of = key_of
        self.events = ctx.informers.informer("events")
        self.events.add_handler(self._enqueue, lambda old, new: self._enqueue(new), lambda obj: None)

    def _enqueue(self, event: dict) -> None:
        self.queue.add(self._key_of(event))

    def reconcile(self, key: str) -> float | None:
        from kctl.controllers.base import split_key

        namespace, name = split_key(key)
        event = self.events.get(namespace, name)
        if event is None:
            return None
        seen = last_seen(event)
        age = (clock_now(self.ctx.clock) - seen).total_seconds() if seen is not None else float("inf")
        left = self.settings.ttl_seconds - age
        if left > 0:
            return left
        meta = event["metadata"]
        try:
            self.api.delete(self.api.resource("events"), name, namespace=namespace,
                            resource_version=meta.get("resourceVersion"))
        except NotFound:
            return None
        except Conflict:
            return 0.0  # bumped meanwhile: judge the newer Event
        log.debug("event %s/%s expired (last seen %s)", namespace, name, seen)
        return None


__all__ = ["EventTTLController", "EventTTLSettings", "DEFAULT_TTL_SECONDS", "last_seen"]
