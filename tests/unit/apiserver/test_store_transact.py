"""The API server on Store.transact: batches split to the store's max_writes_per_transaction, atomic batches
refused when one transaction cannot hold them, every transaction function starting from scratch when the
store runs it again, and the store's own failures (CommitConflict, StoreUnavailable) as clients see them."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from kctl.apiserver import server as server_module
from kctl.apiserver.contract import Binding
from kctl.apiserver.server import APIServer
from kctl.machinery.errors import AlreadyExists, BadRequest, Conflict
from kctl.store.contract import CommitConflict, StoreError, StoreUnavailable

LIMIT = 3


class Transactions:
    """Counts a store's outermost transact calls and the revisions (writes, on SQLite) each committed."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.calls = 0
        self.writes: list[int] = []
        self._transact = store.transact

    def __call__(self, fn: Callable) -> Any:
        self.calls += 1
        before = self.store.revision()
        try:
            return self._transact(fn)
        finally:
            self.writes.append(self.store.revision() - before)


@pytest.fixture
def limited(store, monkeypatch) -> tuple[APIServer, Transactions]:
    """An API server over a SQLite store that holds at most LIMIT writes per transaction, its transactions counted."""
    monkeypatch.setattr(store, "max_writes_per_transaction", LIMIT)
    counted = Transactions(store)
    monkeypatch.setattr(store, "transact", counted)
    return APIServer(store, user="tester", audit_log=None), counted


def config_map(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}


def service(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}}


def names(api: APIServer, kind: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in api.store.list(kind)[0])


def test_a_non_atomic_batch_goes_in_transactions_of_the_limit(limited):
    """10 objects with 3 writes per transaction: 4 transactions (3+3+3+1), every object written."""
    api, transactions = limited
    results = api.write_all([("apply", config_map(f"c{i}")) for i in range(10)])
    assert [(r.action, r.error) for r in results] == [("created", None)] * 10
    assert all(r.obj["metadata"]["resourceVersion"] for r in results)
    assert transactions.calls == 4 and transactions.writes == [3, 3, 3, 1]
    assert names(api, "ConfigMap") == sorted(f"c{i}" for i in range(10))


def test_objects_of_several_writes_are_counted_by_their_writes(limited):
    """A Service create writes the Service and its IPAddress: at most LIMIT writes go in each transaction."""
    api, transactions = limited
    results = api.write_all([("apply", service(f"s{i}")) for i in range(4)])
    assert [r.error for r in results] == [None] * 4
    assert names(api, "Service") == ["s0", "s1", "s2", "s3"]
    assert all(w <= LIMIT for w in transactions.writes) and len(transactions.writes) >= 3
    assert sum(transactions.writes) == len(api.store.list("IPAddress.networking.k8s.io")[0]) + 4 + \
        len(api.store.list("ServiceCIDR.networking.k8s.io")[0])


@pytest.mark.parametrize("objects, words", [
    ([config_map(f"c{i}") for i in range(10)], "an atomic write of 10 objects is more than one transaction"),
    ([service("a"), service("b")], "an atomic write of 2 objects needs more writes than one transaction"),
], ids=["more-objects", "more-writes"])
def test_an_atomic_batch_larger_than_a_transaction_is_refused(limited, objects, words):
    """One clear BadRequest line naming the limit and what to do; nothing written."""
    api, _ = limited
    before = api.store.revision()
    with pytest.raises(BadRequest) as caught:
        api.write_all([("apply", o) for o in objects], atomic=True)
    assert words in caught.value.message
    assert f"({LIMIT} writes): leave out --atomic, or write them in parts" in caught.value.message
    assert api.store.where in caught.value.message and "\n" not in caught.value.message
    assert api.store.revision() == before


def test_an_atomic_batch_within_the_limit_is_one_transaction(limited):
    """Three objects, three writes: written together, in one transaction."""
    api, transactions = limited
    results = api.write_all([("apply", config_map(f"c{i}")) for i in range(3)], atomic=True)
    assert [r.error for r in results] == [None] * 3 and transactions.calls == 1


def test_unchanged_objects_do_not_count_against_an_atomic_batch(limited):
    """Applying 5 objects again, 4 unchanged and 1 changed, atomically: one write, accepted."""
    api, _ = limited
    for start in (0, 3):
        api.write_all([("apply", config_map(f"c{i}")) for i in range(start, min(start + 3, 5))])
    changed = [config_map(f"c{i}") for i in range(5)]
    changed[4]["data"] = {"k": "new"}
    results = api.write_all([("apply", o) for o in changed], atomic=True)
    assert [r.action for r in results] == ["unchanged"] * 4 + ["configured"]


def test_a_dry_run_goes_in_parts_that_write_nothing(limited):
    """A server dry run of 10 objects: every result, from 4 rolled-back transactions, no write."""
    api, transactions = limited
    before = api.store.revision()
    results = api.write_all([("apply", config_map(f"c{i}")) for i in range(10)], dry_run=True)
    assert [(r.action, r.error) for r in results] == [("created", None)] * 10
    assert all(r.obj["metadata"]["name"] == f"c{i}" for i, r in enumerate(results))
    assert transactions.calls == 4 and api.store.revision() == before


def test_failures_and_conflicts_inside_split_batches_stay_per_object(limited, api):
    """An existing object fails alone and a stale resourceVersion is retried, across transactions."""
    limited_api, _ = limited
    limited_api.create(config_map("c4"))
    stale = limited_api.create(config_map("c7"))
    limited_api.update({**stale, "data": {"k": "newer"}})
    ops = [("create", config_map(f"c{i}")) for i in range(7)] + [("apply", {**config_map("c7"), "data": {"k": "x"}})]
    results = limited_api.write_all(ops)
    assert isinstance(results[4].error, AlreadyExists)
    assert [r.error for i, r in enumerate(results) if i != 4] == [None] * 7
    assert results[7].action == "configured" and results[7].obj["data"] == {"k": "x"}


def test_bind_all_goes_in_transactions_of_the_limit(limited):
    """10 bindings with 3 writes per transaction: 4 transactions, every pod bound."""
    api, transactions = limited
    for i in range(10):
        api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    transactions.calls, transactions.writes = 0, []
    results = api.bind_all([Binding("default", f"p{i}", "node-1") for i in range(10)])
    assert [(r.action, r.error) for r in results] == [("bound", None)] * 10
    assert transactions.calls == 4 and transactions.writes == [3, 3, 3, 1]
    assert {p["spec"].get("nodeName") for p in api.store.list("Pod")[0]} == {"node-1"}


# -- a store that runs every transaction function twice -------------------------------------------


class _Retried(Exception):
    """Rolls back a ReplayingStore's first run."""


class ReplayingStore:
    """A SQLite store whose transact runs fn twice, the first run rolled back: as an optimistic store after a
    CommitConflict. `between` (run once, then cleared) is the other writer whose commit caused it: what fn
    leaves behind from its first run would show in the results."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.runs = 0
        self.between: Callable[[], None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def transact(self, fn: Callable) -> Any:
        self.runs += 1
        try:
            with self._inner.transaction() as txn:
                fn(txn)
                raise _Retried()
        except _Retried:
            pass
        between, self.between = self.between, None
        if between is not None:
            between()
        with self._inner.transaction() as txn:
            return fn(txn)


@pytest.fixture
def replaying(store) -> APIServer:
    """An API server over a store that runs every transaction function twice."""
    return APIServer(ReplayingStore(store), user="tester", audit_log=None)


def test_batches_start_from_scratch_when_run_again(replaying, api):
    """write_all after a re-run: an object another writer created meanwhile is AlreadyExists, with no object."""
    replaying.create(config_map("c1"))
    replaying.store.between = lambda: api.create(config_map("c2"))
    results = replaying.write_all([("create", config_map(f"c{i}")) for i in range(4)])
    assert [(type(r.error).__name__ if r.error else r.action, r.obj is None) for r in results] == [
        ("created", False), ("AlreadyExists", True), ("AlreadyExists", True), ("created", False)]
    assert names(replaying, "ConfigMap") == ["c0", "c1", "c2", "c3"]


def test_a_dry_run_run_again_still_writes_nothing(replaying):
    """A server dry run through a re-running store: the results, no write."""
    before = replaying.store.revision()
    obj = replaying.create(config_map("c"), dry_run=True)
    assert obj["metadata"]["name"] == "c" and replaying.store.revision() == before


def test_bind_all_and_evict_start_from_scratch_when_run_again(replaying, api):
    """A pod bound by another writer between the runs: that binding is a Conflict, not also "bound"."""
    for name in ("a", "b"):
        replaying.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                          "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    replaying.store.between = lambda: api.bind("default", "a", "other")
    results = replaying.bind_all([Binding("default", "a", "n1"), Binding("default", "b", "n1")])
    assert [(r.action, type(r.error).__name__ if r.error else None, r.obj is None) for r in results] == [
        ("", "Conflict", True), ("bound", None, False)]
    replaying.evict("default", "b", grace_period=0)
    assert [p["metadata"]["name"] for p in replaying.store.list("Pod")[0]] == ["a"]


def test_configure_runs_again_from_scratch(replaying):
    """The daemon's Service ranges through a re-running store: written once, no doubled warning."""
    from kctl.apiserver.services.config import configure

    assert configure(replaying, service_cidr="10.96.0.0/12", node_port_range="30000-32767") == []
    assert names(replaying, "ServiceCIDR.networking.k8s.io") == ["kubernetes"]


# -- the store's own failures -----------------------------------------------------------------------


def test_a_commit_conflict_the_store_gave_up_on_is_the_objects_conflict(api, monkeypatch):
    """A CommitConflict out of transact: retried as a Conflict; a pinned update gets the object's Conflict text."""
    monkeypatch.setattr(server_module, "RETRY_BACKOFF_BASE", 0.0)
    created = api.create(config_map("c"))
    real = api.store.transact
    failures = {"left": 2}

    def give_up(fn):
        if failures["left"]:
            failures["left"] -= 1
            raise CommitConflict("what the transaction read changed before its commit")
        return real(fn)

    monkeypatch.setattr(api.store, "transact", give_up)
    assert api.apply({**config_map("c"), "data": {"k": "v2"}}).error is None  # retried until it commits
    failures["left"] = 1
    with pytest.raises(Conflict) as caught:
        api.update({**created, "data": {"k": "v3"}})  # pinned to a resourceVersion: not retried
    assert type(caught.value) is Conflict
    assert caught.value.message.startswith('Operation cannot be fulfilled on configmaps "c": the object has been '
                                           "modified")
    failures["left"] = 1
    result = api.bind_all([Binding("default", "nope", "n1")])[0]
    assert type(result.error) is Conflict and 'pods/binding "nope"' in result.error.message


def unavailable(*_args: Any, **_kwargs: Any) -> Any:
    raise StoreUnavailable("etcd://10.0.0.1:2379: the etcd cluster has lost its quorum (2 of 3 members do not "
                           "answer); the outcome of this write is unknown")


def test_store_unavailable_fails_each_write_of_a_batch_not_committed(limited, monkeypatch):
    """The store failing at the second of four transactions: the first's objects written, the others' errors."""
    api, transactions = limited
    real = transactions._transact

    def fail_second(fn):
        if transactions.calls == 2:
            unavailable()
        return real(fn)

    monkeypatch.setattr(transactions, "_transact", fail_second)
    results = api.write_all([("apply", config_map(f"c{i}")) for i in range(10)])
    assert [r.action for r in results[:3]] == ["created"] * 3
    assert all(isinstance(r.error, StoreUnavailable) and r.obj is None for r in results[3:])
    assert names(api, "ConfigMap") == ["c0", "c1", "c2"]


def test_store_unavailable_raises_from_an_atomic_batch_and_a_single_write(api, monkeypatch):
    """An atomic batch and a single create raise StoreUnavailable (a 503), nothing written; bind_all reports it."""
    monkeypatch.setattr(api.store, "transact", unavailable)
    with pytest.raises(StoreUnavailable):
        api.write_all([("apply", config_map("a")), ("apply", config_map("b"))], atomic=True)
    with pytest.raises(StoreUnavailable) as caught:
        api.create(config_map("c"))
    assert caught.value.code == 503
    results = api.bind_all([Binding("default", "p", "n1")])
    assert isinstance(results[0].error, StoreUnavailable)


def test_store_errors_cross_the_wire_as_themselves():
    """StoreUnavailable and CommitConflict decode to their own classes on a remote client."""
    from kctl.apiserver import wire

    for exc in (StoreUnavailable("quorum lost"), CommitConflict("changed")):
        back = wire.decode_error(wire.encode_error(exc))
        assert type(back) is type(exc) and back.message == exc.message and back.code == exc.code


class RefusingStore(ReplayingStore):
    """A SQLite store that refuses to write the object named "big" (as etcd refuses a transaction of too many
    writes) with a StoreError from the put; it runs each transaction function once."""

    def transact(self, fn: Callable) -> Any:
        with self._inner.transaction() as txn:
            return fn(_Refusing(txn))


class _Refusing:
    def __init__(self, txn: Any) -> None:
        self._txn = txn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._txn, name)

    def put(self, kind: str, namespace: str, name: str, obj: dict, *, event: str) -> dict:
        if name == "big":
            raise StoreError("etcd: a transaction may write at most 32 objects (etcd's --max-txn-ops); split it")
        return self._txn.put(kind, namespace, name, obj, event=event)


def test_a_store_refusing_one_write_fails_that_object_alone(store):
    """A StoreError from one object's write (not the store's loss) is that object's error; the others commit."""
    api = APIServer(RefusingStore(store), user="tester", audit_log=None)
    results = api.write_all([("apply", config_map(n)) for n in ("a", "big", "c")])
    assert [r.action if r.error is None else r.error.message[:5] for r in results] == ["created", "etcd:", "created"]
    assert names(api, "ConfigMap") == ["a", "c"]

