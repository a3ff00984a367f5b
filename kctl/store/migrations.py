"""The store's table layout, as sqlite-utils migrations; run when a store is first opened.

The store checks `PRAGMA user_version` on open (cheap) and imports this module only when
the file is new or older, so sqlite-utils stays out of `kctl get`'s start-up path.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from kctl.store.sqlite import SCHEMA_VERSION  # one number, kept by the store

store_migrations = Migrations("kctl.store")


@store_migrations()
def m001_objects_and_changes(db: Database) -> None:
    """objects by (kind, namespace, name); the change log; owner index; revision counters."""
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('revision', 0), ('compacted', 0)")
    db.execute("""CREATE TABLE objects (
        kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
        uid TEXT NOT NULL, rv INTEGER NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (kind, namespace, name)) WITHOUT ROWID""")
    db.execute("CREATE INDEX objects_uid ON objects(uid)")
    db.execute("CREATE INDEX objects_namespace ON objects(namespace)")
    db.execute("""CREATE TABLE changes (
        rev INTEGER PRIMARY KEY, type TEXT NOT NULL, kind TEXT NOT NULL,
        namespace TEXT NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL)""")
    db.execute("""CREATE TABLE owners (
        owner_uid TEXT NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
        PRIMARY KEY (owner_uid, kind, namespace, name)) WITHOUT ROWID""")


@store_migrations()
def m002_default_namespace(db: Database) -> None:
    """The `default` namespace exists from the start, as in Kubernetes (revision 1)."""
    rev = db.execute("UPDATE meta SET value=value+1 WHERE key='revision' RETURNING value").fetchone()[0]
    obj = {"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": "default", "uid": str(uuid.uuid4()), "resourceVersion": str(rev), "generation": 1,
                        "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "labels": {"kubernetes.io/metadata.name": "default"}},
           "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
    data = json.dumps(obj, separators=(",", ":"))
    db.execute("INSERT INTO objects(kind, namespace, name, uid, rv, data) VALUES ('Namespace', '', 'default', ?, ?, ?)",
               [obj["metadata"]["uid"], rev, data])
    db.execute("INSERT INTO changes(rev, type, kind, namespace, name, data) "
               "VALUES (?, 'ADDED', 'Namespace', '', 'default', ?)", [rev, data])


@store_migrations()
def m003_encrypt_secrets(db: Database) -> None:
    """Secrets are stored encrypted: make the key file beside the store and seal any clear Secret."""
    from pathlib import Path

    from kctl.store.encryption import KeyRing, key_path
    from kctl.store.sqlite import ensure_key_file, reseal_rows

    file = next(row[2] for row in db.conn.execute("PRAGMA database_list") if row[1] == "main")
    ring = ensure_key_file(db.conn, KeyRing(key_path(Path(file))))
    while reseal_rows(db.conn, ring, limit=500):
        pass


def apply(conn: sqlite3.Connection) -> None:
    """Bring the store at conn up to SCHEMA_VERSION, under one write lock (racing openers wait)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            store_migrations.apply(Database(conn))
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
