"""The SQLite store: objects, the global revision, the change log and its watch.

Only the API layer (kctl.api.apiserver) writes through here. Several processes may
open one store at once (the CLI, the daemon, git sync): the database is in WAL mode,
every write transaction starts with BEGIN IMMEDIATE under a busy timeout, and a write
that still meets a lock is retried, so "database is locked" never reaches a user.

Every committed write takes the next global revision (like etcd's) and appends
(revision, ADDED|MODIFIED|DELETED, object) to the change log; `watch(since)` yields
every later change in order, with no gaps, and raises Gone when `since` is older than
the compacted horizon.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from kctl.api.errors import APIError, Gone

SCHEMA_VERSION = 2
#: change-log entries kept behind the head before compaction may drop them
DEFAULT_HISTORY = 10_000
#: rows one compaction step deletes at most (keeps each step's cost bounded)
COMPACT_BATCH = 1_000
LOCK_RETRY_SECONDS = 120.0

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_loads = json.loads


def default_path() -> Path:
    """$KCTL_STORE, else $XDG_DATA_HOME/kctl/kctl.db (~/.local/share/kctl/kctl.db)."""
    if os.environ.get("KCTL_STORE"):
        return Path(os.environ["KCTL_STORE"])
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "kctl" / "kctl.db"


@dataclass(frozen=True)
class Change:
    """One entry of the change log."""

    revision: int
    type: str  # ADDED | MODIFIED | DELETED
    kind: str  # the ResourceType.group_kind
    namespace: str
    name: str
    obj: dict


class StoreError(APIError):
    """The store file cannot be opened or used (not a kctl store, unreadable, corrupt)."""


def _secure_file(path: Path) -> None:
    """Create the state folder 0700 and the database file 0600 before SQLite opens them."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)


def _retry_locked(fn):
    """Run fn, retrying while SQLite reports the database locked or busy."""
    deadline = time.monotonic() + LOCK_RETRY_SECONDS
    delay = 0.005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                raise StoreError(f"store is busy: {text} (gave up after {LOCK_RETRY_SECONDS:.0f}s)") from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


class Transaction:
    """A write transaction: read-your-writes access to objects, each write one revision."""

    def __init__(self, store: "Store", conn: sqlite3.Connection) -> None:
        self._store = store
        self._conn = conn
        self.changes: list[Change] = []

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        row = self._conn.execute(
            "SELECT data FROM objects WHERE kind=? AND namespace=? AND name=?",
            (kind, namespace, name)).fetchone()
        return _loads(row[0]) if row else None

    def exists_in_namespace(self, namespace: str) -> bool:
        row = self._conn.execute("SELECT 1 FROM objects WHERE namespace=? LIMIT 1", (namespace,)).fetchone()
        return row is not None

    def _next_revision(self) -> int:
        return self._conn.execute(
            "UPDATE meta SET value=value+1 WHERE key='revision' RETURNING value").fetchone()[0]

    def put(self, kind: str, namespace: str, name: str, obj: dict, *, event: str) -> dict:
        """Write obj (ADDED or MODIFIED); sets and returns it with its new resourceVersion."""
        rev = self._next_revision()
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(rev)
        data = _dumps(obj)
        uid = meta.get("uid", "")
        self._conn.execute(
            "INSERT OR REPLACE INTO objects(kind, namespace, name, uid, rv, data) VALUES (?,?,?,?,?,?)",
            (kind, namespace, name, uid, rev, data))
        self._conn.execute("DELETE FROM owners WHERE kind=? AND namespace=? AND name=?", (kind, namespace, name))
        for ref in meta.get("ownerReferences") or ():
            if isinstance(ref, dict) and ref.get("uid"):
                self._conn.execute("INSERT OR IGNORE INTO owners VALUES (?,?,?,?)",
                                   (ref["uid"], kind, namespace, name))
        self._log(rev, event, kind, namespace, name, data, obj)
        return obj

    def delete(self, kind: str, namespace: str, name: str, obj: dict) -> dict:
        """Remove the object; the DELETED change carries its last state at a new revision."""
        rev = self._next_revision()
        obj.setdefault("metadata", {})["resourceVersion"] = str(rev)
        self._conn.execute("DELETE FROM objects WHERE kind=? AND namespace=? AND name=?", (kind, namespace, name))
        self._conn.execute("DELETE FROM owners WHERE kind=? AND namespace=? AND name=?", (kind, namespace, name))
        self._log(rev, "DELETED", kind, namespace, name, _dumps(obj), obj)
        return obj

    def list(self, kind: str) -> list[dict]:
        """Every object of a kind, as this transaction sees them."""
        return [_loads(r[0]) for r in self._conn.execute("SELECT data FROM objects WHERE kind=?", (kind,))]

    def dependents(self, owner_uid: str) -> list[tuple[str, str, str]]:
        """(kind, namespace, name) of every object with an ownerReference to owner_uid."""
        return [tuple(r) for r in self._conn.execute(
            "SELECT kind, namespace, name FROM owners WHERE owner_uid=?", (owner_uid,))]

    def _log(self, rev: int, event: str, kind: str, namespace: str, name: str, data: str, obj: dict) -> None:
        self._conn.execute("INSERT INTO changes(rev, type, kind, namespace, name, data) VALUES (?,?,?,?,?,?)",
                           (rev, event, kind, namespace, name, data))
        self.changes.append(Change(rev, event, kind, namespace, name, obj))


class Store:
    """One SQLite file holding every object; safe to share between threads and processes."""

    def __init__(self, path: str | os.PathLike | None = None, *, synchronous: str = "FULL",
                 busy_timeout: float = 10.0, history: int = DEFAULT_HISTORY) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.synchronous = synchronous
        self.busy_timeout = busy_timeout
        self.history = history
        self._local = threading.local()
        self._wake = threading.Condition()
        self._writes = 0
        _secure_file(self.path)
        conn = self._conn()
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version < SCHEMA_VERSION:
            _retry_locked(lambda: self._migrate(conn))
        elif version > SCHEMA_VERSION:
            raise StoreError(f"{self.path}: store was written by a newer kctl (schema {version})")

    # -- connections -------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                       timeout=self.busy_timeout)
                conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
                mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
                if mode != "wal":
                    _retry_locked(lambda: conn.execute("PRAGMA journal_mode=WAL"))
                conn.execute(f"PRAGMA synchronous={self.synchronous}")
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{self.path}: cannot open store: {exc}") from exc
            self._local.conn = conn
            self._local.depth = 0
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        from kctl.api import migrations

        migrations.apply(conn)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- reads -------------------------------------------------------------------------

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A consistent read view (a deferred read transaction)."""
        conn = self._conn()
        if self._local.depth:
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def revision(self) -> int:
        return self._conn().execute("SELECT value FROM meta WHERE key='revision'").fetchone()[0]

    def compacted(self) -> int:
        return self._conn().execute("SELECT value FROM meta WHERE key='compacted'").fetchone()[0]

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        row = self._conn().execute(
            "SELECT data FROM objects WHERE kind=? AND namespace=? AND name=?", (kind, namespace, name)).fetchone()
        return _loads(row[0]) if row else None

    def get_by_uid(self, uid: str) -> dict | None:
        row = self._conn().execute("SELECT data FROM objects WHERE uid=?", (uid,)).fetchone()
        return _loads(row[0]) if row else None

    def list(self, kind: str, namespace: str | None = None, *, name: str | None = None) -> tuple[list[dict], int]:
        """All objects of a kind (in one namespace, or all), and the revision they were read at."""
        sql = "SELECT data FROM objects WHERE kind=?"
        args: list = [kind]
        if namespace is not None:
            sql += " AND namespace=?"
            args.append(namespace)
        if name is not None:
            sql += " AND name=?"
            args.append(name)
        with self.snapshot() as conn:
            rev = conn.execute("SELECT value FROM meta WHERE key='revision'").fetchone()[0]
            rows = conn.execute(sql + " ORDER BY namespace, name", args).fetchall()
        return [_loads(r[0]) for r in rows], rev

    def fingerprint(self, kind: str) -> tuple[int, int | None]:
        """(count, highest resourceVersion) of a kind: changes whenever any object of it does."""
        return tuple(self._conn().execute("SELECT count(*), max(rv) FROM objects WHERE kind=?", (kind,)).fetchone())

    def count(self, kind: str | None = None) -> int:
        if kind is None:
            return self._conn().execute("SELECT count(*) FROM objects").fetchone()[0]
        return self._conn().execute("SELECT count(*) FROM objects WHERE kind=?", (kind,)).fetchone()[0]

    # -- writes ------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """BEGIN IMMEDIATE ... COMMIT; nested calls become savepoints of the outer one."""
        conn = self._conn()
        depth = self._local.depth
        if depth:
            conn.execute(f"SAVEPOINT sp{depth}")
            self._local.depth += 1
            txn = self._local.txn
            mark = len(txn.changes)
            try:
                yield txn
            except BaseException:
                conn.execute(f"ROLLBACK TO sp{depth}")
                conn.execute(f"RELEASE sp{depth}")
                del txn.changes[mark:]
                raise
            else:
                conn.execute(f"RELEASE sp{depth}")
            finally:
                self._local.depth -= 1
            return
        _retry_locked(lambda: conn.execute("BEGIN IMMEDIATE"))
        txn = Transaction(self, conn)
        self._local.txn = txn
        self._local.depth = 1
        try:
            yield txn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            try:
                _retry_locked(lambda: conn.execute("COMMIT"))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            self._local.depth = 0
            self._local.txn = None
        if txn.changes:
            with self._wake:
                self._wake.notify_all()
            self._writes += len(txn.changes)
            if self._writes >= COMPACT_BATCH:
                self._writes = 0
                self.compact()

    # -- the change log ----------------------------------------------------------------

    def changes(self, since: int, *, limit: int = 1000) -> list[Change]:
        """Changes after revision `since`, oldest first; Gone if `since` is behind the horizon."""
        with self.snapshot() as conn:
            horizon = conn.execute("SELECT value FROM meta WHERE key='compacted'").fetchone()[0]
            if since < horizon:
                raise Gone(f"too old resource version: {since} (compacted to {horizon})")
            rows = conn.execute(
                "SELECT rev, type, kind, namespace, name, data FROM changes WHERE rev>? ORDER BY rev LIMIT ?",
                (since, limit)).fetchall()
        return [Change(r[0], r[1], r[2], r[3], r[4], _loads(r[5])) for r in rows]

    def watch(self, since: int, *, stop: threading.Event | None = None, poll: float = 0.005,
              timeout: float | None = None) -> Iterator[Change]:
        """Yield every change after `since`, in order, as it is committed; until stop is set.

        Writes from this process wake the watcher at once; writes from other processes are
        seen within `poll` seconds (one indexed query per poll).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while stop is None or not stop.is_set():
            batch = self.changes(since)
            if batch:
                for change in batch:
                    yield change
                since = batch[-1].revision
                continue
            if deadline is not None and time.monotonic() >= deadline:
                return
            with self._wake:
                self._wake.wait(poll)

    def compact(self, *, keep: int | None = None, max_rows: int = COMPACT_BATCH) -> int:
        """Drop change-log entries older than `keep` revisions behind the head, at most max_rows."""
        keep = self.history if keep is None else keep

        def step() -> int:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                rev = conn.execute("SELECT value FROM meta WHERE key='revision'").fetchone()[0]
                target = rev - keep
                row = conn.execute("SELECT max(rev), count(*) FROM (SELECT rev FROM changes WHERE rev<=? "
                                   "ORDER BY rev LIMIT ?)", (target, max_rows)).fetchone()
                upto, n = row
                if n:
                    conn.execute("DELETE FROM changes WHERE rev<=?", (upto,))
                    conn.execute("UPDATE meta SET value=max(value, ?) WHERE key='compacted'", (upto,))
                conn.execute("COMMIT")
                return n
            except BaseException:
                conn.execute("ROLLBACK")
                raise

        return _retry_locked(step)

    # -- maintenance -------------------------------------------------------------------

    def vacuum(self) -> None:
        """Compact the change log fully to `history`, then VACUUM to return space to the disk."""
        while self.compact():
            pass
        conn = self._conn()
        _retry_locked(lambda: conn.execute("VACUUM"))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def integrity_check(self) -> str:
        return self._conn().execute("PRAGMA integrity_check").fetchone()[0]

    def backup(self, dest: str | os.PathLike) -> int:
        """A consistent copy of the live store into dest (0600); returns its revision."""
        dest = Path(dest)
        if dest.exists():
            dest.unlink()
        _secure_file(dest)
        target = sqlite3.connect(dest)
        try:
            self._conn().backup(target)
            target.execute("PRAGMA journal_mode=DELETE")
            return target.execute("SELECT value FROM meta WHERE key='revision'").fetchone()[0]
        finally:
            target.close()

    def restore(self, source: str | os.PathLike) -> int:
        """Replace the store's content with a backup. Watchers get Gone and re-list.

        The revision continues from above both the old head and the backup's, so
        resourceVersions never go backwards.
        """
        source = Path(source)
        try:
            src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
            ok = src.execute("PRAGMA integrity_check").fetchone()[0]
            src_rev = src.execute("SELECT value FROM meta WHERE key='revision'").fetchone()[0]
            src.execute("SELECT count(*) FROM objects").fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{source}: not a kctl backup: {exc}") from exc
        if ok != "ok":
            raise StoreError(f"{source}: backup fails its integrity check: {ok}")
        old_rev = self.revision()
        conn = self._conn()
        _retry_locked(lambda: src.backup(conn))
        src.close()
        head = max(old_rev, src_rev) + 1

        def reset() -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("DELETE FROM changes")
            conn.execute("UPDATE meta SET value=? WHERE key IN ('revision', 'compacted')", (head,))
            conn.execute("COMMIT")

        _retry_locked(reset)
        with self._wake:
            self._wake.notify_all()
        return head
