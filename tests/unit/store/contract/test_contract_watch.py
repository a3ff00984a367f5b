"""Store contract: the change log and its watch (every change once, in order), paging, compaction and Gone."""

from __future__ import annotations

import threading
import time

import pytest

from kctl.machinery.errors import Gone
from kctl.store.contract import Store

def put(store: Store, name: str, ns: str = "default", kind: str = "ConfigMap", **extra: object) -> dict:
    with store.transaction() as txn:
        return txn.put(kind, ns, name, {"metadata": {"name": name, "uid": name + "-uid", **extra}}, event="ADDED")


def put_big(store: Store, name: str, size: int) -> None:
    with store.transaction() as txn:
        txn.put("ConfigMap", "default", name, {"metadata": {"name": name}, "data": {"blob": "x" * size}},
                event="ADDED")


def test_watch_yields_changes_in_order(store, check_revisions):
    """A watcher sees every change after `since`, in order, including deletes."""
    since = int(put(store, "a")["metadata"]["resourceVersion"])
    stop = threading.Event()
    seen = []

    def watch():
        for change in store.watch(since, stop=stop):
            seen.append((change.revision, change.type, change.name))
            if len(seen) == 3:
                stop.set()

    t = threading.Thread(target=watch)
    t.start()
    put(store, "b")
    with store.transaction() as txn:
        txn.put("ConfigMap", "default", "a", {"metadata": {"name": "a"}}, event="MODIFIED")
        txn.delete("ConfigMap", "default", "b", {"metadata": {"name": "b"}})
    t.join(30)
    stop.set()
    assert [(kind, name) for _, kind, name in seen] == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    assert [rev for rev, _, _ in seen] == [c.revision for c in store.changes(since)]
    check_revisions([rev for rev, _, _ in seen[:2]], since)


def test_watch_from_other_process_connection(store, again, base):
    """A second handle on the same state (another process's view) sees the first one's writes."""
    other = again(store)
    put(store, "a")
    changes = list(other.watch(base, timeout=1.0))
    assert [c.name for c in changes] == ["a"]


def test_concurrent_writers_are_seen_once_in_order(store, again, base, check_revisions):
    """Watchers of two handles see every write of two writer threads exactly once, in revision order."""
    other = again(store)
    writes = 40
    results: dict[str, list[int]] = {"same": [], "other": []}
    stops = {key: threading.Event() for key in results}

    def watch(key: str, handle: Store) -> None:
        for change in handle.watch(base, stop=stops[key], timeout=120):
            results[key].append(change.revision)
            if len(results[key]) == 2 * writes:
                return

    def write(prefix: str, handle: Store) -> None:
        for i in range(writes):
            put(handle, f"{prefix}{i}")

    watchers = [threading.Thread(target=watch, args=("same", store)), threading.Thread(target=watch,
                                                                                        args=("other", other))]
    writers = [threading.Thread(target=write, args=("a", store)), threading.Thread(target=write, args=("b", other))]
    for t in watchers + writers:
        t.start()
    try:
        for t in writers + watchers:
            t.join(120)
    finally:
        for stop in stops.values():
            stop.set()
    expected = [c.revision for c in store.changes(base, limit=10_000)]
    assert len(expected) == 2 * writes
    check_revisions(expected, base)
    assert results["same"] == expected
    assert results["other"] == expected


@pytest.mark.parametrize("kind, expected", [
    (None, [("Pod", "a"), ("Event", "e1"), ("Pod", "b")]),
    ("Pod", [("Pod", "a"), ("Pod", "b")]),
    ("Node", []),
], ids=["every-kind", "pods", "none-of-it"])
def test_watch_of_one_kind(store, base, kind, expected):
    """watch(kind=...) yields only that kind's changes; every kind without it."""
    for k, name in [("Pod", "a"), ("Event", "e1"), ("Pod", "b")]:
        put(store, name, kind=k)
    assert [(c.kind, c.name) for c in store.watch(base, timeout=0, kind=kind)] == expected


def test_a_timed_watch_returns_at_its_deadline(store):
    """A watch with a timeout and nothing to report ends (generous bound for a loaded machine)."""
    started = time.monotonic()
    assert list(store.watch(store.revision(), timeout=0.2)) == []
    assert time.monotonic() - started < 30


def test_compaction_is_bounded_and_gone_behind_horizon(store, backend, base):
    """Compaction drops at most max_rows per step; a watch behind the horizon is Gone."""
    while store.revision() < base + 29:  # a log of 30 entries (base is 1 on SQLite)
        put(store, f"o{store.revision()}")
    if backend.dense_revisions:  # a log of exactly 30 entries: the counts are exact
        assert store.compact(keep=5, max_rows=10) == 10
        assert store.compacted() == 10
    assert store.compact(keep=5, max_rows=100) > 0
    horizon = store.compacted()
    assert horizon == store.revision() - 5
    with pytest.raises(Gone):
        store.changes(horizon - 1)
    with pytest.raises(Gone):
        next(iter(store.watch(horizon - 1, timeout=0)))
    kept = [c.revision for c in store.changes(horizon)]
    assert len(kept) == 5 and kept[-1] == store.revision()
    assert [c.revision for c in store.watch(horizon, timeout=0)] == kept


def test_writes_compact_the_log_by_themselves(make_store):
    """With a short history, writing keeps the log bounded: the horizon follows the head."""
    store = make_store(history=10, compact_batch=5)
    for i in range(40):
        put(store, f"o{i}")
    assert store.compacted() > 0
    assert store.revision() - store.compacted() <= 10 + 5 + 1
    with pytest.raises(Gone):
        store.changes(0)


@pytest.mark.parametrize("page_bytes,sizes,expected", [
    (10_000, [3_000] * 6, [3, 3]),
    (10_000, [20_000, 100, 100], [1, 2]),
    (10_000, [100, 20_000, 100], [1, 1, 1]),
    (1 << 30, [100] * 5, [5]),
], ids=["even", "big-first", "big-middle", "all-fit"])
def test_changes_pages_by_bytes(make_store, backend, page_bytes, sizes, expected):
    """changes() stops a page at page_bytes of stored JSON, but always returns at least one change."""
    store = make_store(page_bytes=page_bytes)
    start = store.revision()  # 1 on SQLite: the `default` Namespace
    for i, size in enumerate(sizes):
        put_big(store, f"o{i}", size)
    since, pages = start, []
    while batch := store.changes(since):
        pages.append(len(batch))
        since = batch[-1].revision
    assert pages == expected
    assert since == store.revision()
    if backend.dense_revisions:
        assert since == start + len(sizes)


def test_list_pages_are_bounded_and_consistent(store):
    """list_pages yields every object once, in pages within the byte budget, at one revision."""
    for i in range(10):
        put_big(store, f"o{i}", 1_000)
    pages = list(store.list_pages("ConfigMap", "default", page_bytes=3_500))
    assert [len(p) for p, _ in pages] == [3, 3, 3, 1]
    assert {rev for _, rev in pages} == {store.revision()}
    names = [o["metadata"]["name"] for p, _ in pages for o in p]
    assert names == [o["metadata"]["name"] for o in store.list("ConfigMap", "default")[0]]


def test_list_pages_read_at_one_revision_while_others_write(store):
    """Writes made between pages are not in a paged list; its revision is the one it began at."""
    for i in range(6):
        put_big(store, f"o{i}", 1_000)
    head = store.revision()
    pages = store.list_pages("ConfigMap", "default", page_bytes=2_500)
    first, rev = next(pages)
    with store.transaction() as txn:  # a write between the pages
        txn.delete("ConfigMap", "default", "o5", txn.get("ConfigMap", "default", "o5"))
    put_big(store, "o9", 10)
    rest = [(p, r) for p, r in pages]
    assert rev == head and {r for _, r in rest} == {head}
    names = [o["metadata"]["name"] for o in first] + [o["metadata"]["name"] for p, _ in rest for o in p]
    assert names == [f"o{i}" for i in range(6)]
