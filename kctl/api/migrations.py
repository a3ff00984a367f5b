"""The store's table layout, as sqlite-utils migrations; run when a store is first opened.

The store checks `PRAGMA user_version` on open (cheap) and imports this module only when
the file is new or older, so sqlite-utils stays out of `kctl get`'s start-up path.
"""

from __future__ import annotations

import sqlite3

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from kctl.api.store import SCHEMA_VERSION  # one number, kept by the store

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
