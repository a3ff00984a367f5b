"""The SQLite store: objects, the global revision, the change log and its watch.

The default backend of the store contract (kctl.store.contract: the Store and Transaction
Protocols, their rules, and which of the methods below are SQLite's own).

Only the API layer (kctl.apiserver.server) writes through here. Several processes may
open one store at once (the CLI, the daemon, git sync): the database is in WAL mode,
every write transaction starts with BEGIN IMMEDIATE under a busy timeout, and a write
that still meets a lock is retried, so "database is locked" never reaches a user.

Every committed write takes the next global revision (like etcd's) and appends
(revision, ADDED|MODIFIED|DELETED, object) to the change log; `watch(since)` yields
every later change in order, with no gaps, and raises Gone when `since` is older than
the compacted horizon. A watcher that catches up reads the log in pages bounded by bytes
(`page_bytes`), not by a count of changes, and decodes one change at a time, so its memory
stays bounded however large the objects are. Watchers that are caught up share one read
of the log per commit (`_RecentChanges`, kube-apiserver's watch cache cut down): the first
one woken reads the new rows, the others take theirs from it.

Compaction is driven by the store's own state: any write that finds the log longer than
`history + compact_batch` revisions runs one bounded step, whichever process wrote.

The stored JSON of Secrets (objects and change log) is encrypted with the key file beside
the store (kctl.store.encryption); reads decrypt it, so every layer above sees plain objects.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import logging
import os
import sqlite3
import stat
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

from orjson import loads as _fast_loads

from kctl.machinery import compactjson
from kctl.machinery.errors import Gone
from kctl.store.contract import ENCRYPTED_KINDS, Change, StoreError
from kctl.store.encryption import StoreKeys

if TYPE_CHECKING:
    from kctl.store.encryption import KeyRing

log = logging.getLogger("kctl.store")

T = TypeVar("T")

SCHEMA_VERSION = 3
#: change-log entries kept behind the head before compaction may drop them
DEFAULT_HISTORY = 10_000
#: rows one compaction step deletes at most (keeps each step's cost bounded); a step runs
#: when the log holds more than history + COMPACT_BATCH revisions
COMPACT_BATCH = 1_000
#: seconds between the watch tail's looks for other processes' commits
DEFAULT_POLL = 0.005
#: longest a waiting watcher sleeps before it checks its stop event and deadline (and the log)
WATCH_CHECK = 0.05
#: bytes of stored JSON one page of the change log (or of a paged list) holds at most
#: (a single larger object still makes a page of its own)
PAGE_BYTES = 4 << 20
LOCK_RETRY_SECONDS = 120.0

_dumps = compactjson.text


#: stored texts up to this size are decoded by orjson; larger ones by json, which needs no working copy of the text
FAST_DECODE_LIMIT = 64 << 10


def _loads(text: str | bytes) -> Any:
    """A stored object decoded: by orjson (a third of json's time: a `kctl get` of 1,000 objects decodes
    them all), else by json: for a large object (orjson's working memory is a multiple of the text, and
    a catching-up watcher's peak memory is bounded) and where orjson refuses what json wrote (integers
    beyond 64 bits, NaN, lone surrogates), so every stored text reads back as json would read it."""
    if len(text) <= FAST_DECODE_LIMIT:
        try:
            return _fast_loads(text)
        except ValueError:  # orjson.JSONDecodeError
            pass
    return json.loads(text)


#: change rows a store holds for its watchers (_RecentChanges), at most (and at most page_bytes of them)
RECENT_ROWS = 1_000


class _RecentChanges:
    """The newest rows of the change log, read once for all of a store's watchers in this process.

    kube-apiserver's watch cache, cut down: a commit wakes every watcher (an informer per
    kind, 15 or more in a daemon), and each used to read the log for itself; now the first
    one woken reads the new rows, with the horizon, in one snapshot, and the others take
    theirs from here. A watcher behind what is held reads the log itself (and gets Gone
    when it is behind the horizon). Holds every row in (start, last], consecutive, at most
    RECENT_ROWS rows and page_bytes of stored JSON, the oldest dropped first. The store's
    `_watch_rows` uses it under `lock`.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: collections.deque[tuple] = collections.deque()
        self.bytes = 0
        self.start = self.last = -1
        #: the store's watch generation the rows were read at: every commit announced by then is in
        self.generation = -1

    def reset(self, revision: int) -> None:
        """Hold nothing, from `revision` on (the next reader reads the log after it)."""
        self.rows.clear()
        self.bytes, self.start, self.last, self.generation = 0, revision, revision, -1

    def add(self, rows: list[tuple], horizon: int, *, max_rows: int, max_bytes: int) -> None:
        """Append rows read after `last`; start afresh at a gap; keep only what the log still holds."""
        for row in rows:
            if row[0] != self.last + 1:  # compacted or restored past what was held
                self.reset(row[0] - 1)
            self.rows.append(row)
            self.bytes += row[6] or 0
            self.last = row[0]
        if horizon > self.last:  # a restore: the log starts again above the old head
            self.reset(horizon)
        while self.rows and (self.rows[0][0] <= horizon or len(self.rows) > max_rows or self.bytes > max_bytes):
            dropped = self.rows.popleft()
            self.bytes -= dropped[6] or 0
            self.start = dropped[0]
        if self.start < horizon and not self.rows:
            self.start = horizon


def default_path() -> Path:
    """$KCTL_STORE, else $XDG_DATA_HOME/kctl/kctl.db (~/.local/share/kctl/kctl.db)."""
    if os.environ.get("KCTL_STORE"):
        return Path(os.environ["KCTL_STORE"])
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "kctl" / "kctl.db"


def secure_folder(folder: Path) -> None:
    """Create the store's folder 0700, or tighten an existing one of ours to 0700.

    A folder that others may write to and that is shared (sticky, as /tmp) or not ours is
    refused: files kctl makes there (the key file) could be planted or swapped.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = folder.stat()
    except OSError as exc:
        raise StoreError(f"{folder}: cannot create the store's folder: {exc.strerror}") from None
    mode = stat.S_IMODE(st.st_mode)
    if not mode & 0o077:
        return
    shared = mode & 0o022 and (mode & stat.S_ISVTX or st.st_uid != os.getuid())
    if shared or st.st_uid != os.getuid():
        raise StoreError(f"{folder}: the store's folder has mode {mode:04o} and belongs to uid {st.st_uid}; "
                         "kctl keeps a store only in a folder of its own (0700): choose another folder")
    try:
        os.chmod(folder, mode & ~0o077)
    except OSError as exc:
        raise StoreError(f"{folder}: the store's folder has mode {mode:04o} and cannot be made 0700: "
                         f"{exc.strerror}") from None


def _secure_file(path: Path) -> None:
    """Create the state folder 0700 and the database file 0600 before SQLite opens them.

    Files of an existing store with looser modes (db, -wal, -shm) are tightened to 0600.
    """
    secure_folder(path.parent)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StoreError(f"{path}: cannot open store: {exc.strerror}") from None
    os.close(fd)
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            if name.stat().st_mode & 0o077:
                os.chmod(name, 0o600)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreError(f"{name}: readable by others and cannot be made 0600: {exc.strerror}") from None


def _list_query(kind: str, namespace: str | None, name: str | None) -> tuple[str, list]:
    """The SELECT of Store.list: (namespace, name, data) of a kind, in key order."""
    sql = "SELECT namespace, name, data FROM objects WHERE kind=?"
    args: list = [kind]
    if namespace is not None:
        sql += " AND namespace=?"
        args.append(namespace)
    if name is not None:
        sql += " AND name=?"
        args.append(name)
    return sql + " ORDER BY namespace, name", args


def _has_sealed_rows(conn: sqlite3.Connection) -> bool:
    """Whether any encrypted row exists (objects or change log)."""
    kinds = tuple(ENCRYPTED_KINDS)
    marks = ",".join("?" * len(kinds))
    return any(conn.execute(f"SELECT 1 FROM {table} WHERE kind IN ({marks}) AND typeof(data)='blob' LIMIT 1",
                            kinds).fetchone() for table in ("objects", "changes"))


def ensure_key_file(conn: sqlite3.Connection, ring: "KeyRing") -> "KeyRing":
    """Create the ring's key file (0600) on first use; refused if the store holds sealed rows without it."""
    if not ring.exists():
        from kctl.store.encryption import EncryptionError, new_key, write_key_file

        if _has_sealed_rows(conn):
            raise EncryptionError(f"key file {ring.path} is missing but the store holds encrypted Secrets "
                                  "(copy the key file of this store beside it; see docs/security.md)")
        secure_folder(ring.path.parent)
        write_key_file(ring.path, [new_key()], replace=False)
    return ring


def reseal_rows(conn: sqlite3.Connection, ring: "KeyRing", *, limit: int) -> int:
    """Encrypt with the ring's primary key up to `limit` Secret rows that are clear or use another key.

    Called inside a write transaction (migration, key rotation); rows keep their revision.
    Returns how many rows it rewrote.
    """
    from kctl.store.encryption import PREFIX, aad

    primary = ring.primary()
    mark = PREFIX + primary.name.encode() + b":"
    kinds = tuple(ENCRYPTED_KINDS)
    marks = ",".join("?" * len(kinds))
    done = 0
    for table, key in (("objects", "kind=? AND namespace=? AND name=?"), ("changes", "rev=?")):
        cols = "kind, namespace, name" if table == "objects" else "rev, kind, namespace, name"
        rows = conn.execute(f"SELECT {cols}, data FROM {table} WHERE kind IN ({marks}) AND "
                            f"(typeof(data)!='blob' OR substr(data, 1, ?)!=?) LIMIT ?",
                            (*kinds, len(mark), mark, limit - done)).fetchall()
        for row in rows:
            kind, namespace, name, data = row[-4:]
            what = f"{kind} {namespace}/{name}"
            text = ring.open(data, aad(kind, namespace, name), what=what) if isinstance(data, bytes) \
                else data.encode()
            conn.execute(f"UPDATE {table} SET data=? WHERE {key}",
                         (ring.seal(text, aad(kind, namespace, name)), *(row[:1] if table == "changes" else row[:3])))
        done += len(rows)
        if done >= limit:
            break
    return done


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
        return self._store._decode(kind, namespace, name, row[0]) if row else None

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
        data = self._store._encode(self._conn, kind, namespace, name, _dumps(obj))
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
        self._log(rev, "DELETED", kind, namespace, name,
                  self._store._encode(self._conn, kind, namespace, name, _dumps(obj)), obj)
        return obj

    def list(self, kind: str) -> list[dict]:
        """Every object of a kind, as this transaction sees them."""
        return [self._store._decode(kind, r[0], r[1], r[2]) for r in self._conn.execute(
            "SELECT namespace, name, data FROM objects WHERE kind=?", (kind,))]

    def dependents(self, owner_uid: str) -> list[tuple[str, str, str]]:
        """(kind, namespace, name) of every object with an ownerReference to owner_uid."""
        return [tuple(r) for r in self._conn.execute(
            "SELECT kind, namespace, name FROM owners WHERE owner_uid=?", (owner_uid,))]

    def _log(self, rev: int, event: str, kind: str, namespace: str, name: str, data: str | bytes,
             obj: dict) -> None:
        self._conn.execute("INSERT INTO changes(rev, type, kind, namespace, name, data) VALUES (?,?,?,?,?,?)",
                           (rev, event, kind, namespace, name, data))
        self.changes.append(Change(rev, event, kind, namespace, name, obj))


class Store(StoreKeys):
    """One SQLite file holding every object; safe to share between threads and processes."""

    def __init__(self, path: str | os.PathLike | None = None, *, synchronous: str = "FULL",
                 busy_timeout: float = 10.0, history: int = DEFAULT_HISTORY, compact_batch: int = COMPACT_BATCH,
                 page_bytes: int = PAGE_BYTES) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.synchronous = synchronous
        self.busy_timeout = busy_timeout
        self.history = history
        self.compact_batch = compact_batch
        self.page_bytes = page_bytes
        self.max_writes_per_transaction: int | None = None  # no limit
        self.reads_are_remote = False  # a local file
        self._local = threading.local()
        self._wake = threading.Condition()
        #: bumped on every commit seen (this process's at once, others' by the tail); watchers wait on it
        self._generation = 0
        #: the newest revision announced to watchers (a commit here, or the tail's read of the head)
        self._announced = 0
        self._watchers = 0
        self._tail: threading.Thread | None = None
        self._tail_poll = DEFAULT_POLL
        self._recent = _RecentChanges()
        _secure_file(self.path)
        conn = self._conn()
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version < SCHEMA_VERSION:
            _retry_locked(lambda: self._migrate(conn))
            with contextlib.suppress(sqlite3.OperationalError):  # no clear Secret left in the WAL
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
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
                conn.execute("PRAGMA secure_delete=ON")  # freed pages keep no clear text
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{self.path}: cannot open store: {exc}") from exc
            self._local.conn = conn
            self._local.depth = 0
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        from kctl.store import migrations

        migrations.apply(conn)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- encryption of Secrets -----------------------------------------------------------

    @property
    def where(self) -> str:
        """The store's file, as messages name it."""
        return str(self.path)

    def _decode(self, kind: str, namespace: str, name: str, data: str | bytes) -> dict:
        """A stored row's object; sealed rows (BLOBs) are decrypted first."""
        if data.__class__ is bytes:
            from kctl.store.encryption import aad

            data = self.keyring().open(data, aad(kind, namespace, name), what=f"{kind} {namespace}/{name}")
        return _loads(data)

    def _encode(self, conn: sqlite3.Connection, kind: str, namespace: str, name: str, text: str) -> str | bytes:
        """What to store for an object's JSON: sealed for the encrypted kinds, else the text."""
        if kind not in ENCRYPTED_KINDS:
            return text
        from kctl.store.encryption import aad

        ring = self.ensure_key(conn)
        return ring.seal(text.encode(), aad(kind, namespace, name))

    def ensure_key(self, conn: sqlite3.Connection | None = None) -> "KeyRing":
        """The key ring, its file created (0600) on first use; refused if sealed rows exist without it.

        conn: the connection to check for sealed rows (this thread's when not given).
        """
        return ensure_key_file(conn if conn is not None else self._conn(), self.keyring())

    def rotate_key(self) -> tuple[str, int]:
        """Add a new primary key, re-encrypt every Secret (objects and change log), drop the old keys.

        Reads keep working throughout: the file holds old and new keys until no row uses an
        old one and no reader still reads an older snapshot; writers in other processes see
        the new file at their next Secret write (they check it under the write lock).
        Returns (the new key's name, rows re-encrypted).
        """
        from kctl.store.encryption import new_key, write_key_file

        conn = self._conn()
        key = new_key()

        with self.transaction():  # under the write lock: every later write transaction sees the new file
            ring = self.ensure_key(conn)
            write_key_file(ring.path, [key, *ring.keys()], replace=True)
        total = 0
        while True:  # in bounded batches, each its own transaction: writers are not held up
            with self.transaction():
                n = reseal_rows(conn, self.keyring(), limit=200)
            total += n
            if not n:
                break

        with self.transaction():
            while n := reseal_rows(conn, self.keyring(), limit=1000):  # stragglers written with an old key
                total += n
        # Readers whose snapshot began before that commit may still meet old rows: drop the old
        # key only once every reader reads the newest snapshot (a FULL checkpoint waits for that).
        deadline = time.monotonic() + LOCK_RETRY_SECONDS
        while time.monotonic() < deadline:
            with contextlib.suppress(sqlite3.OperationalError):
                if conn.execute("PRAGMA wal_checkpoint(FULL)").fetchone()[0] == 0:
                    break
            time.sleep(0.05)
        write_key_file(self.key_path, [key], replace=True)
        with contextlib.suppress(sqlite3.OperationalError):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return key.name, total

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
        return self._decode(kind, namespace, name, row[0]) if row else None

    def get_by_uid(self, uid: str) -> dict | None:
        row = self._conn().execute("SELECT kind, namespace, name, data FROM objects WHERE uid=?", (uid,)).fetchone()
        return self._decode(*row) if row else None

    def list(self, kind: str, namespace: str | None = None, *, name: str | None = None) -> tuple[list[dict], int]:
        """All objects of a kind (in one namespace, or all), and the revision they were read at.

        Rows are decoded one at a time as SQLite steps through them, so the stored text of
        the whole list is never held beside the decoded objects.
        """
        sql, args = _list_query(kind, namespace, name)
        with self.snapshot() as conn:
            rev = conn.execute("SELECT value FROM meta WHERE key='revision'").fetchone()[0]
            items = [self._decode(kind, ns, nm, data) for ns, nm, data in conn.execute(sql, args)]
        return items, rev

    def list_pages(self, kind: str, namespace: str | None = None, *, name: str | None = None,
                   page_bytes: int | None = None) -> Iterator[tuple[list[dict], int]]:
        """As list, in pages of at most page_bytes of stored JSON each, all read at one revision.

        For callers that process a large kind page by page (memory bounded by the page, not
        the kind); the pages come from one read transaction on a connection of their own.
        """
        budget = self.page_bytes if page_bytes is None else page_bytes
        sql, args = _list_query(kind, namespace, name)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=self.busy_timeout)
        try:
            conn.execute("BEGIN")
            rev = conn.execute("SELECT value FROM meta WHERE key='revision'").fetchone()[0]
            page: list[dict] = []
            size = 0
            for ns, nm, data in conn.execute(sql, args):
                if page and size + len(data) > budget:
                    yield page, rev
                    page, size = [], 0
                page.append(self._decode(kind, ns, nm, data))
                size += len(data)
            if page:
                yield page, rev
        finally:
            conn.close()

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
        backlog = 0
        try:
            yield txn
            if txn.changes:  # the log's length behind the head, read from the store's own state
                horizon = conn.execute("SELECT value FROM meta WHERE key='compacted'").fetchone()[0]
                backlog = txn.changes[-1].revision - horizon
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
            self._changed(txn.changes[-1].revision)
            if backlog > self.history + self.compact_batch:
                self.compact(max_rows=self.compact_batch)

    def transact(self, fn: Callable[[Transaction], T]) -> T:
        """fn(txn) in one transaction (the contract's; SQLite never needs to run it again)."""
        with self.transaction() as txn:
            return fn(txn)

    # -- the change log ----------------------------------------------------------------

    def changes(self, since: int, *, limit: int = 1000, max_bytes: int | None = None) -> list[Change]:
        """Changes after revision `since`, oldest first; Gone if `since` is behind the horizon.

        At most `limit` changes and `max_bytes` of stored JSON (default: page_bytes), but
        always at least one change when there is one.
        """
        return [self._change(row) for row in self._change_rows(since, limit=limit, max_bytes=max_bytes)]

    def _change(self, row: tuple) -> Change:
        return Change(row[0], row[1], row[2], row[3], row[4], self._decode(row[2], row[3], row[4], row[5]))

    def _change_rows(self, since: int, *, limit: int, max_bytes: int | None, kind: str | None = None) -> list[tuple]:
        """One page of raw change rows after `since`, bounded by count and by bytes of stored JSON.

        With `kind`, the rows of other kinds come without their data (None: not read). One
        statement, itself a consistent read (a watcher behind the shared recent rows runs it
        whenever it is woken): revisions are consecutive, so the horizon is read only when the
        page is empty or does not start right after `since` (compacted or restored past it: Gone).
        """
        budget = self.page_bytes if max_bytes is None else max_bytes
        cursor = self._conn().execute(
            "SELECT rev, type, kind, namespace, name, CASE WHEN ?1 IS NULL OR kind=?1 THEN data END, length(data) "
            "FROM changes WHERE rev>?2 ORDER BY rev LIMIT ?3", (kind, since, limit))
        rows: list[tuple] = []
        try:
            size = 0
            for row in cursor:
                if not rows and row[0] != since + 1:
                    self._check_horizon(since)
                size += row[6] if row[5] is not None else 0
                if rows and size > budget:
                    break
                rows.append(row)
        finally:
            cursor.close()  # ends the statement's read transaction when the page stopped early
        if not rows:
            self._check_horizon(since)  # a restore empties the log above the old head
        return rows

    def _check_horizon(self, since: int) -> None:
        horizon = self.compacted()
        if since < horizon:
            raise Gone(f"too old resource version: {since} (compacted to {horizon})")

    def watch(self, since: int, *, stop: threading.Event | None = None, poll: float = 0.005,
              timeout: float | None = None, kind: str | None = None) -> Iterator[Change]:
        """Yield every change after `since`, in order, as it is committed; until stop is set.

        Writes from this process wake the watcher at once; writes from other processes are
        seen within `poll` seconds by the store's one tail thread (`_tail_loop`: one
        `PRAGMA data_version` per poll, however many watchers), which wakes every watcher.
        A watcher queries the change log only when woken. With `kind` (a group_kind), only
        that kind's changes are decoded and yielded (an informer watches one kind).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        self._start_watching(poll)
        try:
            while stop is None or not stop.is_set():
                with self._wake:
                    generation = self._generation
                rows = self._watch_rows(since, generation, kind)
                if rows:
                    since = rows[-1][0]
                    rows.reverse()
                    while rows:  # decode one at a time; a yielded change is the only decoded copy held here
                        row = rows.pop()
                        if kind is None or row[2] == kind:
                            yield self._change(row)
                    continue
                if deadline is not None and time.monotonic() >= deadline:
                    return
                with self._wake:
                    # a commit after `generation` was read bumps it: no wake-up is lost; the bounded
                    # wait keeps `stop` and the deadline honoured within WATCH_CHECK seconds
                    if self._generation == generation:
                        wait = WATCH_CHECK if deadline is None else max(0.0, min(WATCH_CHECK,
                                                                                 deadline - time.monotonic()))
                        self._wake.wait(wait)
        finally:
            with self._wake:
                self._watchers -= 1

    def _watch_rows(self, since: int, generation: int, kind: str | None) -> list[tuple]:
        """The change rows after `since` for a watcher woken at `generation` (see _RecentChanges)."""
        recent = self._recent
        with recent.lock:
            if since > recent.last:  # ahead of what is held (or nothing is): hold from here on
                recent.reset(since)
            if recent.generation < generation:
                self._read_recent(recent, generation)
            if recent.start <= since:
                return list(itertools.islice(recent.rows, since - recent.start, None))
        return self._change_rows(since, limit=1000, max_bytes=None, kind=kind)  # behind: its own reads

    def _read_recent(self, recent: "_RecentChanges", generation: int) -> None:
        """Add the log's rows after `recent.last` (one snapshot) and drop what compaction dropped."""
        rows: list[tuple] = []
        size, complete = 0, True
        with self.snapshot() as conn:
            horizon = self.compacted()
            cursor = conn.execute("SELECT rev, type, kind, namespace, name, data, length(data) FROM changes "
                                  "WHERE rev>? ORDER BY rev LIMIT ?", (recent.last, RECENT_ROWS + 1))
            for row in cursor:  # one row at a time: a page of at most page_bytes (and one row at least)
                size += row[6] or 0
                if len(rows) == RECENT_ROWS or (rows and size > self.page_bytes):
                    complete = False  # more remain: the next reader reads on
                    break
                rows.append(row)
            cursor.close()
        recent.add(rows, horizon, max_rows=RECENT_ROWS, max_bytes=self.page_bytes)
        if complete:
            recent.generation = generation

    def _changed(self, revision: int | None = None) -> None:
        """Wake every watcher: the change log grew (to `revision`, when known)."""
        with self._wake:
            if revision is not None:
                self._announced = max(self._announced, revision)
            self._generation += 1
            self._wake.notify_all()

    def _start_watching(self, poll: float) -> None:
        """Count one more watcher; start the tail thread if none runs."""
        with self._wake:
            self._watchers += 1
            self._tail_poll = min(poll, self._tail_poll)
            if self._tail is None or not self._tail.is_alive():
                self._tail = threading.Thread(target=self._tail_loop, name=f"kctl-store-tail:{self.path.name}",
                                              daemon=True)
                self._tail.start()

    def _tail_loop(self) -> None:
        """While anyone watches: notice other connections' commits (`PRAGMA data_version`) and wake watchers."""
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                   timeout=self.busy_timeout)
        except sqlite3.Error:
            log.warning("%s: the watch tail cannot open the store; watchers poll every %s s", self.path, WATCH_CHECK)
            with self._wake:
                self._tail = None
            return
        try:
            seen = None
            while True:
                with self._wake:
                    if self._watchers <= 0:
                        self._tail = None
                        return
                    poll = self._tail_poll
                try:
                    version = conn.execute("PRAGMA data_version").fetchone()[0]
                    if version != seen:  # someone committed: wake the watchers unless it was announced
                        seen = version
                        head = conn.execute("SELECT value FROM meta WHERE key='revision'").fetchone()[0]
                        with self._wake:
                            news = head != self._announced
                        if news:
                            self._changed(head)
                except sqlite3.Error:  # a busy or replaced file: wake the watchers, who will find out
                    seen = None
                    self._changed()
                time.sleep(poll)
        finally:
            conn.close()

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
                if n:  # the watchers' recent rows too: a watch from before the horizon is Gone
                    with self._recent.lock:
                        self._recent.add([], upto, max_rows=RECENT_ROWS, max_bytes=self.page_bytes)
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
        try:
            self.check_backup_keys(src, source, tables=("objects", "changes"), put_key="beside this store")
        except BaseException:
            src.close()
            raise
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
        if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:  # a backup of an older kctl
            _retry_locked(lambda: self._migrate(conn))
        with self._recent.lock:
            self._recent.reset(head)  # the watchers' recent rows are another history now
        self._changed(head)
        return head

