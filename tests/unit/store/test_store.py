"""The SQLite store: revisions, the change log, watch, compaction, backup and restore."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from kctl.machinery.errors import Gone
from kctl.store.sqlite import Store


#: a new store holds the `default` namespace, written at revision 1
BASE = 1


def put(store, name, ns="default", kind="ConfigMap", **extra):
    with store.transaction() as txn:
        return txn.put(kind, ns, name, {"metadata": {"name": name, "uid": name + "-uid", **extra}}, event="ADDED")


def test_files_are_private(tmp_path):
    """The state folder is 0700 and the database files 0600."""
    s = Store(tmp_path / "new" / "kctl.db")
    put(s, "a")
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o700
    for name in os.listdir(tmp_path / "new"):
        assert stat.S_IMODE(os.stat(tmp_path / "new" / name).st_mode) == 0o600, name


def test_wal_and_full_sync(store):
    """The store runs in WAL mode with synchronous=FULL."""
    conn = store._conn()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2


def test_revisions_strictly_increase(store):
    """Every write takes the next global revision, across kinds and namespaces."""
    revs = [int(put(store, f"o{i}", ns=f"n{i % 3}", kind=("Pod", "ConfigMap")[i % 2])["metadata"]["resourceVersion"])
            for i in range(10)]
    assert revs == list(range(BASE + 1, BASE + 11))
    assert store.revision() == BASE + 10


def test_rollback_takes_no_revision(store):
    """A transaction that fails writes nothing and leaves no gap in revisions."""
    put(store, "a")
    with pytest.raises(RuntimeError):
        with store.transaction() as txn:
            txn.put("ConfigMap", "default", "b", {"metadata": {"name": "b"}}, event="ADDED")
            raise RuntimeError("boom")
    assert store.get("ConfigMap", "default", "b") is None
    assert int(put(store, "c")["metadata"]["resourceVersion"]) == BASE + 2
    assert [c.revision for c in store.changes(BASE)] == [BASE + 1, BASE + 2]


def test_nested_transaction_rolls_back_alone(store):
    """A savepoint that fails undoes only its own writes."""
    with store.transaction() as txn:
        txn.put("ConfigMap", "default", "a", {"metadata": {"name": "a"}}, event="ADDED")
        with pytest.raises(ValueError):
            with store.transaction() as inner:
                inner.put("ConfigMap", "default", "b", {"metadata": {"name": "b"}}, event="ADDED")
                raise ValueError
    assert store.get("ConfigMap", "default", "a") is not None
    assert store.get("ConfigMap", "default", "b") is None
    assert [c.name for c in store.changes(BASE)] == ["a"]


def test_list_reports_its_revision(store):
    """A list returns the objects and the revision it saw."""
    put(store, "a")
    put(store, "b", ns="other")
    items, rev = store.list("ConfigMap", "default")
    assert [o["metadata"]["name"] for o in items] == ["a"]
    assert rev == BASE + 2
    assert len(store.list("ConfigMap")[0]) == 2


def test_watch_yields_changes_in_order(store):
    """A watcher sees every change after `since`, in order, including deletes."""
    put(store, "a")
    stop = threading.Event()
    seen = []

    def watch():
        for change in store.watch(BASE + 1, stop=stop):
            seen.append((change.revision, change.type, change.name))
            if len(seen) == 3:
                stop.set()

    t = threading.Thread(target=watch)
    t.start()
    put(store, "b")
    with store.transaction() as txn:
        txn.put("ConfigMap", "default", "a", {"metadata": {"name": "a"}}, event="MODIFIED")
        txn.delete("ConfigMap", "default", "b", {"metadata": {"name": "b"}})
    t.join(5)
    assert seen == [(BASE + 2, "ADDED", "b"), (BASE + 3, "MODIFIED", "a"), (BASE + 4, "DELETED", "b")]


def test_watch_from_other_process_connection(store):
    """A second Store on the same file (another process's view) sees the first one's writes."""
    other = Store(store.path)
    put(store, "a")
    changes = list(other.watch(BASE, timeout=1.0))
    assert [c.name for c in changes] == ["a"]


def test_compaction_is_bounded_and_gone_behind_horizon(store):
    """Compaction drops at most max_rows per step; a watch behind the horizon is Gone."""
    for i in range(30 - BASE):
        put(store, f"o{i}")
    assert store.compact(keep=5, max_rows=10) == 10
    assert store.compacted() == 10
    assert store.compact(keep=5, max_rows=100) == 15
    assert store.compacted() == 25
    with pytest.raises(Gone):
        store.changes(24)
    assert [c.revision for c in store.changes(25)] == [26, 27, 28, 29, 30]


def test_vacuum_keeps_objects(store):
    """VACUUM returns space but keeps every object and the revision."""
    for i in range(50):
        put(store, f"o{i}", payload="x" * 1000)
    store.vacuum()
    assert store.count("ConfigMap") == 50
    assert store.revision() == BASE + 50
    assert store.integrity_check() == "ok"


def test_backup_and_restore(store, tmp_path):
    """A backup restores the objects; revisions continue upwards and watchers get Gone."""
    put(store, "a")
    backup = tmp_path / "backup.db"
    assert store.backup(backup) == BASE + 1
    assert stat.S_IMODE(os.stat(backup).st_mode) == 0o600
    put(store, "b")
    put(store, "c")
    head = store.restore(backup)
    assert head == BASE + 4
    assert store.get("ConfigMap", "default", "b") is None
    assert store.get("ConfigMap", "default", "a") is not None
    with pytest.raises(Gone):
        store.changes(BASE + 3)
    assert int(put(store, "d")["metadata"]["resourceVersion"]) == BASE + 5


def test_restore_refuses_garbage(store, tmp_path):
    """Restoring a file that is not a kctl backup fails and changes nothing."""
    put(store, "a")
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(Exception, match="not a kctl backup"):
        store.restore(bad)
    assert store.get("ConfigMap", "default", "a") is not None


def test_owner_index(store):
    """Objects are found by the uid their ownerReferences name."""
    put(store, "child", ownerReferences=[{"uid": "parent-uid", "kind": "X", "name": "p", "apiVersion": "v1"}])
    with store.transaction() as txn:
        assert txn.dependents("parent-uid") == [("ConfigMap", "default", "child")]
