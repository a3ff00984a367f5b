"""EtcdStore: kctl's store contract (kctl.store.contract.Store) on an etcd cluster.

The store of several control hosts (issue 17); chosen by kctl.store.open for an `etcd://`
address. It follows k8s.io/apiserver storage/etcd3: objects under `<prefix>/<resource>/...`
(kctl.store.etcd.keys), resourceVersion = the key's mod_revision (so one etcd transaction
gives all its writes one revision, and another prefix's writes leave gaps), optimistic
transactions committed as one etcd txn (transaction.py: store.go's GuaranteedUpdate), the
change log read from etcd's history by watches (watch.py: watcher.go), compaction by revision
(compactor.py: compact.go; and, as SQLite, when a write finds the history longer than
history + compact_batch). Secrets are sealed (kctl.store.encryption, key file
`<state_path>.keys`) before they reach etcd. `path` is the local anchor (state_path) of the
key file, audit log, PKI and leader lock files.

revision() is the mod_revision of the store's head key (put by every write transaction), so
kctl's own bookkeeping writes (the compaction horizon, the compactor's key) never move it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import random
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, TypeVar

from kctl.machinery.errors import Gone
from kctl.store.contract import ENCRYPTED_KINDS, Change, CommitConflict, StoreError
from kctl.store.encryption import StoreKeys
from kctl.store.etcd import keys
from kctl.store.etcd.address import EtcdAddress, EtcdTLS
from kctl.store.etcd.client import DEFAULT_TIMEOUT, EtcdClient
from kctl.store.etcd.transaction import EtcdTransaction
from kctl.store.etcd.watch import read_changes, watch_changes

if TYPE_CHECKING:
    from kctl.store.encryption import KeyRing

log = logging.getLogger("kctl.store.etcd")
T = TypeVar("T")

DEFAULT_HISTORY = 10_000
COMPACT_BATCH = 1_000
PAGE_BYTES = 4 << 20
#: the most object writes one transaction may hold (fits --max-txn-ops 128 with index and marker keys)
MAX_WRITES = 32
#: how long transact() retries a transaction that keeps meeting conflicts
TRANSACT_TIMEOUT = 120.0
#: keys one range of a paged list reads
LIST_CHUNK = 256


class EtcdStore(StoreKeys):
    """The store contract on etcd; see the module docstring."""

    def __init__(self, address: EtcdAddress, *, state_path: str | Path, tls: EtcdTLS | None = None,
                 history: int = DEFAULT_HISTORY, compaction_interval: float | None = None,
                 page_bytes: int = PAGE_BYTES, request_timeout: float = DEFAULT_TIMEOUT,
                 compact_batch: int = COMPACT_BATCH) -> None:
        from kctl.store.sqlite import secure_folder

        self.address = address
        self.path = Path(state_path)
        self.history = history
        self.compact_batch = compact_batch
        self.page_bytes = page_bytes
        self.max_writes_per_transaction: int | None = MAX_WRITES
        self.reads_are_remote = True  # the API server caches what it reads per request (kctl.apiserver.configcache)
        self.client = EtcdClient(address, tls=tls, request_timeout=request_timeout)
        self.layout = keys.Layout(address.prefix)
        self._local = threading.local()
        self.horizon_seen = 0
        secure_folder(self.path.parent)
        self._bootstrap()
        self._compactor = None
        if compaction_interval:
            from kctl.store.etcd.compactor import Compactor

            self._compactor = Compactor(self, compaction_interval)
            self._compactor.start()

    def _bootstrap(self) -> None:
        """A new store (no head key) gets the `default` Namespace, once, whoever races (compare MOD == 0)."""
        if self._range(self.layout.head).get("kvs"):
            return
        obj = {"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "default", "uid": str(uuid.uuid4()), "generation": 1,
                            "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                            "labels": {"kubernetes.io/metadata.name": "default"}},
               "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
        entry = json.dumps(["Namespace", "", "default"]).encode()
        puts = {self.layout.object("Namespace", "", "default"): keys.dumps(obj),
                self.layout.uid(obj["metadata"]["uid"]): entry, self.layout.marker("Namespace"): b"",
                self.layout.head: b""}
        self.client.call("/kv/txn", {
            "compare": [{"key": keys.b64(self.layout.head), "result": "EQUAL", "target": "MOD", "mod_revision": "0"}],
            "success": [{"request_put": {"key": keys.b64(k), "value": keys.b64(v)}} for k, v in puts.items()]},
            write=True)

    # -- encryption ------------------------------------------------------------------------

    @property
    def where(self) -> str:
        """The etcd:// address, as messages name the store."""
        return str(self.address)

    def ensure_key(self) -> "KeyRing":
        """The key ring, its file made (0600) on first use; refused when etcd holds Secrets without it."""
        ring = self.keyring()
        if not ring.exists():
            from kctl.store.encryption import EncryptionError, new_key, write_key_file
            from kctl.store.sqlite import secure_folder

            if any(self.count(kind) for kind in ENCRYPTED_KINDS):
                raise EncryptionError(f"key file {ring.path} is missing but the store holds encrypted Secrets "
                                      "(copy the key file of this store beside its state; see docs/security.md)")
            secure_folder(ring.path.parent)
            write_key_file(ring.path, [new_key()], replace=False)
        return ring

    def decode(self, kind: str, namespace: str, name: str, raw: bytes, revision: int) -> dict:
        """A stored value's object (opened when sealed) with resourceVersion = revision."""
        if raw.startswith(keys.SEALED):
            from kctl.store.encryption import aad

            raw = self.keyring().open(raw, aad(kind, namespace, name), what=f"{kind} {namespace}/{name}")
        obj = keys.loads(raw)
        obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
        return obj

    def encode(self, kind: str, namespace: str, name: str, text: bytes) -> bytes:
        """What to store for an object's JSON: sealed for the encrypted kinds."""
        if kind not in ENCRYPTED_KINDS:
            return text
        from kctl.store.encryption import aad

        return self.ensure_key().seal(text, aad(kind, namespace, name))

    def rotate_key(self) -> tuple[str, int]:
        """A new primary key; every Secret re-sealed (MODIFIED events); history compacted; old keys dropped."""
        from kctl.store.encryption import key_name_of, new_key, write_key_file

        key = new_key()
        ring = self.ensure_key()
        write_key_file(ring.path, [key, *ring.keys()], replace=True)
        total = 0
        while True:
            stale = [(kind, ns, name) for kind in ENCRYPTED_KINDS for ns, name, raw in self._raw_objects(kind)
                     if key_name_of(raw) != key.name]
            if not stale:
                break
            for start in range(0, len(stale), MAX_WRITES):
                total += self.transact(lambda txn, chunk=stale[start:start + MAX_WRITES]: _reseal(txn, chunk))
        self.compact_to(self.revision(), physical=True)  # no value sealed with an old key stays in the history
        write_key_file(ring.path, [key], replace=True)
        return key.name, total

    def _raw_objects(self, kind: str) -> Iterator[tuple[str, str, bytes]]:
        """(namespace, name, stored value) of every object of a kind."""
        answer = self._range(self.layout.kind_prefix(kind), prefix=True)
        for kv in answer.get("kvs") or []:
            parsed = self.layout.parse(keys.unb64(kv["key"]).decode())
            if parsed is not None:
                yield parsed[1], parsed[2], keys.unb64(kv.get("value", ""))

    # -- reads -----------------------------------------------------------------------------

    def _range(self, key: str, *, prefix: bool = False, **options: object) -> dict:
        body: dict = {"key": keys.b64(key), **{k: v for k, v in options.items() if v is not None}}
        if prefix:
            body["range_end"] = keys.range_end(key)
        return self.client.call("/kv/range", body)

    def reads(self, *ranges: dict) -> tuple[int, list[dict]]:
        """Several ranges in one read-only txn (one snapshot): (header revision, each range's answer)."""
        answer = self.client.call("/kv/txn", {"success": [{"request_range": r} for r in ranges]})
        return int(answer["header"]["revision"]), [r.get("response_range") or {} for r in answer["responses"]]

    def key_range(self, key: str, *, prefix: bool = False, **options: object) -> dict:
        body: dict = {"key": keys.b64(key), **options}
        if prefix:
            body["range_end"] = keys.range_end(key)
        return body

    @staticmethod
    def mod(answer: dict) -> int:
        kvs = answer.get("kvs") or []
        return int(kvs[0]["mod_revision"]) if kvs else 0

    def revision(self) -> int:
        """The head: the revision of the store's latest write transaction (its head key)."""
        return self.mod(self._range(self.layout.head))

    def compacted(self) -> int:
        """The horizon this store's compactions recorded (`<prefix>/.kctl/compacted`)."""
        kvs = self._range(self.layout.compacted).get("kvs") or []
        self.horizon_seen = int(keys.unb64(kvs[0].get("value", ""))) if kvs else 0
        return self.horizon_seen

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        kvs = self._range(self.layout.object(kind, namespace, name)).get("kvs") or []
        return self.decode(kind, namespace, name, keys.unb64(kvs[0].get("value", "")),
                           int(kvs[0]["mod_revision"])) if kvs else None

    def get_by_uid(self, uid: str) -> dict | None:
        kvs = self._range(self.layout.uid(uid)).get("kvs") or []
        if not kvs:
            return None
        kind, namespace, name = json.loads(keys.unb64(kvs[0].get("value", "")))
        obj = self.get(kind, namespace, name)
        return obj if obj is not None and (obj.get("metadata") or {}).get("uid") == uid else None

    def list(self, kind: str, namespace: str | None = None, *, name: str | None = None) -> tuple[list[dict], int]:
        """Objects of a kind from one snapshot, in (namespace, name) order, and the store's head then."""
        if namespace is not None and name is not None:
            span = self.key_range(self.layout.object(kind, namespace, name))
        else:
            span = self.key_range(self.layout.kind_prefix(kind, namespace), prefix=True)
        _, (found, head) = self.reads(span, self.key_range(self.layout.head))
        items = self._decode_kvs(kind, found.get("kvs") or [], name)
        items.sort(key=lambda item: item[0])
        return [obj for _, obj in items], self.mod(head)

    def _decode_kvs(self, kind: str, kvs: list[dict], name: str | None) -> list[tuple[tuple[str, str], dict]]:
        """((namespace, name), object) of the kvs that are objects of kind (and name, when given)."""
        items = []
        for kv in kvs:
            parsed = self.layout.parse(keys.unb64(kv["key"]).decode())
            if parsed is None or parsed[0] != kind or (name is not None and parsed[2] != name):
                continue
            items.append(((parsed[1], parsed[2]), self.decode(kind, parsed[1], parsed[2],
                                                              keys.unb64(kv.get("value", "")),
                                                              int(kv["mod_revision"]))))
        return items

    def list_pages(self, kind: str, namespace: str | None = None, *, name: str | None = None,
                   page_bytes: int | None = None) -> Iterator[tuple[list[dict], int]]:
        """As list, in pages of at most page_bytes of stored JSON, all read at one etcd revision (key order)."""
        budget = self.page_bytes if page_bytes is None else page_bytes
        prefix = self.layout.kind_prefix(kind, namespace)
        end = keys.range_end(prefix)
        at, (found, head) = self.reads(self.key_range(prefix, range_end=end, limit=str(LIST_CHUNK)),
                                        self.key_range(self.layout.head))
        revision = self.mod(head)
        page: list[dict] = []
        size = 0
        while True:
            kvs = found.get("kvs") or []
            for kv in kvs:
                raw = keys.unb64(kv.get("value", ""))
                items = self._decode_kvs(kind, [kv], name)
                if not items:
                    continue
                if page and size + len(raw) > budget:
                    yield page, revision
                    page, size = [], 0
                page.extend(obj for _, obj in items)
                size += len(raw)
            if not found.get("more") or not kvs:
                break
            start = keys.unb64(kvs[-1]["key"]).decode() + "\0"
            found = self.client.call("/kv/range", {"key": keys.b64(start), "range_end": end, "revision": str(at),
                                                   "limit": str(LIST_CHUNK)})
        if page:
            yield page, revision

    def fingerprint(self, kind: str) -> tuple[int, int | None]:
        """(count, the kind marker's mod_revision): changes whenever any object of the kind does."""
        _, (counted, marker) = self.reads(self.key_range(self.layout.kind_prefix(kind), prefix=True,
                                                           count_only=True),
                                           self.key_range(self.layout.marker(kind)))
        count = int(counted.get("count") or 0)
        return count, (self.mod(marker) or None) if count or self.mod(marker) else None

    def count(self, kind: str | None = None) -> int:
        if kind is not None:
            return int(self._range(self.layout.kind_prefix(kind), prefix=True, count_only=True).get("count") or 0)
        every = self.client.call("/kv/range", {"key": keys.b64(self.layout.objects_from),
                                               "range_end": keys.range_end(self.layout.root), "count_only": True})
        return int(every.get("count") or 0)

    # -- writes ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[EtcdTransaction]:
        """One optimistic attempt (CommitConflict from the `with`); nested calls are savepoints."""
        outer = getattr(self._local, "txn", None)
        if outer is not None:
            mark = outer.mark()
            try:
                yield outer
            except BaseException:
                outer.rollback_to(mark)
                raise
            return
        txn = EtcdTransaction(self)
        self._local.txn = txn
        try:
            yield txn
        finally:
            self._local.txn = None
        revision = txn.commit()
        if revision is not None:
            self._after_commit(revision)

    def transact(self, fn: Callable[[EtcdTransaction], T]) -> T:
        """fn(txn) in one transaction, run again (with a short random back-off) after each CommitConflict."""
        deadline = time.monotonic() + TRANSACT_TIMEOUT
        for attempt in itertools.count():
            try:
                with self.transaction() as txn:
                    return fn(txn)
            except CommitConflict:
                if getattr(self._local, "txn", None) is not None or time.monotonic() > deadline:
                    raise  # inside an outer transaction: the outermost one retries
                time.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** min(attempt, 6))))
        raise AssertionError("unreachable")  # pragma: no cover

    def _after_commit(self, revision: int) -> None:
        """As SQLite: a write that finds the history longer than history + compact_batch compacts it."""
        if revision - self.horizon_seen <= self.history + self.compact_batch:
            return
        try:
            if revision - self.compacted() > self.history + self.compact_batch:
                self.compact()
        except StoreError as error:  # the write is committed; compaction tries again on a later one
            log.warning("etcd compaction after a write failed: %s", error.message)

    # -- the change log --------------------------------------------------------------------

    def changes(self, since: int, *, limit: int = 1000, max_bytes: int | None = None) -> list[Change]:
        """One page of changes after `since` from etcd's history, whole revisions only; Gone behind the horizon."""
        return read_changes(self, since, limit=limit, max_bytes=self.page_bytes if max_bytes is None else max_bytes)

    def watch(self, since: int, *, stop: threading.Event | None = None, poll: float = 0.005,
              timeout: float | None = None, kind: str | None = None) -> Iterator[Change]:
        """Every change after `since` once, in order: the history first, then a live etcd watch (watch.py).

        poll is not used (etcd pushes changes).
        """
        del poll
        return watch_changes(self, since, stop=stop, timeout=timeout, kind=kind)

    def compact(self, *, keep: int | None = None, max_rows: int = COMPACT_BATCH) -> int:
        """Compact etcd to `keep` revisions behind the head (max_rows is SQLite's: etcd compacts at once).

        Returns how many revisions the horizon moved.
        """
        del max_rows
        keep = self.history if keep is None else keep
        return self.compact_to(self.revision() - keep)

    def compact_to(self, horizon: int, *, physical: bool = False) -> int:
        """Drop history at and below `horizon` (etcd compaction at horizon+1); how far the horizon moved.

        physical: wait until etcd has removed the old values from its database (restore, key
        rotation, vacuum); otherwise etcd finishes in the background (reads of them are refused at once).
        """
        _, (mark,) = self.reads(self.key_range(self.layout.compacted))
        kvs = mark.get("kvs") or []
        current = int(keys.unb64(kvs[0].get("value", ""))) if kvs else 0
        if horizon <= current:
            return 0
        header = int(self.client.call("/kv/range", {"key": keys.b64(self.layout.head)})["header"]["revision"])
        target = min(horizon + 1, header)
        try:
            self.client.call("/kv/compaction", {"revision": str(target), "physical": physical}, write=True)
        except Gone:
            pass  # etcd is compacted past it already (another store or daemon)
        horizon = target - 1
        while True:  # record the horizon: only ever upwards (CAS on the key's mod_revision)
            answer = self.client.call("/kv/txn", {
                "compare": [{"key": keys.b64(self.layout.compacted), "result": "EQUAL", "target": "MOD",
                             "mod_revision": str(self.mod(mark))}],
                "success": [{"request_put": {"key": keys.b64(self.layout.compacted),
                                             "value": keys.b64(str(horizon))}}],
                "failure": [{"request_range": {"key": keys.b64(self.layout.compacted)}}]}, write=True)
            if answer.get("succeeded"):
                break
            mark = answer["responses"][0]["response_range"]
            kvs = mark.get("kvs") or []
            if kvs and int(keys.unb64(kvs[0].get("value", ""))) >= horizon:
                break
        self.horizon_seen = max(self.horizon_seen, horizon)
        return max(0, horizon - current)

    # -- administration --------------------------------------------------------------------

    def backup(self, dest: str | Path) -> int:
        """Export every object into a SQLite store file (kctl's one backup format), 0600; the head revision."""
        from kctl.store.etcd.backup import backup

        return backup(self, dest)

    def restore(self, source: str | Path) -> int:
        """Replace every object under the prefix with a backup's (either backend's); the new head revision."""
        from kctl.store.etcd.backup import restore

        return restore(self, source)

    def vacuum(self) -> None:
        """Compact to `history`, then defragment every member (gives etcd's free pages back to the disk)."""
        keep = self.history
        self.compact_to(self.revision() - keep, physical=True)
        for url in self.client.urls:
            self.client.call("/maintenance/defragment", {}, url=url, timeout=max(60.0, self.client.request_timeout))

    def close(self) -> None:
        """Stop the compactor and close the HTTP sessions."""
        if self._compactor is not None:
            self._compactor.stop()
            self._compactor = None
        self.client.close_all()


def _reseal(txn: EtcdTransaction, chunk: list[tuple[str, str, str]]) -> int:
    """Write each object of chunk again (sealed with the primary key); how many."""
    for kind, namespace, name in chunk:
        obj = txn.get(kind, namespace, name)
        if obj is not None:
            txn.put(kind, namespace, name, obj, event="MODIFIED")
    return len(chunk)
