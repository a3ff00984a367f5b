"""etcd watch streams read into kctl's change log entries.

Mirrors k8s.io/apiserver storage/etcd3 watcher.go: a watch on a key range from a start
revision, with prev_kv so that a DELETED change carries the object's last state (at the
delete's revision); PUT events are ADDED when create_revision == mod_revision, else MODIFIED;
a watch canceled with compact_revision is Gone (410: re-list). etcd sends one revision's events
in one response, so readers here cut pages only between revisions.

`WatchStream` reads one gateway stream (newline-separated JSON) in a thread of its own into a
bounded queue, so the consumer can honour a stop event and a deadline while no event comes;
`close()` ends the HTTP response, which ends the thread. Called by kctl.store.etcd.store.
"""

from __future__ import annotations

import itertools
import json
import queue
import threading
import time
from typing import TYPE_CHECKING, Iterator

from kctl.machinery.errors import Gone
from kctl.store.contract import Change, StoreUnavailable
from kctl.store.etcd import keys

if TYPE_CHECKING:
    from kctl.store.etcd.store import EtcdStore

_END = object()
#: longest a waiting watcher blocks before it checks its stop event and deadline
WATCH_CHECK = 0.05


class WatchStream:
    """One etcd watch on [key, range end) from start_revision, read in a thread; see the module docstring."""

    def __init__(self, store: "EtcdStore", key: str, start_revision: int) -> None:
        self._client = store.client
        self._session = self._client.new_session()
        self._queue: queue.Queue = queue.Queue(maxsize=16)
        self._closed = threading.Event()
        body = {"create_request": {"key": keys.b64(key), "range_end": keys.range_end(key),
                                   "start_revision": str(start_revision), "prev_kv": True}}
        try:
            self._response = self._client.stream("/watch", body, session=self._session)
        except BaseException:
            self._session.close()
            raise
        self._thread = threading.Thread(target=self._read, name="kctl-etcd-watch", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self._response.iter_lines(chunk_size=None):
                if line:
                    self._offer(json.loads(line))
                if self._closed.is_set():
                    return
            self._offer(_END)
        except Exception as error:  # noqa: BLE001 - any failure ends the stream; the consumer decides
            self._offer(error)

    def _offer(self, item: object) -> None:
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def next(self, timeout: float) -> dict | None:
        """The next result message (None: none within timeout). StoreUnavailable when the stream broke or ended."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is _END or isinstance(item, Exception):
            reason = "it ended" if item is _END else type(item).__name__
            raise StoreUnavailable(f"etcd: the watch stream broke ({reason})")
        if "error" in item:
            error = item["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise StoreUnavailable(f"etcd: the watch failed: {message}")
        result = item.get("result") or {}
        if result.get("canceled"):
            compact = result.get("compact_revision")
            if compact and compact != "0":
                raise Gone(f"too old resource version (etcd compacted to {compact})")
            raise StoreUnavailable(f"etcd: the watch was canceled: {result.get('cancel_reason') or 'no reason given'}")
        return result

    def close(self) -> None:
        import contextlib
        import socket

        self._closed.set()
        with contextlib.suppress(Exception):  # wake the reader thread blocked in recv (closing alone deadlocks)
            self._response.raw.connection.sock.shutdown(socket.SHUT_RDWR)
        self._response.close()
        self._session.close()


def events(store: "EtcdStore", result: dict, *, kind: str | None = None) -> Iterator[tuple[int, Change | None, int]]:
    """(revision, change or None for kctl's own keys and other kinds than `kind`, stored bytes) of each event.

    Raises Gone on a restore's epoch key (every watcher re-lists).
    """
    layout = store.layout
    for event in result.get("events") or []:
        kv = event["kv"]
        revision = int(kv["mod_revision"])
        key = keys.unb64(kv["key"]).decode()
        parsed = layout.parse(key)
        if parsed is None:
            if key == layout.epoch:
                raise Gone(f"too old resource version: the store was restored at revision {revision}")
            yield revision, None, 0
            continue
        if kind is not None and parsed[0] != kind:
            yield revision, None, 0
            continue
        kind_, namespace, name = parsed
        if event.get("type") == "DELETE":
            prev = event.get("prev_kv")
            raw = keys.unb64(prev.get("value", "")) if prev else b""
            obj = store.decode(kind_, namespace, name, raw, revision) if raw else \
                {"metadata": {"name": name, **({"namespace": namespace} if namespace else {}),
                              "resourceVersion": str(revision)}}
            yield revision, Change(revision, "DELETED", kind_, namespace, name, obj), len(raw)
        else:
            raw = keys.unb64(kv.get("value", ""))
            typ = "ADDED" if kv.get("create_revision") == kv["mod_revision"] else "MODIFIED"
            yield revision, Change(revision, typ, kind_, namespace, name,
                                   store.decode(kind_, namespace, name, raw, revision)), len(raw)


def read_changes(store: "EtcdStore", since: int, *, limit: int, max_bytes: int) -> list[Change]:
    """One page of changes after `since` (EtcdStore.changes): the head and horizon read in one txn, then a
    watch from since+1 read until the head's revision or the page is full (at a revision boundary)."""
    budget = max_bytes
    _, (head_answer, horizon_answer) = store.reads(store.key_range(store.layout.head),
                                                   store.key_range(store.layout.compacted))
    head = store.mod(head_answer)
    kvs = horizon_answer.get("kvs") or []
    store.horizon_seen = horizon = int(keys.unb64(kvs[0].get("value", ""))) if kvs else 0
    if since < horizon:
        raise Gone(f"too old resource version: {since} (compacted to {horizon})")
    if head <= since:
        return []
    out: list[Change] = []
    size = 0
    stream = WatchStream(store, store.layout.root, since + 1)
    try:
        deadline = time.monotonic() + store.client.request_timeout
        while True:
            result = stream.next(max(0.0, deadline - time.monotonic()))
            if result is None:
                raise StoreUnavailable(f"etcd: the history after revision {since} did not arrive within "
                                       f"{store.client.request_timeout:g} s")
            for revision, group in itertools.groupby(events(store, result), key=lambda e: e[0]):
                entries = list(group)
                found = [change for _, change, _ in entries if change is not None]
                weight = sum(n for _, _, n in entries)
                if out and found and (len(out) + len(found) > limit or size + weight > budget):
                    return out
                out.extend(found)
                size += weight
                if revision >= head:
                    return out
    finally:
        stream.close()


def watch_changes(store: "EtcdStore", since: int, *, stop: threading.Event | None, timeout: float | None,
                  kind: str | None) -> Iterator[Change]:
    """EtcdStore.watch: the history first (store.changes pages), then a live etcd watch of the kind's range.

    A broken stream is opened again from the last revision seen, on any member that answers;
    after request_timeout without one, StoreUnavailable.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while stop is None or not stop.is_set():
        page = store.changes(since)
        if not page:
            break
        for change in page:
            since = change.revision
            if kind is None or change.kind == kind:
                yield change
    if deadline is not None and time.monotonic() >= deadline:
        return
    stream: WatchStream | None = None
    broken_since: float | None = None
    try:
        while stop is None or not stop.is_set():
            wait = WATCH_CHECK if deadline is None else max(0.0, min(WATCH_CHECK, deadline - time.monotonic()))
            try:
                if stream is None:
                    stream = WatchStream(store, store.layout.kind_prefix(kind) if kind else store.layout.root,
                                         since + 1)
                result = stream.next(wait)
                broken_since = None
            except StoreUnavailable:
                if stream is not None:
                    stream.close()
                    stream = None
                now = time.monotonic()
                broken_since = broken_since or now
                if now - broken_since > store.client.request_timeout:
                    raise
                time.sleep(WATCH_CHECK)
                continue
            if result is not None:
                for revision, change, _ in events(store, result, kind=kind):
                    since = max(since, revision)
                    if change is not None:
                        yield change
            if deadline is not None and time.monotonic() >= deadline:
                return
    finally:
        if stream is not None:
            stream.close()
