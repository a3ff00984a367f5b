"""The etcd store's export and import of state, in kctl's one backup format: a SQLite store file.

`backup(store, dest)` reads every object under the store's prefix at one etcd revision and
writes them into a fresh kctl.store.sqlite file (schema made by that module, so either backend
restores it); Secrets stay sealed (with the store's key ring and the same authenticated data
as SQLite uses). `restore(store, source)` checks such a file (any kctl backup, from either
backend), then replaces everything under the prefix: a restore key first (whole-store
watchers get Gone), a delete of the prefix, the objects and their indexes in transactions
of bounded size, and finally compaction to the new head, so older revisions are Gone.

etcd cannot set its revision: after a restore the revision continues above the store's old
head (etcd's counter) but not necessarily above the backup's, when that came from another
store with a higher counter. Called by EtcdStore.backup/restore.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from kctl.store.contract import ENCRYPTED_KINDS, StoreError
from kctl.store.etcd import keys

if TYPE_CHECKING:
    from kctl.store.etcd.store import EtcdStore

#: etcd ops and bytes per restore transaction (below --max-txn-ops and --max-request-bytes)
BATCH_OPS = 100
BATCH_BYTES = 1 << 20


def scan(store: "EtcdStore") -> tuple[int, int, Iterator[tuple[str, str, str, int, bytes]]]:
    """(etcd revision read at, store head, every object as (kind, namespace, name, mod, raw value))."""
    layout = store.layout
    answer = store.client.call("/kv/txn", {"success": [
        {"request_range": {"key": keys.b64(layout.head)}},
        {"request_range": {"key": keys.b64(layout.root), "range_end": keys.range_end(layout.root), "limit": "1"}}]})
    at = int(answer["header"]["revision"])
    head_kvs = answer["responses"][0]["response_range"].get("kvs") or []
    head = int(head_kvs[0]["mod_revision"]) if head_kvs else 0

    def objects() -> Iterator[tuple[str, str, str, int, bytes]]:
        start = layout.objects_from
        while True:
            page = store.client.call("/kv/range", {"key": keys.b64(start), "range_end": keys.range_end(layout.root),
                                                   "revision": str(at), "limit": "256"})
            kvs = page.get("kvs") or []
            for kv in kvs:
                key = keys.unb64(kv["key"]).decode()
                parsed = layout.parse(key)
                if parsed is not None:
                    yield (*parsed, int(kv["mod_revision"]), keys.unb64(kv.get("value", "")))
            if not page.get("more") or not kvs:
                return
            start = keys.unb64(kvs[-1]["key"]).decode() + "\0"

    return at, head, objects()


def backup(store: "EtcdStore", dest: str | os.PathLike) -> int:
    """Write the store's objects into a new SQLite store file at dest (0600); the store's head revision."""
    from kctl.store.sqlite import Store as SQLiteStore
    from kctl.store.sqlite import secure_folder

    dest = Path(dest)
    work = dest.parent / f".{dest.name}.{os.getpid()}.backup.d"
    shutil.rmtree(work, ignore_errors=True)
    secure_folder(work)
    try:
        SQLiteStore(work / "kctl.db").close()  # today's schema, made by its owner
        conn = sqlite3.connect(work / "kctl.db", isolation_level=None)
        try:
            _, head = _fill(store, conn)
            conn.execute("PRAGMA journal_mode=DELETE")
        finally:
            conn.close()
        if dest.exists():
            dest.unlink()
        os.replace(work / "kctl.db", dest)
        os.chmod(dest, 0o600)
        return head
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _fill(store: "EtcdStore", conn: sqlite3.Connection) -> tuple[int, int]:
    from kctl.store.encryption import aad

    _, head, objects = scan(store)
    conn.execute("BEGIN")
    for table in ("objects", "changes", "owners"):
        conn.execute(f"DELETE FROM {table}")
    count = 0
    for kind, namespace, name, mod, raw in objects:
        obj = store.decode(kind, namespace, name, raw, mod)
        text = keys._dumps(obj)
        data: str | bytes = text
        if kind in ENCRYPTED_KINDS:
            data = store.ensure_key().seal(text.encode(), aad(kind, namespace, name))
        meta = obj.get("metadata") or {}
        conn.execute("INSERT INTO objects(kind, namespace, name, uid, rv, data) VALUES (?,?,?,?,?,?)",
                     (kind, namespace, name, meta.get("uid") or "", mod, data))
        for ref in meta.get("ownerReferences") or ():
            if isinstance(ref, dict) and ref.get("uid"):
                conn.execute("INSERT OR IGNORE INTO owners VALUES (?,?,?,?)", (ref["uid"], kind, namespace, name))
        count += 1
    conn.execute("UPDATE meta SET value=? WHERE key IN ('revision', 'compacted')", (head,))
    conn.execute("COMMIT")
    return count, head


def _open_backup(store: "EtcdStore", source: Path) -> sqlite3.Connection:
    """The backup file, read-only, checked: a kctl store whose Secrets open with this store's keys."""
    try:
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        ok = src.execute("PRAGMA integrity_check").fetchone()[0]
        src.execute("SELECT value FROM meta WHERE key='revision'").fetchone()
        src.execute("SELECT count(*) FROM objects").fetchone()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{source}: not a kctl backup: {exc}") from None
    if ok != "ok":
        src.close()
        raise StoreError(f"{source}: backup fails its integrity check: {ok}")
    try:
        store.check_backup_keys(src, source, tables=("objects",), put_key=f"at {store.key_path} (this store's state)")
    except StoreError:
        src.close()
        raise
    return src


def restore(store: "EtcdStore", source: str | os.PathLike) -> int:
    """Replace everything under the store's prefix with a backup's objects; the new head revision."""
    from kctl.store.encryption import aad

    source = Path(source)
    src = _open_backup(store, source)
    layout = store.layout
    client = store.client
    try:
        client.call("/kv/put", {"key": keys.b64(layout.epoch), "value": keys.b64(b"restore")}, write=True)
        client.call("/kv/deleterange", {"key": keys.b64(layout.root), "range_end": keys.range_end(layout.root)},
                    write=True)
        batch: dict[str, bytes] = {}
        size = 0
        for kind, namespace, name, data in src.execute("SELECT kind, namespace, name, data FROM objects"):
            text = store.keyring().open(data, aad(kind, namespace, name), what=f"{kind} {namespace}/{name}") \
                if isinstance(data, bytes) else data.encode()
            obj = keys.loads(text)
            entry = json.dumps([kind, namespace, name]).encode()
            batch[layout.object(kind, namespace, name)] = store.encode(kind, namespace, name, keys.dumps(obj))
            meta = obj.get("metadata") or {}
            if meta.get("uid"):
                batch[layout.uid(meta["uid"])] = entry
            for ref in meta.get("ownerReferences") or ():
                if isinstance(ref, dict) and ref.get("uid"):
                    batch[layout.owner(ref["uid"], kind, namespace, name)] = entry
            batch[layout.marker(kind)] = b""
            size += len(text)
            if len(batch) >= BATCH_OPS or size >= BATCH_BYTES:
                _write(store, batch)
                batch, size = {}, 0
        _write(store, batch)
    finally:
        src.close()
    head = store.revision()
    store.compact_to(head, physical=True)
    return head


def _write(store: "EtcdStore", batch: dict[str, bytes]) -> None:
    """Put a batch of keys and the head in one etcd txn (no compares: a restore replaces everything)."""
    batch = {**batch, store.layout.head: b""}
    store.client.call("/kv/txn", {"success": [{"request_put": {"key": keys.b64(key), "value": keys.b64(value)}}
                                              for key, value in batch.items()]}, write=True)
