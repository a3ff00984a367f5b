"""The etcd store beyond the contract suite: raw layout in etcd, sealing, conflicts and retries, limits, Gone."""

from __future__ import annotations

import threading
import time

import pytest

from kctl.machinery.errors import Gone, RequestEntityTooLarge
from kctl.store.contract import CommitConflict, StoreError
from kctl.store.etcd.keys import b64, range_end, unb64

SECRET_VALUE = "correct-horse-battery-staple"


def raw_get(store, key: str) -> tuple[bytes, int] | None:
    """(value, mod_revision) of a key as etcd holds it, or None."""
    kvs = store.client.call("/kv/range", {"key": b64(key)}).get("kvs") or []
    return (unb64(kvs[0].get("value", "")), int(kvs[0]["mod_revision"])) if kvs else None


def put(store, name: str, kind: str = "ConfigMap", ns: str = "default", **meta: object) -> dict:
    with store.transaction() as txn:
        return txn.put(kind, ns, name, {"metadata": {"name": name, "uid": f"{name}-uid", **meta}, "data": {}},
                       event="ADDED")


def test_objects_are_stored_as_kubernetes_keys_without_resource_version(etcd_store):
    """A ConfigMap is at <prefix>/configmaps/<ns>/<name>, its value JSON without resourceVersion (= mod_revision)."""
    created = put(etcd_store, "a")
    prefix = etcd_store.address.prefix
    value, mod = raw_get(etcd_store, f"{prefix}/configmaps/default/a")
    assert b'"name":"a"' in value and b"resourceVersion" not in value
    assert created["metadata"]["resourceVersion"] == str(mod)
    assert raw_get(etcd_store, f"{prefix}/namespaces/default") is not None


def test_secrets_are_sealed_in_etcd(etcd_store):
    """A Secret's value in etcd is an aesgcm envelope (k8s:enc:aesgcm:v1:), never its data; reads are plain."""
    with etcd_store.transaction() as txn:
        txn.put("Secret", "default", "s", {"metadata": {"name": "s"}, "stringData": {"v": SECRET_VALUE}},
                event="ADDED")
    value, _ = raw_get(etcd_store, f"{etcd_store.address.prefix}/secrets/default/s")
    assert value.startswith(b"k8s:enc:aesgcm:v1:") and SECRET_VALUE.encode() not in value
    assert etcd_store.get("Secret", "default", "s")["stringData"]["v"] == SECRET_VALUE


def test_a_new_store_makes_the_default_namespace_once(make_etcd_store):
    """Several stores opening one new prefix at once leave one `default` Namespace, written once."""
    prefix = f"/race-{time.time_ns()}"
    opened: list = []
    threads = [threading.Thread(target=lambda: opened.append(make_etcd_store(prefix=prefix))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(opened) == 4
    assert len({s.get("Namespace", "", "default")["metadata"]["uid"] for s in opened}) == 1
    assert [c.name for c in opened[0].changes(opened[0].revision() - 1)] == ["default"]


def test_transaction_conflicts_when_a_read_key_changed(etcd_store, make_etcd_store):
    """One attempt (transaction()) raises CommitConflict and writes nothing when what it read changed."""
    put(etcd_store, "a")
    other = make_etcd_store(prefix=etcd_store.address.prefix)
    with pytest.raises(CommitConflict):
        with etcd_store.transaction() as txn:
            obj = txn.get("ConfigMap", "default", "a")
            put(other, "a", labels={"by": "other"})
            obj["data"] = {"mine": "1"}
            txn.put("ConfigMap", "default", "a", obj, event="MODIFIED")
    assert etcd_store.get("ConfigMap", "default", "a")["metadata"]["labels"] == {"by": "other"}


def test_a_list_in_a_transaction_is_guarded_against_new_objects(etcd_store, make_etcd_store):
    """A transaction that listed a kind conflicts when another writer creates an object of that kind."""
    other = make_etcd_store(prefix=etcd_store.address.prefix)
    with pytest.raises(CommitConflict):
        with etcd_store.transaction() as txn:
            assert txn.list("ConfigMap") == []
            put(other, "phantom")
            txn.put("ConfigMap", "default", "only", {"metadata": {"name": "only"}}, event="ADDED")
    assert etcd_store.get("ConfigMap", "default", "only") is None


def test_transact_retries_two_concurrent_writers_of_one_object(etcd_store, make_etcd_store):
    """Two threads (two handles) incrementing one counter through transact lose no increment."""
    with etcd_store.transaction() as txn:
        txn.put("ConfigMap", "default", "n", {"metadata": {"name": "n"}, "data": {"n": "0"}}, event="ADDED")
    handles = [etcd_store, make_etcd_store(prefix=etcd_store.address.prefix)]
    runs = [0, 0]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        def bump(txn) -> None:
            runs[i] += 1
            obj = txn.get("ConfigMap", "default", "n")
            obj["data"]["n"] = str(int(obj["data"]["n"]) + 1)
            txn.put("ConfigMap", "default", "n", obj, event="MODIFIED")

        try:
            for _ in range(20):
                handles[i].transact(bump)
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert etcd_store.get("ConfigMap", "default", "n")["data"]["n"] == "40"
    assert sum(runs) >= 40


def test_a_transaction_over_the_write_limit_is_refused(etcd_store):
    """More than max_writes_per_transaction (32) object writes: one clear StoreError line, nothing written."""
    assert etcd_store.max_writes_per_transaction == 32
    with pytest.raises(StoreError) as info:
        with etcd_store.transaction() as txn:
            for i in range(33):
                txn.put("ConfigMap", "default", f"o{i}", {"metadata": {"name": f"o{i}"}}, event="ADDED")
    assert "at most 32" in info.value.message and "\n" not in info.value.message
    assert etcd_store.count("ConfigMap") == 0


def test_a_transaction_over_etcds_request_size_is_refused(etcd_store):
    """A batch larger than etcd's 1.5 MiB request limit is RequestEntityTooLarge (413); nothing is written."""
    with pytest.raises(RequestEntityTooLarge):
        with etcd_store.transaction() as txn:
            for i in range(3):
                txn.put("ConfigMap", "default", f"big{i}", {"metadata": {"name": f"big{i}"},
                                                            "data": {"x": "y" * 700_000}}, event="ADDED")
    assert etcd_store.count("ConfigMap") == 0
    put_big = {"metadata": {"name": "one"}, "data": {"x": "y" * 1_000_000}}  # one object under the limit: fine
    with etcd_store.transaction() as txn:
        txn.put("ConfigMap", "default", "one", put_big, event="ADDED")
    assert len(etcd_store.get("ConfigMap", "default", "one")["data"]["x"]) == 1_000_000


def test_a_watch_from_a_revision_etcd_compacted_is_gone_not_a_hang(etcd_store, make_etcd_store):
    """When etcd itself was compacted past `since` (by another store), watch raises Gone promptly."""
    since = int(put(etcd_store, "a")["metadata"]["resourceVersion"])
    put(etcd_store, "b")
    put(etcd_store, "c")
    other = make_etcd_store()  # another prefix on the same etcd compacts the whole cluster
    other.compact_to(other.revision() - 1)
    started = time.monotonic()
    with pytest.raises(Gone):
        list(etcd_store.watch(since, timeout=20))
    assert time.monotonic() - started < 15


def test_a_restore_ends_a_running_watch_with_gone(etcd_store, tmp_path):
    """A watcher of the whole store gets Gone when the store is restored (it re-lists)."""
    put(etcd_store, "a")
    backup = tmp_path / "b.db"
    etcd_store.backup(backup)
    outcome: list[object] = []
    ready = threading.Event()
    since = etcd_store.revision()

    def watch() -> None:
        try:
            for change in etcd_store.watch(since, timeout=60):
                ready.set()
                outcome.append(change.name)
        except Gone:
            outcome.append("Gone")

    thread = threading.Thread(target=watch)
    thread.start()
    try:
        put(etcd_store, "b")
        assert ready.wait(30)
        etcd_store.restore(backup)
    finally:
        thread.join(60)
    assert outcome == ["b", "Gone"]


def test_compactor_compacts_to_the_revision_seen_one_interval_earlier(make_etcd_store):
    """With a short compaction_interval the horizon moves up behind the writes; two daemons share one key."""
    store = make_etcd_store(compaction_interval=0.3)
    second = make_etcd_store(prefix=store.address.prefix, compaction_interval=0.3)
    first_head = int(put(store, "a")["metadata"]["resourceVersion"])
    deadline = time.monotonic() + 30
    while store.compacted() < first_head - 1 and time.monotonic() < deadline:
        put(second, f"w{int(time.monotonic() * 1000)}")
        time.sleep(0.1)
    horizon = store.compacted()
    assert horizon >= first_head - 1
    assert horizon < store.revision()  # never the head: watchers keep at least one interval
    with pytest.raises(Gone):
        store.changes(horizon - 1)


def test_count_and_fingerprint_skip_kctls_own_keys(etcd_store):
    """count() counts objects only (not the index, marker and head keys)."""
    put(etcd_store, "a", ownerReferences=[{"uid": "p", "kind": "X", "name": "p", "apiVersion": "v1"}])
    assert etcd_store.count() == 2  # `default` and a
    raw = etcd_store.client.call("/kv/range", {"key": b64(etcd_store.address.prefix + "/"),
                                               "range_end": range_end(etcd_store.address.prefix + "/"),
                                               "count_only": True})
    assert int(raw["count"]) > 2


def test_vacuum_compacts_to_history_and_defragments(make_etcd_store):
    """vacuum() compacts to `history` behind the head and defragments every member; reads go on."""
    store = make_etcd_store(history=2)
    for i in range(5):
        put(store, f"v{i}")
    store.vacuum()
    assert store.compacted() == store.revision() - 2
    assert len(store.changes(store.compacted())) == 2
    assert store.count("ConfigMap") == 5


def test_prefetch_reads_many_objects_in_one_round_trip_at_the_snapshot(etcd_store, make_etcd_store, monkeypatch):
    """prefetch() reads the objects a transaction will get in one etcd call; the gets then cost none and the
    commit still conflicts when one of them changed."""
    for i in range(5):
        put(etcd_store, f"p{i}")
    other = make_etcd_store(prefix=etcd_store.address.prefix)
    with pytest.raises(CommitConflict):
        with etcd_store.transaction() as txn:
            txn.prefetch([("ConfigMap", "default", f"p{i}") for i in range(5)] + [("ConfigMap", "default", "none")])
            calls = []
            real = etcd_store.client.call
            monkeypatch.setattr(etcd_store.client, "call", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
            put(other, "p3", labels={"moved": "yes"})
            objs = [txn.get("ConfigMap", "default", f"p{i}") for i in range(5)]
            assert txn.get("ConfigMap", "default", "none") is None and calls == []
            assert "labels" not in objs[3]["metadata"]  # the snapshot, not the newer write
            objs[3]["data"] = {"x": "1"}
            txn.put("ConfigMap", "default", "p3", objs[3], event="MODIFIED")


def test_backups_cross_backends_both_ways(etcd_store, tmp_path):
    """A SQLite backup restores into etcd and an etcd backup into SQLite: objects, owners and Secrets intact."""
    import os

    from kctl.store.sqlite import Store as SQLiteStore

    lite = SQLiteStore(tmp_path / "lite" / "kctl.db")
    try:
        with lite.transaction() as txn:
            txn.put("Secret", "team", "db", {"metadata": {"name": "db", "uid": "db-uid"},
                                             "stringData": {"v": SECRET_VALUE}}, event="ADDED")
            owner = {"uid": "db-uid", "kind": "Secret", "name": "db", "apiVersion": "v1"}
            txn.put("ConfigMap", "team", "child", {"metadata": {"name": "child", "uid": "child-uid",
                                                                "ownerReferences": [owner]}}, event="ADDED")
        lite.backup(tmp_path / "from-sqlite.db")
        etcd_store.key_path.write_bytes(lite.key_path.read_bytes())
        os.chmod(etcd_store.key_path, 0o600)
        etcd_store.restore(tmp_path / "from-sqlite.db")
        assert etcd_store.get("Secret", "team", "db")["stringData"]["v"] == SECRET_VALUE
        with etcd_store.transaction() as txn:
            assert txn.dependents("db-uid") == [("ConfigMap", "team", "child")]
        assert etcd_store.get_by_uid("child-uid")["metadata"]["name"] == "child"
        with etcd_store.transaction() as txn:
            txn.put("ConfigMap", "team", "new", {"metadata": {"name": "new", "uid": "new-uid"}}, event="ADDED")
        copied = etcd_store.backup(tmp_path / "from-etcd.db")
        assert copied == etcd_store.revision()
        lite.restore(tmp_path / "from-etcd.db")
        assert lite.get("Secret", "team", "db")["stringData"]["v"] == SECRET_VALUE
        assert lite.get("ConfigMap", "team", "new")["metadata"]["resourceVersion"] == str(copied)
        assert lite.get_by_uid("new-uid") is not None and lite.get("Namespace", "", "default") is not None
        with lite.transaction() as txn:
            assert txn.dependents("db-uid") == [("ConfigMap", "team", "child")]
        assert SECRET_VALUE.encode() not in (tmp_path / "from-etcd.db").read_bytes()
    finally:
        lite.close()
