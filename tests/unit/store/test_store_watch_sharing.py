"""A store's watchers share one read of the change log per commit (kctl.store.sqlite._RecentChanges)."""

from __future__ import annotations

import threading

import pytest

from kctl.machinery.errors import Gone
from kctl.store.sqlite import Store


def put(store: Store, name: str, kind: str = "ConfigMap") -> int:
    with store.transaction() as txn:
        txn.put(kind, "default", name, {"metadata": {"name": name}}, event="ADDED")
    return store.revision()


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "s" / "kctl.db")
    yield s
    s.close()


def test_caught_up_watchers_read_the_log_once_per_commit(store, monkeypatch):
    since = put(store, "first")
    reads = {"shared": 0, "own": 0}
    shared, own = Store._read_recent, Store._change_rows

    def count_shared(self, *args, **kwargs):
        reads["shared"] += 1
        return shared(self, *args, **kwargs)

    def count_own(self, *args, **kwargs):
        reads["own"] += 1
        return own(self, *args, **kwargs)

    monkeypatch.setattr(Store, "_read_recent", count_shared)
    monkeypatch.setattr(Store, "_change_rows", count_own)
    stop = threading.Event()
    seen: list[list[str]] = [[] for _ in range(6)]
    ready = threading.Barrier(7)

    def watch(i: int) -> None:
        kind = "ConfigMap" if i % 2 else None
        ready.wait()
        for change in store.watch(since, stop=stop, kind=kind):
            seen[i].append(change.name)

    threads = [threading.Thread(target=watch, args=(i,), daemon=True) for i in range(6)]
    for t in threads:
        t.start()
    ready.wait()
    names = [f"cm{i}" for i in range(20)]
    for name in names:
        put(store, name)
        put(store, name, kind="Secret")
    deadline = threading.Event()
    for _ in range(200):
        if all(len(s) >= (20 if i % 2 else 40) for i, s in enumerate(seen)):
            break
        deadline.wait(0.05)
    stop.set()
    for t in threads:
        t.join(5)
    for i, names_seen in enumerate(seen):  # every change, in order, once; a kind's watcher only its kind
        assert names_seen == (names if i % 2 else [n for name in names for n in (name, name)])
    assert reads["own"] == 0  # no watcher read the log for itself
    assert reads["shared"] <= 2 * 40 + 6  # at most one read per commit (and a first per watcher)


def test_a_watch_from_before_the_horizon_is_gone_though_its_rows_were_held(store):
    start = put(store, "a")
    keeper = store.watch(start, timeout=0)
    put(store, "b")
    put(store, "c")
    assert [c.name for c in keeper] == ["b", "c"]  # the store now holds rows after `start`
    store.compact(keep=0)
    with pytest.raises(Gone):
        list(store.watch(start, timeout=0))


def test_a_watch_after_a_restore_is_gone(store, tmp_path):
    start = put(store, "a")
    backup = tmp_path / "backup.db"
    store.backup(backup)
    put(store, "b")
    assert [c.name for c in store.watch(start, timeout=0)] == ["b"]
    store.restore(backup)
    with pytest.raises(Gone):
        list(store.watch(start, timeout=0))
