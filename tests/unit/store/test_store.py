"""The SQLite store's own properties: private files, WAL and synchronous=FULL, VACUUM.

The backend-neutral semantics (revisions, transactions, watch, compaction, backup and restore)
are the contract suite's, tests/unit/store/contract/."""

from __future__ import annotations

import os
import stat


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


def test_vacuum_keeps_objects(store):
    """VACUUM returns space but keeps every object and the revision."""
    for i in range(50):
        put(store, f"o{i}", payload="x" * 1000)
    store.vacuum()
    assert store.count("ConfigMap") == 50
    assert store.revision() == BASE + 50
    assert store.integrity_check() == "ok"
