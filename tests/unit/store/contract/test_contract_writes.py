"""Store contract: revisions, transactions (all or nothing, nested, serializable across threads and processes)."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from kctl.store.contract import Store

def put(store: Store, name: str, ns: str = "default", kind: str = "ConfigMap", **extra: object) -> dict:
    with store.transaction() as txn:
        return txn.put(kind, ns, name, {"metadata": {"name": name, "uid": name + "-uid", **extra}}, event="ADDED")


def rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


def test_revisions_strictly_increase(store, base, check_revisions):
    """Every write takes the next global revision, across kinds and namespaces."""
    revs = [rv(put(store, f"o{i}", ns=f"n{i % 3}", kind=("Pod", "ConfigMap")[i % 2])) for i in range(10)]
    check_revisions(revs, base)
    assert store.revision() == revs[-1]


def test_each_write_in_a_transaction_takes_its_own_revision(store, backend, base, check_revisions):
    """Puts and deletes inside one transaction each take the next revision, in the order made (etcd: one for all)."""
    with store.transaction() as txn:
        a = txn.put("ConfigMap", "default", "a", {"metadata": {"name": "a"}}, event="ADDED")
        b = txn.put("ConfigMap", "default", "b", {"metadata": {"name": "b"}}, event="ADDED")
        gone = txn.delete("ConfigMap", "default", "a", txn.get("ConfigMap", "default", "a"))
    revs = [rv(a), rv(b), rv(gone)]
    changes = store.changes(base)
    if backend.revision_per_write:
        assert [(c.type, c.name) for c in changes] == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a")]
        assert [c.revision for c in changes] == revs
        check_revisions(revs, base)
    else:  # etcd: one revision for the txn, and one write per key (its last): `a` never existed
        assert [(c.type, c.name) for c in changes] == [("ADDED", "b")]
        assert len(set(revs)) == 1 and revs[0] > base and changes[0].revision == revs[0]
    assert store.revision() == revs[-1]


def test_put_and_delete_return_the_object_at_its_revision(store):
    """put returns the object with its new resourceVersion; delete the last state at the delete's revision."""
    created = put(store, "a", labels={"x": "1"})
    assert store.get("ConfigMap", "default", "a") == created
    with store.transaction() as txn:
        current = txn.get("ConfigMap", "default", "a")
        current["metadata"]["labels"] = {"x": "2"}
        updated = txn.put("ConfigMap", "default", "a", current, event="MODIFIED")
    assert rv(updated) == rv(created) + 1
    with store.transaction() as txn:
        deleted = txn.delete("ConfigMap", "default", "a", txn.get("ConfigMap", "default", "a"))
    assert rv(deleted) == rv(updated) + 1 and deleted["metadata"]["labels"] == {"x": "2"}
    assert store.get("ConfigMap", "default", "a") is None
    assert store.changes(rv(updated))[0].obj == deleted


def test_rollback_takes_no_revision(store, base, check_revisions):
    """A transaction that fails writes nothing and leaves no gap in revisions."""
    put(store, "a")
    with pytest.raises(RuntimeError):
        with store.transaction() as txn:
            txn.put("ConfigMap", "default", "b", {"metadata": {"name": "b"}}, event="ADDED")
            raise RuntimeError("boom")
    assert store.get("ConfigMap", "default", "b") is None
    put(store, "c")
    revs = [c.revision for c in store.changes(base)]
    assert [c.name for c in store.changes(base)] == ["a", "c"]
    check_revisions(revs, base)


def test_nested_transaction_rolls_back_alone(store, base):
    """A savepoint that fails undoes only its own writes."""
    with store.transaction() as txn:
        txn.put("ConfigMap", "default", "a", {"metadata": {"name": "a"}}, event="ADDED")
        with pytest.raises(ValueError):
            with store.transaction() as inner:
                inner.put("ConfigMap", "default", "b", {"metadata": {"name": "b"}}, event="ADDED")
                raise ValueError
    assert store.get("ConfigMap", "default", "a") is not None
    assert store.get("ConfigMap", "default", "b") is None
    assert [c.name for c in store.changes(base)] == ["a"]


def test_transaction_reads_its_own_writes(store):
    """Inside a transaction get, list and exists_in_namespace see its writes (and deletes)."""
    put(store, "old", ns="team")
    with store.transaction() as txn:
        txn.put("ConfigMap", "team", "new", {"metadata": {"name": "new"}}, event="ADDED")
        assert txn.get("ConfigMap", "team", "new")["metadata"]["name"] == "new"
        assert sorted(o["metadata"]["name"] for o in txn.list("ConfigMap")) == ["new", "old"]
        txn.delete("ConfigMap", "team", "old", txn.get("ConfigMap", "team", "old"))
        txn.delete("ConfigMap", "team", "new", txn.get("ConfigMap", "team", "new"))
        assert txn.get("ConfigMap", "team", "old") is None
        assert not txn.exists_in_namespace("team")
        assert txn.exists_in_namespace("")  # the `default` Namespace object itself is cluster-scoped


def test_uncommitted_writes_are_invisible_to_other_threads(store, base):
    """Until commit no other reader sees a transaction's writes; after it, all of them at once."""
    inside, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with store.transaction() as txn:
                txn.put("ConfigMap", "default", "a", {"metadata": {"name": "a"}}, event="ADDED")
                txn.put("ConfigMap", "default", "b", {"metadata": {"name": "b"}}, event="ADDED")
                inside.set()
                release.wait(30)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    t = threading.Thread(target=writer)
    t.start()
    try:
        assert inside.wait(30)
        assert store.get("ConfigMap", "default", "a") is None
        assert store.list("ConfigMap")[0] == []
        assert store.revision() == base
    finally:
        release.set()
        t.join(30)
    assert not errors
    assert [o["metadata"]["name"] for o in store.list("ConfigMap")[0]] == ["a", "b"]
    assert store.revision() > base


def increment(store: Store, times: int) -> None:
    """Read-modify-write a counter `times` times, one transaction each (a lost update shows in the total)."""

    def bump(txn: object) -> None:
        obj = txn.get("ConfigMap", "default", "counter")
        obj["data"]["n"] = str(int(obj["data"]["n"]) + 1)
        txn.put("ConfigMap", "default", "counter", obj, event="MODIFIED")

    for _ in range(times):
        store.transact(bump)  # SQLite: one run; etcd: again after a conflicting commit


def make_counter(store: Store) -> None:
    with store.transaction() as txn:
        txn.put("ConfigMap", "default", "counter", {"metadata": {"name": "counter"}, "data": {"n": "0"}},
                event="ADDED")


def test_transactions_are_serializable_across_threads(store, base, check_revisions):
    """Concurrent read-modify-write transactions from several threads lose no update."""
    make_counter(store)
    threads = [threading.Thread(target=increment, args=(store, 25)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert store.get("ConfigMap", "default", "counter")["data"]["n"] == "100"
    revs = [c.revision for c in store.changes(base, limit=10_000)]
    assert len(revs) == 101
    check_revisions(revs, base)


CHILD = """
import sys
{open}
def bump(txn):
    obj = txn.get("ConfigMap", "default", "counter")
    obj["data"]["n"] = str(int(obj["data"]["n"]) + 1)
    txn.put("ConfigMap", "default", "counter", obj, event="MODIFIED")
for _ in range(int(sys.argv[2])):
    store.transact(bump)
store.close()
"""


def test_transactions_are_serializable_across_processes(store, backend, base, check_revisions):
    """Read-modify-write transactions from several processes lose no update; revisions stay one sequence."""
    make_counter(store)
    code = CHILD.format(open=backend.child_open)
    procs = [subprocess.Popen([sys.executable, "-c", code, backend.address(store), "20"]) for _ in range(3)]
    try:
        assert [p.wait(180) for p in procs] == [0, 0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert store.get("ConfigMap", "default", "counter")["data"]["n"] == "60"
    revs = [c.revision for c in store.changes(base, limit=10_000)]
    assert len(revs) == 61
    check_revisions(revs, base)


def test_list_reports_its_revision(store):
    """A list returns the objects (in namespace, name order) and the revision it saw."""
    put(store, "b")
    put(store, "a")
    put(store, "c", ns="other")
    items, rev = store.list("ConfigMap", "default")
    assert [o["metadata"]["name"] for o in items] == ["a", "b"]
    assert rev == store.revision() == max(int(o["metadata"]["resourceVersion"]) for o in store.list("ConfigMap")[0])
    assert [o["metadata"]["name"] for o in store.list("ConfigMap")[0]] == ["a", "b", "c"]
    assert [o["metadata"]["name"] for o in store.list("ConfigMap", None, name="c")[0]] == ["c"]


@pytest.mark.parametrize("kind,namespace,expected", [
    ("ConfigMap", "default", 2), ("ConfigMap", None, 3), ("Pod", None, 0),
], ids=["one-namespace", "all-namespaces", "none"])
def test_count_and_list_agree(store, kind, namespace, expected):
    """count() and list() see the same objects."""
    put(store, "a")
    put(store, "b")
    put(store, "c", ns="other")
    assert len(store.list(kind, namespace)[0]) == expected
    if namespace is None:
        assert store.count(kind) == expected


def test_get_by_uid(store):
    """An object is found by its metadata.uid until it is deleted."""
    put(store, "a")
    assert store.get_by_uid("a-uid")["metadata"]["name"] == "a"
    assert store.get_by_uid("nobody") is None
    with store.transaction() as txn:
        txn.delete("ConfigMap", "default", "a", txn.get("ConfigMap", "default", "a"))
    assert store.get_by_uid("a-uid") is None


def test_owner_index(store):
    """Objects are found by the uid their ownerReferences name; the index follows updates and deletes."""
    put(store, "child", ownerReferences=[{"uid": "parent-uid", "kind": "X", "name": "p", "apiVersion": "v1"}])
    with store.transaction() as txn:
        assert txn.dependents("parent-uid") == [("ConfigMap", "default", "child")]
        txn.put("ConfigMap", "default", "child", {"metadata": {"name": "child"}}, event="MODIFIED")
        assert txn.dependents("parent-uid") == []


def test_fingerprint_changes_with_any_object_of_the_kind(store):
    """fingerprint(kind) differs from the one before after each create, update and delete of that kind only."""
    fingerprints = [store.fingerprint("ConfigMap")]
    put(store, "a")
    fingerprints.append(store.fingerprint("ConfigMap"))
    put(store, "a", labels={"x": "y"})
    fingerprints.append(store.fingerprint("ConfigMap"))
    before_pod = store.fingerprint("ConfigMap")
    put(store, "p", kind="Pod")
    assert store.fingerprint("ConfigMap") == before_pod
    with store.transaction() as txn:
        txn.delete("ConfigMap", "default", "a", txn.get("ConfigMap", "default", "a"))
    fingerprints.append(store.fingerprint("ConfigMap"))
    assert all(a != b for a, b in zip(fingerprints, fingerprints[1:])), fingerprints
    assert [f[0] for f in fingerprints] == [0, 1, 1, 0]
