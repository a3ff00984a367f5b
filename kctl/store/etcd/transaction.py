"""The etcd store's optimistic transaction: reads at one snapshot, writes buffered, one etcd txn to commit.

Mirrors k8s.io/apiserver storage/etcd3 store.go's GuaranteedUpdate: read, decide, then commit
with a compare of everything read; a failed compare is a CommitConflict (409) and
`EtcdStore.transact` runs the caller's function again.

- Reads: the first read fixes the snapshot revision R (its header revision); later reads are
  ranges at R, so the transaction sees one consistent state, overlaid with its own writes.
- Commit: one /v3/kv/txn. Compares: every key read, MOD == the mod_revision seen (0: absent);
  a kind listed, its marker key MOD < R+1 (every write of the kind puts the marker, so any
  change to the kind fails it); the owner index ranges read, MOD < R+1; exists_in_namespace,
  the head key MOD < R+1 (any write to the store). Success ops: the object puts/deletes, the
  uid and owner index keys that change, each written kind's marker and the head key.
  Everything gets the txn's one revision (resourceVersion), patched into the returned objects
  after commit; until then their resourceVersion is provisional (the snapshot's revision + 1).
  Object ops go in the order of each key's last write (a watcher sees them in that order); a
  key written twice in one transaction is one write, its last (etcd allows one op per key).
- A nested `transaction()` is a savepoint of the write buffer (EtcdStore.transaction).
Called by kctl.store.etcd.store only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from kctl.machinery.errors import Gone
from kctl.store.contract import CommitConflict, StoreError
from kctl.store.etcd import keys
from kctl.store.etcd.client import MAX_TXN_OPS

if TYPE_CHECKING:
    from kctl.store.etcd.store import EtcdStore


@dataclass
class _Write:
    kind: str
    namespace: str
    name: str
    text: bytes | None  # the object's JSON; None: a delete
    uid: str
    owners: frozenset[str]


def _meta_index(obj: dict | None) -> tuple[str, frozenset[str]]:
    """(uid, owner uids) of an object, for the indexes."""
    if not obj:
        return "", frozenset()
    meta = obj.get("metadata") or {}
    return meta.get("uid") or "", frozenset(ref["uid"] for ref in meta.get("ownerReferences") or ()
                                            if isinstance(ref, dict) and ref.get("uid"))


class EtcdTransaction:
    """Read-your-writes access to the store at one snapshot; see the module docstring."""

    def __init__(self, store: "EtcdStore") -> None:
        self._store = store
        self._layout = store.layout
        self.revision: int | None = None
        #: key -> (mod_revision at the snapshot (0: absent), raw value or None)
        self._seen: dict[str, tuple[int, bytes | None]] = {}
        self._writes: dict[str, _Write] = {}
        self._returned: list[dict] = []
        self._listed: set[str] = set()
        self._ranges: set[str] = set()
        self._whole = False

    # -- reads -------------------------------------------------------------------------------

    def _range(self, key: str, *, prefix: bool = False) -> dict:
        body: dict = {"key": keys.b64(key)}
        if prefix:
            body["range_end"] = keys.range_end(key)
        return self._range_body(body)

    def _range_body(self, body: dict) -> dict:
        """A range at the snapshot (the first one fixes it)."""
        if self.revision is not None:
            body["revision"] = str(self.revision)
        try:
            answer = self._store.client.call("/kv/range", body)
        except Gone:
            raise CommitConflict("etcd compacted the revision this transaction reads at; try again") from None
        if self.revision is None:
            self.revision = int(answer["header"]["revision"])
        return answer

    def _committed(self, key: str) -> tuple[int, bytes | None]:
        """The key's (mod_revision, raw value) at the snapshot; read once, remembered for the commit."""
        seen = self._seen.get(key)
        if seen is None:
            kvs = self._range(key).get("kvs") or []
            seen = (int(kvs[0]["mod_revision"]), keys.unb64(kvs[0].get("value", ""))) if kvs else (0, None)
            self._seen[key] = seen
        return seen

    def prefetch(self, objects: Iterable[tuple[str, str, str]]) -> None:
        """Read the (kind, namespace, name) objects not read yet in one round trip (etcd only, optional).

        For callers about to get() many objects one by one (a batch of bindings): each get then
        costs no round trip. SQLite's transactions have no such method (their reads are local).
        """
        wanted = [key for key in dict.fromkeys(self._layout.object(*o) for o in objects)
                  if key not in self._seen and key not in self._writes]
        for start in range(0, len(wanted), MAX_TXN_OPS):
            chunk = wanted[start:start + MAX_TXN_OPS]
            at = {} if self.revision is None else {"revision": str(self.revision)}  # none yet: this read fixes it
            try:
                answer = self._store.client.call("/kv/txn", {"success": [
                    {"request_range": {"key": keys.b64(key), **at}} for key in chunk]})
            except Gone:
                raise CommitConflict("etcd compacted the revision this transaction reads at; try again") from None
            if self.revision is None:  # a read-only txn reads at one revision: its header's
                self.revision = int(answer["header"]["revision"])
            for key, response in zip(chunk, answer.get("responses") or []):
                kvs = (response.get("response_range") or {}).get("kvs") or []
                self._seen.setdefault(key, (int(kvs[0]["mod_revision"]), keys.unb64(kvs[0].get("value", "")))
                                      if kvs else (0, None))

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        key = self._layout.object(kind, namespace, name)
        write = self._writes.get(key)
        if write is not None:
            return None if write.text is None else keys.loads(write.text)
        mod, raw = self._committed(key)
        return None if raw is None else self._store.decode(kind, namespace, name, raw, mod)

    def list(self, kind: str) -> list[dict]:
        prefix = self._layout.kind_prefix(kind)
        answer = self._range(prefix, prefix=True)
        self._listed.add(kind)
        found: dict[tuple[str, str], dict] = {}
        for kv in answer.get("kvs") or []:
            key = keys.unb64(kv["key"]).decode()
            parsed = self._layout.parse(key)
            if parsed is None or parsed[0] != kind or key in self._writes:
                continue
            found[parsed[1], parsed[2]] = self._store.decode(kind, parsed[1], parsed[2],
                                                             keys.unb64(kv.get("value", "")), int(kv["mod_revision"]))
        for write in self._writes.values():
            if write.kind == kind and write.text is not None:
                found[write.namespace, write.name] = keys.loads(write.text)
        return [found[key] for key in sorted(found)]

    def exists_in_namespace(self, namespace: str) -> bool:
        if any(w.namespace == namespace and w.text is not None for w in self._writes.values()):
            return True
        body: dict = {"key": keys.b64(self._layout.objects_from), "range_end": keys.range_end(self._layout.root),
                      "keys_only": True}
        answer = self._range_body(body)
        self._whole = True
        for kv in answer.get("kvs") or []:
            key = keys.unb64(kv["key"]).decode()
            parsed = self._layout.parse(key)
            if parsed is not None and parsed[1] == namespace and key not in self._writes:
                return True
        return False

    def dependents(self, owner_uid: str) -> list[tuple[str, str, str]]:
        prefix = self._layout.owners(owner_uid)
        answer = self._range(prefix, prefix=True)
        self._ranges.add(prefix)
        found: set[tuple[str, str, str]] = set()
        for kv in answer.get("kvs") or []:
            key = keys.unb64(kv["key"]).decode()
            self._seen.setdefault(key, (int(kv["mod_revision"]), keys.unb64(kv.get("value", ""))))
            kind, namespace, name = json.loads(keys.unb64(kv.get("value", "")))
            found.add((kind, namespace, name))
        for write in self._writes.values():
            entry = (write.kind, write.namespace, write.name)
            if write.text is not None and owner_uid in write.owners:
                found.add(entry)
            else:
                found.discard(entry)
        return sorted(found)

    # -- writes ------------------------------------------------------------------------------

    def put(self, kind: str, namespace: str, name: str, obj: dict, *, event: str) -> dict:
        """Buffer obj (ADDED or MODIFIED); it gets its resourceVersion at commit."""
        del event  # etcd tells ADDED from MODIFIED itself (create_revision == mod_revision)
        key = self._layout.object(kind, namespace, name)
        self._committed(key)
        uid, owners = _meta_index(obj)
        self._buffer(key, _Write(kind, namespace, name, keys.dumps(obj), uid, owners), obj)
        return obj

    def delete(self, kind: str, namespace: str, name: str, obj: dict) -> dict:
        """Buffer the removal; obj gets the delete's resourceVersion at commit."""
        key = self._layout.object(kind, namespace, name)
        self._committed(key)
        self._buffer(key, _Write(kind, namespace, name, None, "", frozenset()), obj)
        return obj

    def _buffer(self, key: str, write: _Write, obj: dict) -> None:
        limit = self._store.max_writes_per_transaction
        if key not in self._writes and limit is not None and len(self._writes) >= limit:
            raise StoreError(f"etcd: a transaction may write at most {limit} objects (etcd's --max-txn-ops); "
                             f"this one writes more: split it")
        self._writes.pop(key, None)  # the ops go in the order of each key's last write
        self._writes[key] = write
        self._returned.append(obj)
        # provisional until commit patches in the txn's revision: at least the snapshot's next one
        obj.setdefault("metadata", {})["resourceVersion"] = str((self.revision or 0) + 1)

    # -- savepoints and commit ---------------------------------------------------------------

    def mark(self) -> tuple[dict[str, _Write], int]:
        return dict(self._writes), len(self._returned)

    def rollback_to(self, mark: tuple[dict[str, _Write], int]) -> None:
        self._writes = dict(mark[0])
        del self._returned[mark[1]:]

    def commit(self) -> int | None:
        """Send the one etcd txn; its revision (None: nothing to write). CommitConflict if a read changed."""
        if not self._writes:
            return None
        compares = self._compares()
        success = self._success_ops()
        answer = self._store.client.call("/kv/txn", {"compare": compares, "success": success}, write=True)
        if not answer.get("succeeded"):
            raise CommitConflict("etcd: what this transaction read changed before it committed; nothing was "
                                 "written (try again)")
        revision = int(answer["header"]["revision"])
        for obj in self._returned:
            obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
        return revision

    def _compares(self) -> list[dict]:
        after = str((self.revision or 0) + 1)
        per_key = {key: {"key": keys.b64(key), "result": "EQUAL", "target": "MOD", "mod_revision": str(mod)}
                   for key, (mod, _) in self._seen.items()}
        guards = [{"key": keys.b64(self._layout.marker(kind)), "result": "LESS", "target": "MOD",
                   "mod_revision": after} for kind in sorted(self._listed)]
        guards += [{"key": keys.b64(prefix), "range_end": keys.range_end(prefix), "result": "LESS",
                    "target": "MOD", "mod_revision": after} for prefix in sorted(self._ranges)]
        if self._whole:
            guards.append({"key": keys.b64(self._layout.head), "result": "LESS", "target": "MOD",
                           "mod_revision": after})
        if len(per_key) + len(guards) > MAX_TXN_OPS:  # coarsen: one marker guard stands for a kind's keys
            by_kind: dict[str, list[str]] = {}
            for key in per_key:
                parsed = self._layout.parse(key)
                if parsed is not None:
                    by_kind.setdefault(parsed[0], []).append(key)
            for kind, members in sorted(by_kind.items(), key=lambda item: -len(item[1])):
                if len(per_key) + len(guards) <= MAX_TXN_OPS:
                    break
                for key in members:
                    del per_key[key]
                guards.append({"key": keys.b64(self._layout.marker(kind)), "result": "LESS", "target": "MOD",
                               "mod_revision": after})
        compares = list(per_key.values()) + guards
        if len(compares) > MAX_TXN_OPS:
            raise StoreError(f"etcd: this transaction read {len(compares)} keys and ranges, more than one etcd "
                             f"txn may compare ({MAX_TXN_OPS}): split it")
        return compares

    def _success_ops(self) -> list[dict]:
        layout = self._layout
        objects: list[dict] = []
        deletes: set[str] = set()
        puts: dict[str, bytes] = {}
        for key, write in self._writes.items():
            mod, raw = self._seen[key]
            old_uid, old_owners = ("", frozenset()) if raw is None else _meta_index(
                self._store.decode(write.kind, write.namespace, write.name, raw, mod))
            entry = json.dumps([write.kind, write.namespace, write.name]).encode()
            if write.text is None:
                objects.append({"request_delete_range": {"key": keys.b64(key)}})
                if old_uid:
                    deletes.add(layout.uid(old_uid))
                deletes.update(layout.owner(uid, write.kind, write.namespace, write.name) for uid in old_owners)
            else:
                value = self._store.encode(write.kind, write.namespace, write.name, write.text)
                objects.append({"request_put": {"key": keys.b64(key), "value": keys.b64(value)}})
                if write.uid != old_uid or raw is None:
                    if old_uid:
                        deletes.add(layout.uid(old_uid))
                    if write.uid:
                        puts[layout.uid(write.uid)] = entry
                for uid in old_owners - write.owners if raw is not None else ():
                    deletes.add(layout.owner(uid, write.kind, write.namespace, write.name))
                for uid in write.owners - (old_owners if raw is not None else frozenset()):
                    puts[layout.owner(uid, write.kind, write.namespace, write.name)] = entry
            puts[layout.marker(write.kind)] = b""
        puts[layout.head] = b""
        ops = objects + [{"request_delete_range": {"key": keys.b64(key)}} for key in sorted(deletes - puts.keys())]
        ops += [{"request_put": {"key": keys.b64(key), "value": keys.b64(value)}} for key, value in puts.items()]
        if len(ops) > MAX_TXN_OPS:
            raise StoreError(f"etcd: this transaction needs {len(ops)} etcd operations (objects and their "
                             f"indexes), more than one etcd txn may hold ({MAX_TXN_OPS}): write fewer objects at once")
        return ops
