"""kctl.apiserver.configcache on a scripted store (no etcd): a Gone watch lists again, a store that does not answer
makes reads go to the store (its error is the caller's), and kinds not cached are read from the store."""

from __future__ import annotations

import threading
import time
from typing import Iterator

import pytest

from kctl.apiserver.configcache import ConfigCache
from kctl.machinery.errors import Gone
from kctl.store.contract import Change, StoreUnavailable


def ns(name: str, rv: int, **labels: str) -> dict:
    return {"kind": "Namespace", "metadata": {"name": name, "resourceVersion": str(rv), "labels": labels}}


class ScriptedStore:
    """list() answers from `objects`; the first watch raises Gone, later ones yield `changes` then wait for stop."""

    reads_are_remote = True

    def __init__(self, objects: list[dict], changes: list[Change], *, unavailable: bool = False) -> None:
        self.objects, self.changes, self.unavailable = objects, changes, unavailable
        self.lists = 0
        self.watches = 0

    def list(self, kind: str, namespace: str | None = None, *, name: str | None = None) -> tuple[list[dict], int]:
        if self.unavailable:
            raise StoreUnavailable("etcd: the cluster has lost its quorum")
        self.lists += 1
        return list(self.objects), 10

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        if self.unavailable:
            raise StoreUnavailable("etcd: the cluster has lost its quorum")
        return next((o for o in self.objects if o["metadata"]["name"] == name), None)

    def watch(self, since: int, *, stop: threading.Event, kind: str) -> Iterator[Change]:
        self.watches += 1
        if self.watches == 1:
            raise Gone("too old resource version")
        yield from self.changes
        stop.wait()


def until(check, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.01)


def test_a_gone_watch_lists_again_then_applies_changes():
    """Gone from the watch: the cache lists again and then applies the watch's changes in order."""
    store = ScriptedStore([ns("a", 5)], [Change(11, "ADDED", "Namespace", "", "b", ns("b", 11, team="x")),
                                          Change(12, "DELETED", "Namespace", "", "a", ns("a", 12))])
    caches = ConfigCache(store)
    try:
        until(lambda: [o["metadata"]["name"] for o in caches.list("Namespace")] == ["b"])
        assert store.lists == 2 and store.watches == 2
        assert caches.get("Namespace", "", "b")["metadata"]["labels"] == {"team": "x"}
    finally:
        caches.close()


def test_a_store_that_does_not_answer_is_the_readers_error():
    """No list succeeds: the list's StoreUnavailable reaches the reader."""
    caches = ConfigCache(ScriptedStore([], [], unavailable=True))
    try:
        with pytest.raises(StoreUnavailable, match="lost its quorum"):
            caches.list("Namespace")
    finally:
        caches.close()


@pytest.mark.parametrize("kind", ["Pod", "ConfigMap", "Event"])
def test_kinds_not_cached_are_read_from_the_store(kind):
    """A kind outside the cached ones starts no cache: it is listed from the store each time."""
    store = ScriptedStore([ns("a", 5)], [])
    caches = ConfigCache(store)
    try:
        assert caches.cache(kind) is None
        caches.list(kind)
        caches.list(kind)
        assert store.lists == 2 and store.watches == 0
    finally:
        caches.close()
