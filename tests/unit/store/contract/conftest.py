"""The store contract suite's backends: every test here runs once per backend (kctl.store.contract).

A backend is a factory of new, empty stores plus the few things the suite needs that the
Protocol does not give: another handle on the same state (another process's view), the
code a child process runs to open it, and every byte the backend holds (to check Secrets
are sealed at rest).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from kctl.store.contract import Store


@dataclass(frozen=True)
class Backend:
    """How the suite makes and inspects stores of one backend."""

    name: str
    #: (folder, **options) -> a new empty store; options: history, compact_batch, page_bytes
    make: Callable[..., Store]
    #: a second handle on the same state, as another process would open it
    again: Callable[[Store], Store]
    #: Python source a child process runs with the store's address in sys.argv[1]; it binds `store`
    child_open: str
    #: the address a child process is given
    address: Callable[[Store], str]
    #: every byte the backend holds for the store (data files; for etcd: every value under its prefix)
    raw: Callable[[Store], bytes]
    #: each put/delete inside one transaction takes its own revision (SQLite); etcd gives a whole txn one
    revision_per_write: bool = True
    #: revisions have no gaps: the store's writes are the only ones that move the counter (not so on an
    #: etcd shared with other writers, or with index keys written in their own transactions)
    dense_revisions: bool = True
    #: a restore keeps each object's resourceVersion (SQLite copies its rows); etcd cannot write at a chosen
    #: revision, so a restore writes every object again and it gets a new one
    restore_keeps_revisions: bool = True


def _sqlite_make(folder: Path, **options: Any) -> Store:
    from kctl.store.sqlite import Store as SQLiteStore

    return SQLiteStore(folder / "state" / "kctl.db", **options)


def _sqlite_again(store: Store) -> Store:
    from kctl.store.sqlite import Store as SQLiteStore

    return SQLiteStore(store.path)


def _sqlite_raw(store: Store) -> bytes:
    conn = sqlite3.connect(store.path)
    try:  # every row of every table, as stored, besides the files themselves
        rows = b"".join(repr(row).encode() for table in ("objects", "changes", "owners", "meta")
                        for row in conn.execute(f"SELECT * FROM {table}"))
    finally:
        conn.close()
    files = b"".join(p.read_bytes() for p in store.path.parent.iterdir() if p.name.startswith(store.path.name))
    return rows + files


SQLITE = Backend("sqlite", make=_sqlite_make, again=_sqlite_again,
                 child_open="from kctl.store.sqlite import Store\nstore = Store(sys.argv[1])\n",
                 address=lambda store: str(store.path), raw=_sqlite_raw)

#: the test session's etcd (tests/conftest.py's `etcd_cluster`), set by the `backend` fixture for ETCD
_ETCD: dict[str, Any] = {}


def _etcd_make(folder: Path, **options: Any) -> Store:
    from kctl.store.etcd.address import parse_address
    from kctl.store.etcd.store import EtcdStore

    cluster = _ETCD["cluster"]
    address = parse_address(f"{cluster.address}/t-{secrets.token_hex(6)}")  # each store a fresh prefix
    return EtcdStore(address, state_path=folder / "state" / "kctl", tls=cluster.tls, **options)


def _etcd_again(store: Store) -> Store:
    from kctl.store.etcd.store import EtcdStore

    return EtcdStore(store.address, state_path=store.path, tls=store.client.tls)


def _etcd_address(store: Store) -> str:
    tls = store.client.tls
    return json.dumps({"address": store.where, "state": str(store.path),
                       "tls": [tls.ca_file, tls.cert_file, tls.key_file] if tls else None})


ETCD_CHILD_OPEN = """import json
from kctl.store.etcd.address import EtcdTLS, parse_address
from kctl.store.etcd.store import EtcdStore
_cfg = json.loads(sys.argv[1])
store = EtcdStore(parse_address(_cfg["address"]), state_path=_cfg["state"],
                  tls=EtcdTLS(*_cfg["tls"]) if _cfg["tls"] else None)
"""


def _etcd_raw(store: Store) -> bytes:
    from kctl.store.etcd.keys import b64, range_end, unb64

    root = store.address.prefix + "/"
    answer = store.client.call("/kv/range", {"key": b64(root), "range_end": range_end(root)})
    return b"".join(unb64(kv["key"]) + b"=" + unb64(kv.get("value", "")) for kv in answer.get("kvs") or [])


#: etcd gives a whole transaction one revision, and the session's etcd is shared by many stores (gaps)
ETCD = Backend("etcd", make=_etcd_make, again=_etcd_again, child_open=ETCD_CHILD_OPEN, address=_etcd_address,
               raw=_etcd_raw, revision_per_write=False, dense_revisions=False, restore_keeps_revisions=False)

BACKENDS = [SQLITE, ETCD]


@pytest.fixture(params=BACKENDS, ids=lambda b: b.name)
def backend(request: pytest.FixtureRequest) -> Backend:
    """The backend under test (for etcd: the session's etcd cluster is started first)."""
    if request.param is ETCD:
        _ETCD["cluster"] = request.getfixturevalue("etcd_cluster")
    return request.param


@pytest.fixture
def make_store(backend: Backend, tmp_path: Path) -> Iterator[Callable[..., Store]]:
    """A factory of new stores of the backend (closed after the test); options: history, compact_batch, page_bytes."""
    made: list[Store] = []

    def make(**options: Any) -> Store:
        store = backend.make(tmp_path / f"s{len(made)}", **options)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture
def store(make_store: Callable[..., Store]) -> Store:
    """A new store of the backend under test (it holds the `default` Namespace at revision 1)."""
    return make_store()


@pytest.fixture
def base(store: Store) -> int:
    """The new store's revision before the test writes (1 on SQLite: the `default` Namespace; etcd: its txn's)."""
    return store.revision()


@pytest.fixture
def check_revisions(backend: Backend) -> Callable[[list[int], int], None]:
    """Assert revisions after `base` strictly increase, and (on a dense backend) are base+1, base+2, ..."""

    def check(revisions: list[int], base: int) -> None:
        assert all(a < b for a, b in zip([base, *revisions], revisions)), revisions
        if backend.dense_revisions:
            assert revisions == list(range(base + 1, base + 1 + len(revisions)))

    return check


@pytest.fixture
def again(backend: Backend) -> Iterator[Callable[[Store], Store]]:
    """Second handles on a store's state (closed after the test)."""
    opened: list[Store] = []

    def open_again(store: Store) -> Store:
        other = backend.again(store)
        opened.append(other)
        return other

    yield open_again
    for other in opened:
        other.close()
