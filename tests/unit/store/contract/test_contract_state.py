"""Store contract: Secrets sealed at rest, export/import of state (backup and restore), key rotation."""

from __future__ import annotations

import base64
import os
import stat

import pytest

from kctl.machinery.errors import Gone
from kctl.store.contract import Store

VALUE = "hunter2-very-distinctive"
B64 = base64.b64encode(VALUE.encode()).decode()


def put(store: Store, name: str, ns: str = "default", kind: str = "ConfigMap", **extra: object) -> dict:
    with store.transaction() as txn:
        return txn.put(kind, ns, name, {"metadata": {"name": name, "uid": name + "-uid", **extra}}, event="ADDED")


def put_secret(store: Store, name: str = "db") -> dict:
    with store.transaction() as txn:
        return txn.put("Secret", "default", name, {"apiVersion": "v1", "kind": "Secret",
                                                   "metadata": {"name": name, "uid": f"{name}-uid"},
                                                   "data": {"password": B64}, "stringData": {"plain": VALUE}},
                       event="ADDED")


def test_secrets_are_sealed_at_rest_and_read_plain(store, backend, base):
    """No byte the backend holds carries a Secret's value (nor its base64); every read returns it plain."""
    put_secret(store)
    put(store, "cm")
    with store.transaction() as txn:
        obj = txn.get("Secret", "default", "db")
        assert obj["stringData"]["plain"] == VALUE
        obj["metadata"]["labels"] = {"v": "2"}
        txn.put("Secret", "default", "db", obj, event="MODIFIED")
    assert store.get("Secret", "default", "db")["data"]["password"] == B64
    assert store.get_by_uid("db-uid")["stringData"]["plain"] == VALUE
    assert store.list("Secret")[0][0]["data"]["password"] == B64
    assert [c.obj["stringData"]["plain"] for c in store.changes(base) if c.kind == "Secret"] == [VALUE, VALUE]
    with store.transaction() as txn:
        txn.delete("Secret", "default", "db", txn.get("Secret", "default", "db"))
    raw = backend.raw(store)
    assert b"cm-uid" in raw  # the inspection sees the stored data
    assert VALUE.encode() not in raw and B64.encode() not in raw
    assert store.key_path.exists()


def test_backup_and_restore(store, tmp_path):
    """A backup restores the objects; revisions continue upwards and watchers get Gone."""
    copied = int(put(store, "a")["metadata"]["resourceVersion"])
    backup = tmp_path / "backup.db"
    assert store.backup(backup) == copied
    assert stat.S_IMODE(os.stat(backup).st_mode) == 0o600
    put(store, "b")
    old_head = int(put(store, "c")["metadata"]["resourceVersion"])
    head = store.restore(backup)
    assert head > old_head and store.revision() == head
    assert store.get("ConfigMap", "default", "b") is None
    assert store.get("ConfigMap", "default", "a") is not None
    with pytest.raises(Gone):
        store.changes(old_head)
    assert int(put(store, "d")["metadata"]["resourceVersion"]) > head


def test_backup_round_trip_into_a_new_store(store, backend, make_store, tmp_path):
    """Every object (Secrets too, same key file) comes back in another store; its revision is above both heads."""
    put(store, "a", labels={"k": "v"})
    put(store, "p", kind="Pod", ns="team")
    put_secret(store)
    exported = {(o["metadata"]["name"]) : o for kind in ("ConfigMap", "Pod", "Secret", "Namespace")
                for o in store.list(kind)[0]}
    dest = tmp_path / "export.db"
    copied = store.backup(dest)
    assert copied == store.revision()
    target = make_store()
    target.key_path.write_bytes(store.key_path.read_bytes())
    os.chmod(target.key_path, 0o600)
    for i in range(10):
        put(target, f"t{i}")
    target_head = target.revision()
    head = target.restore(dest)
    assert head > max(copied, target_head)
    imported = {(o["metadata"]["name"]): o for kind in ("ConfigMap", "Pod", "Secret", "Namespace")
                for o in target.list(kind)[0]}
    if not backend.restore_keeps_revisions:  # every restored object is written again, at a new revision
        for obj in (*imported.values(), *exported.values()):
            assert int(obj["metadata"].pop("resourceVersion")) > 0
    assert imported == exported
    assert target.get_by_uid("db-uid")["stringData"]["plain"] == VALUE
    assert target.revision() == head


def test_restore_refuses_garbage(store, tmp_path):
    """Restoring a file that is not a kctl backup fails and changes nothing."""
    put(store, "a")
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(Exception, match="not a kctl backup"):
        store.restore(bad)
    assert store.get("ConfigMap", "default", "a") is not None


def test_rotate_key_keeps_secrets_readable(store, backend):
    """After a key rotation every Secret reads as before and none is stored in clear."""
    put_secret(store, "one")
    put_secret(store, "two")
    name, rows = store.rotate_key()
    assert name and rows >= 2
    assert [o["stringData"]["plain"] for o in store.list("Secret")[0]] == [VALUE, VALUE]
    raw = backend.raw(store)
    assert VALUE.encode() not in raw and B64.encode() not in raw
