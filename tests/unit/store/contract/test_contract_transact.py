"""Store contract: `transact(fn)` (fn's result; all or nothing; savepoints inside; fn run again after a
conflicting commit on an optimistic backend) and the single-attempt `transaction()`'s CommitConflict."""

from __future__ import annotations

import pytest

from kctl.store.contract import CommitConflict, Store

#: backends whose transactions are optimistic: a commit that finds something it read changed raises
#: CommitConflict, and transact runs fn again (SQLite's writers wait for each other instead)
RETRYING = frozenset({"etcd"})


def config_map(name: str, **data: str) -> dict:
    return {"metadata": {"name": name, "uid": name + "-uid"}, "data": dict(data)}


def put(store: Store, name: str, **data: str) -> dict:
    with store.transaction() as txn:
        return txn.put("ConfigMap", "default", name, config_map(name, **data), event="ADDED")


def stored(store: Store) -> dict[str, dict]:
    return {o["metadata"]["name"]: o.get("data") for o in store.list("ConfigMap")[0]}


def test_transact_commits_and_returns_fns_result(store):
    """fn's writes are committed and its return value is transact's."""
    runs = []

    def fn(txn):
        runs.append(1)
        a = txn.put("ConfigMap", "default", "a", config_map("a", k="1"), event="ADDED")
        b = txn.put("ConfigMap", "default", "b", config_map("b", k="2"), event="ADDED")
        return a["metadata"]["resourceVersion"], b["metadata"]["name"]

    rv, name = store.transact(fn)
    assert name == "b" and int(rv) <= store.revision()
    assert stored(store) == {"a": {"k": "1"}, "b": {"k": "2"}}
    assert len(runs) == 1  # nothing conflicted: one run on every backend


class _DryRun(Exception):
    """Rolls fn's transaction back on purpose, as the API server's dry runs do."""


@pytest.mark.parametrize("error", [_DryRun, ValueError], ids=["dry-run", "failure"])
def test_an_exception_from_fn_rolls_back_everything_and_propagates(store, error):
    """fn raising (a dry run on purpose, or a failure) writes nothing, takes no revision, and is not retried."""
    put(store, "keep", k="1")
    head = store.revision()
    runs, seen = [], []

    def fn(txn):
        runs.append(1)
        current = txn.get("ConfigMap", "default", "keep")
        current["data"] = {"k": "changed"}
        txn.put("ConfigMap", "default", "keep", current, event="MODIFIED")
        txn.put("ConfigMap", "default", "new", config_map("new"), event="ADDED")
        seen.append(txn.get("ConfigMap", "default", "keep")["data"])  # its own writes, before the rollback
        raise error("rolled back")

    with pytest.raises(error):
        store.transact(fn)
    assert runs == [1] and seen == [{"k": "changed"}]
    assert stored(store) == {"keep": {"k": "1"}}
    assert store.revision() == head and store.changes(head) == []


def test_a_savepoint_inside_transact_rolls_back_alone(store, base):
    """A nested transaction() in fn that fails undoes only its own writes; the rest of fn commits."""

    def fn(txn):
        txn.put("ConfigMap", "default", "before", config_map("before"), event="ADDED")
        try:
            with store.transaction() as inner:
                inner.put("ConfigMap", "default", "inside", config_map("inside"), event="ADDED")
                assert txn.get("ConfigMap", "default", "inside") is not None
                raise ValueError("undo the savepoint")
        except ValueError:
            pass
        assert txn.get("ConfigMap", "default", "inside") is None
        with store.transaction() as inner:
            inner.put("ConfigMap", "default", "kept", config_map("kept"), event="ADDED")
        txn.put("ConfigMap", "default", "after", config_map("after"), event="ADDED")
        return sorted(o["metadata"]["name"] for o in txn.list("ConfigMap"))

    assert store.transact(fn) == ["after", "before", "kept"]
    assert sorted(stored(store)) == ["after", "before", "kept"]
    assert [c.name for c in store.changes(base)] == ["before", "kept", "after"]


def retrying(backend) -> None:
    if backend.name not in RETRYING:
        pytest.skip(f"{backend.name}: a conflicting writer waits for the transaction instead (transact runs fn once)")


def test_transact_runs_fn_again_when_what_it_read_changed(store, backend, again):
    """Another handle's write between fn's read and its commit: fn runs again and the result counts both."""
    retrying(backend)
    put(store, "counter", n="0")
    other = again(store)
    runs = []

    def increment(txn):
        runs.append(1)
        current = txn.get("ConfigMap", "default", "counter")
        if len(runs) == 1:  # someone else increments meanwhile, once
            with other.transaction() as theirs:
                mine = theirs.get("ConfigMap", "default", "counter")
                mine["data"] = {"n": str(int(mine["data"]["n"]) + 1)}
                theirs.put("ConfigMap", "default", "counter", mine, event="MODIFIED")
        current["data"] = {"n": str(int(current["data"]["n"]) + 1)}
        return txn.put("ConfigMap", "default", "counter", current, event="MODIFIED")["data"]["n"]

    assert store.transact(increment) == "2"
    assert len(runs) == 2 and stored(store) == {"counter": {"n": "2"}}


def test_transact_runs_fn_again_when_a_list_it_read_changed(store, backend, again):
    """An object added to a kind fn listed, before fn commits: fn runs again and sees it."""
    retrying(backend)
    put(store, "a")
    other = again(store)
    runs = []

    def summarize(txn):
        runs.append(1)
        listed = sorted(o["metadata"]["name"] for o in txn.list("ConfigMap") if o["metadata"]["name"] != "summary")
        if len(runs) == 1:
            put(other, "b")
        txn.put("ConfigMap", "default", "summary", config_map("summary", names=",".join(listed)), event="ADDED")
        return listed

    assert store.transact(summarize) == ["a", "b"]
    assert len(runs) == 2 and stored(store)["summary"] == {"names": "a,b"}


def test_a_single_attempt_raises_commit_conflict_and_writes_nothing(store, backend, again):
    """transaction() is one attempt: a read changed meanwhile is a CommitConflict (409) and none of its writes stay."""
    retrying(backend)
    put(store, "x", v="0")
    other = again(store)
    with pytest.raises(CommitConflict) as caught:
        with store.transaction() as txn:
            current = txn.get("ConfigMap", "default", "x")
            with other.transaction() as theirs:
                changed = theirs.get("ConfigMap", "default", "x")
                changed["data"] = {"v": "theirs"}
                theirs.put("ConfigMap", "default", "x", changed, event="MODIFIED")
            current["data"] = {"v": "mine"}
            txn.put("ConfigMap", "default", "x", current, event="MODIFIED")
            txn.put("ConfigMap", "default", "y", config_map("y"), event="ADDED")
    assert caught.value.code == 409
    assert stored(store) == {"x": {"v": "theirs"}}
