"""The store contract: what the API server (kctl.apiserver) relies on from a store backend.

`Store` and `Transaction` are typing Protocols holding exactly what the layers above the store
call today (kctl/apiserver: server.py, eviction.py, services/; the CLI's store administration
through the API server). kctl.store.sqlite implements them and is the default; a second
backend (etcd, issue 17) implements the same Protocols and must pass the same suite,
tests/unit/store/contract/ (its `store` fixture is parametrized by backend).
kctl/apiserver/server.py imports only these Protocols, for typing; the composition points
(kctl/cli/connect.py, kctl/apiserver/serve.py, the CLI's maintenance commands) choose the class.

The rules every backend keeps:

- Revisions: one global counter for the whole store, increasing, never reused nor going back
  (not even across restore). Every committed write (each put and each delete, also inside one
  transaction) takes the next revision and records it as the object's
  metadata.resourceVersion (a decimal string). A transaction that fails takes no revision
  and leaves no gap. A new store holds the `default` Namespace (SQLite: at revision 1).
  Two rules are SQLite's and flagged in the suite for a backend that cannot keep them (etcd
  gives a whole transaction one revision; a shared etcd leaves gaps): one revision per write
  inside a transaction (`revision_per_write`) and no gaps (`dense_revisions`).
- Keys: (kind, namespace, name), where kind is a ResourceType.group_kind ("ConfigMap",
  "Deployment.apps") and namespace is "" for cluster-scoped objects.
- Transactions (`Store.transaction()`): serializable and all or nothing. Reads inside one see
  the transaction's own writes and no other writer's; a conflicting writer waits (SQLite) or
  the transaction is retried, never interleaved. An exception leaving the `with` rolls back
  everything; a nested `transaction()` is a savepoint that rolls back alone. The store does
  not decide AlreadyExists or Conflict itself: the API server reads the current object in the
  transaction and decides (its serializability is what makes create-if-absent and
  compare-resourceVersion safe). After commit, watchers are woken.
- Watch (`Store.watch(since)`): every change with a revision > since exactly once, in revision
  order, with no gaps, as it is committed (also other processes' commits); the DELETED change
  carries the object's last state at the delete's revision. Gone (410) when `since` is older
  than the compacted horizon (`compacted()`): the caller re-lists. `changes(since)` is one page
  of the same log.
- Lists (`list`, `list_pages`): a consistent snapshot, returned with the revision it was read at
  (the store's head then); items in (namespace, name) order; paged lists are all read at one revision.
- Compaction: the change log keeps at least `history` revisions behind the head; older entries
  may go (`compact()`), which moves the horizon. A backend compacts by itself (SQLite: any write
  that finds the log too long runs one bounded step; etcd: periodically, as kube-apiserver).
- Encryption at rest: the stored bytes of kinds in ENCRYPTED_KINDS (Secrets, objects and change
  log) are sealed with the store's key ring (kctl.store.encryption) before they reach the
  backend; reads decrypt, so every layer above sees plain objects. No secret value is written
  in clear nor appears in an error.
- Size limits: the API server enforces the object size limits (kctl.machinery.limits) before
  writing; a backend must accept every object up to those limits (etcd's default request
  limit, 1.5 MiB, is above them) and page the change log by bytes so memory stays bounded.

Backend-specific parts, and where they stand:

- In the Protocol, as "export/import of state" (issue 17 moves state between backends):
  `backup(dest)` writes the state to a file and `restore(source)` replaces the state with one;
  after a restore the revision continues above both the old head and the backup's, and
  watchers get Gone. (SQLite's file is today's format; a cross-backend format is issue 17's.)
- In the Protocol as maintenance: `vacuum()` (compact fully and give space back: SQLite
  VACUUM; etcd would compact + defragment) and `rotate_key()`.
- `path`: the local anchor of the store's companion files (the key file `<path>.keys`, the
  audit log, the PKI). A remote backend keeps a local state path for them.
- Not in the Protocol (SQLite only, used by kctl.store.sqlite and its own tests): connections,
  `snapshot()` (a sqlite connection), `integrity_check()`, `ensure_key(conn)`, WAL/PRAGMAs,
  the watch tail thread, migrations (kctl.store.migrations).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ContextManager, Iterator, Protocol, TypeVar

from kctl.machinery.errors import APIError, BadRequest

#: kinds (ResourceType.group_kind) whose stored JSON every backend encrypts (kctl.store.encryption);
#: a plain constant, so that reading a store never imports the crypto library unless a Secret is touched
ENCRYPTED_KINDS = frozenset({"Secret"})


T = TypeVar("T")


class StoreError(APIError):
    """The store cannot be opened or used (not a kctl store, unreadable, corrupt, unreachable)."""


class CommitConflict(StoreError):
    """An optimistic backend's commit found that something the transaction read changed meanwhile.

    Nothing was written. `Store.transact` runs the transaction again; only a caller of the
    single-attempt `Store.transaction()` on such a backend sees it.
    """

    reason, code = "Conflict", 409


class TransactionTooLarge(BadRequest):
    """An atomic batch needs more writes than one transaction of the store holds (max_writes_per_transaction).

    Nothing was written. A caller that may write in parts (git sync) does so; others report it.
    """


class StoreUnavailable(StoreError):
    """The backend does not answer (etcd: members unreachable, quorum lost). The message names what is
    lost; for a write it says whether its outcome is unknown (a timed-out etcd write may still apply)."""

    reason, code = "ServiceUnavailable", 503


@dataclass(frozen=True)
class Change:
    """One entry of the change log."""

    revision: int
    type: str  # ADDED | MODIFIED | DELETED
    kind: str  # the ResourceType.group_kind
    namespace: str
    name: str
    obj: dict


class Transaction(Protocol):
    """A write transaction: read-your-writes access to objects, each write its own revision."""

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        """The object as this transaction sees it (its own writes included), or None."""
        ...

    def exists_in_namespace(self, namespace: str) -> bool:
        """Whether any object of any kind is in `namespace` (as this transaction sees it)."""
        ...

    def put(self, kind: str, namespace: str, name: str, obj: dict, *, event: str) -> dict:
        """Write obj (event ADDED or MODIFIED) at the next revision; returns obj with that resourceVersion set.

        Replaces any object under the key (the caller has decided create vs update); the
        change log gets (revision, event, obj). The ownerReferences' uids index the object
        for `dependents`; metadata.uid indexes it for `Store.get_by_uid`.
        """
        ...

    def delete(self, kind: str, namespace: str, name: str, obj: dict) -> dict:
        """Remove the object at the next revision; returns obj (its last state) with that resourceVersion.

        The DELETED change in the log carries obj.
        """
        ...

    def list(self, kind: str) -> list[dict]:
        """Every object of a kind, in every namespace, as this transaction sees them."""
        ...

    def dependents(self, owner_uid: str) -> list[tuple[str, str, str]]:
        """(kind, namespace, name) of every object with an ownerReference to owner_uid."""
        ...


class Store(Protocol):
    """A store backend: objects by key, one global revision, the change log and its watch."""

    path: Path

    @property
    def where(self) -> str:
        """How messages name the store: SQLite its file's path; etcd its etcd:// address."""
        ...

    # -- reads -------------------------------------------------------------------------

    def revision(self) -> int:
        """The head: the revision of the latest committed write."""
        ...

    def compacted(self) -> int:
        """The horizon: changes at or below it are gone; watching from below it raises Gone."""
        ...

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        """The committed object, or None."""
        ...

    def get_by_uid(self, uid: str) -> dict | None:
        """The committed object whose metadata.uid is uid, or None."""
        ...

    def list(self, kind: str, namespace: str | None = None, *, name: str | None = None) -> tuple[list[dict], int]:
        """Objects of a kind (one namespace or all; one name or all) from one snapshot, and its revision."""
        ...

    def list_pages(self, kind: str, namespace: str | None = None, *, name: str | None = None,
                   page_bytes: int | None = None) -> Iterator[tuple[list[dict], int]]:
        """As list, in pages of at most page_bytes of stored data (one larger object: a page alone), one revision."""
        ...

    def fingerprint(self, kind: str) -> tuple[int, int | None]:
        """(count, highest resourceVersion) of a kind's objects: changes whenever any object of the kind does."""
        ...

    def count(self, kind: str | None = None) -> int:
        """How many objects (of a kind, or in all)."""
        ...

    # -- writes ------------------------------------------------------------------------

    #: the most object writes (puts + deletes) one transaction may hold; None: no limit (SQLite).
    #: etcd bounds a transaction's operations (--max-txn-ops, 128 by default): callers with more
    #: independent writes split them into transactions of this size
    max_writes_per_transaction: int | None
    #: whether each read is a network round trip (etcd: True; SQLite: False): the API server then reads the
    #: kinds it needs on every request from watch-fed caches (kctl.apiserver.configcache)
    reads_are_remote: bool

    def transaction(self) -> ContextManager[Transaction]:
        """A serializable, all-or-nothing write transaction; nested calls are savepoints of the outer one.

        One attempt: an optimistic backend (etcd) raises CommitConflict from the `with` when what the
        transaction read changed before it committed. Code that must not fail so uses `transact`.
        """
        ...

    def transact(self, fn: Callable[[Transaction], T]) -> T:
        """fn(txn) in one transaction (as `transaction()`), run again after a CommitConflict; fn's result.

        fn may therefore run more than once: it has no effect outside txn but its return value (it
        starts from scratch each time). An exception from fn rolls back and propagates (a dry run
        raises one on purpose). SQLite runs fn once (a conflicting writer waits instead).
        """
        ...

    # -- the change log ----------------------------------------------------------------

    def changes(self, since: int, *, limit: int = 1000, max_bytes: int | None = None) -> list[Change]:
        """One page of changes after `since`, oldest first (at least one when any); Gone behind the horizon."""
        ...

    def watch(self, since: int, *, stop: threading.Event | None = None, poll: float = 0.005,
              timeout: float | None = None, kind: str | None = None) -> Iterator[Change]:
        """Every change after `since` once, in order, as committed, until stop is set or timeout passes.

        kind: only that group_kind's changes. Raises Gone when `since` is behind the horizon
        (also mid-watch, if compaction overtakes a slow watcher).
        """
        ...

    def compact(self, *, keep: int | None = None, max_rows: int = ...) -> int:
        """Drop change-log entries more than `keep` (default: history) revisions behind the head; how many went."""
        ...

    # -- administration ----------------------------------------------------------------

    @property
    def key_path(self) -> Path:
        """The key file that seals this store's Secrets."""
        ...

    def backup(self, dest: str | os.PathLike) -> int:
        """Export a consistent copy of the state into dest (mode 0600); returns the revision copied."""
        ...

    def restore(self, source: str | os.PathLike) -> int:
        """Replace the state with a backup's; the revision continues above both heads; watchers get Gone."""
        ...

    def vacuum(self) -> None:
        """Compact the change log to `history` and give free space back to the disk."""
        ...

    def rotate_key(self) -> tuple[str, int]:
        """Re-encrypt every sealed object under a new key; (the new key's name, rows re-encrypted)."""
        ...

    def close(self) -> None:
        """Release this thread's resources (connections); the store is not used through this object afterwards."""
        ...
