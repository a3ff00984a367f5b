"""Secrets encrypted at rest: sealed rows, the key file, wrong or missing keys, rotation, migration, restore."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import stat
import threading

import pytest

from kctl.store.encryption import PREFIX, EncryptionError, Key, KeyRing, StoreKeys, key_name_of, new_key, render
from kctl.store.sqlite import Store, StoreError

VALUE = "hunter2-very-distinctive"
B64 = base64.b64encode(VALUE.encode()).decode()


def secret(name: str = "db", **extra) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "uid": f"{name}-uid", **extra},
            "data": {"password": B64}, "stringData": {"plain": VALUE}}


def put(store: Store, obj: dict, kind: str = "Secret", event: str = "ADDED") -> dict:
    with store.transaction() as txn:
        return txn.put(kind, "default", obj["metadata"]["name"], obj, event=event)


def raw_rows(store: Store, kind: str = "Secret") -> list:
    conn = store._conn()
    return ([r[0] for r in conn.execute("SELECT data FROM objects WHERE kind=?", (kind,))]
            + [r[0] for r in conn.execute("SELECT data FROM changes WHERE kind=?", (kind,))])


def test_store_keys_name_the_key_file_beside_the_state_and_keep_one_ring_per_store(tmp_path):
    class Anchored(StoreKeys):
        def __init__(self, path):
            self.path = path

    one, other = Anchored(tmp_path / "kctl.db"), Anchored(tmp_path / "other.db")
    assert one.key_path == tmp_path / "kctl.db.keys"
    assert one.keyring() is one.keyring() and one.keyring().path == one.key_path
    assert other.keyring() is not one.keyring() and other.keyring().path == tmp_path / "other.db.keys"
    assert issubclass(Store, StoreKeys)


def test_new_key_names_are_dated_and_distinct():
    names = {new_key().name for _ in range(50)}
    assert len(names) == 50 and all(n.startswith("key-") and len(n.rsplit("-", 1)[1]) == 8 for n in names)


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "state" / "kctl.db")
    yield s
    s.close()


def test_secret_rows_are_sealed_and_reads_are_plain(store):
    """A Secret is a sealed BLOB in objects and in the change log; every read returns the plain object."""
    put(store, secret())
    put(store, {"metadata": {"name": "cm"}, "data": {"k": VALUE}}, kind="ConfigMap")
    rows = raw_rows(store)
    assert len(rows) == 2 and all(isinstance(r, bytes) and r.startswith(PREFIX) for r in rows)
    assert all(VALUE.encode() not in r and B64.encode() not in r for r in rows)
    assert isinstance(raw_rows(store, "ConfigMap")[0], str)  # other kinds stay clear
    assert store.get("Secret", "default", "db")["stringData"]["plain"] == VALUE
    assert store.get_by_uid("db-uid")["data"]["password"] == B64
    assert store.list("Secret")[0][0]["data"]["password"] == B64
    assert [c.obj["metadata"]["name"] for c in store.changes(1) if c.kind == "Secret"] == ["db"]
    with store.transaction() as txn:
        assert txn.get("Secret", "default", "db")["stringData"]["plain"] == VALUE
        assert txn.list("Secret")[0]["metadata"]["name"] == "db"
        txn.delete("Secret", "default", "db", txn.get("Secret", "default", "db"))
    assert all(isinstance(r, bytes) for r in raw_rows(store))  # the DELETED change too


def test_secret_value_not_in_any_file(store):
    """After a Secret is written and checkpointed or not, no file of the store holds its value or base64."""
    put(store, secret(annotations={"kubectl.kubernetes.io/last-applied-configuration": json.dumps(secret())}))
    store.backup(store.path.parent / "backup.db")
    for name in os.listdir(store.path.parent):
        content = (store.path.parent / name).read_bytes()
        assert VALUE.encode() not in content and B64.encode() not in content, name


def test_sealed_value_is_bound_to_its_object(store):
    """A sealed row copied onto another Secret does not open (the object's key is authenticated data)."""
    put(store, secret("a"))
    put(store, secret("b"))
    conn = store._conn()
    conn.execute("UPDATE objects SET data=(SELECT data FROM objects WHERE name='a' AND kind='Secret') "
                 "WHERE kind='Secret' AND name='b'")
    with pytest.raises(EncryptionError, match="does not decrypt"):
        store.get("Secret", "default", "b")


def test_key_file_is_private_and_made_with_the_store(tmp_path):
    """A new store has its key file beside it, 0600; a looser key file of ours is tightened on use."""
    store = Store(tmp_path / "s" / "kctl.db")
    try:
        assert store.key_path == tmp_path / "s" / "kctl.db.keys"
        assert stat.S_IMODE(os.stat(store.key_path).st_mode) == 0o600
        os.chmod(store.key_path, 0o644)
        put(store, secret())
        assert stat.S_IMODE(os.stat(store.key_path).st_mode) == 0o600
    finally:
        store.close()


def good_config() -> dict:
    return json.loads(render([Key("k1", b"k" * 32)]))


def broken(change) -> bytes:
    config = good_config()
    change(config)
    return json.dumps(config).encode()


@pytest.mark.parametrize("content,message", [
    (b"\x00\x01not: [json", "not an EncryptionConfiguration"),
    (broken(lambda c: c.update(kind="Other")), "kind must be EncryptionConfiguration"),
    (broken(lambda c: c["resources"][0]["providers"][0]["aesgcm"]["keys"][0].update(secret="%%%")),
     r"keys\[0\]\.secret: not base64"),
    (broken(lambda c: c["resources"][0]["providers"][0]["aesgcm"]["keys"][0].update(
        secret=base64.b64encode(b"short").decode())), "must be 16, 24 or 32 bytes"),
    (broken(lambda c: c["resources"][0]["providers"].insert(0, {"kms": {}})), "'kms' is not supported"),
    (broken(lambda c: c["resources"][0]["providers"][0]["aesgcm"]["keys"][0].update(name="a:b")),
     "without ':'"),
    (broken(lambda c: c["resources"][0].update(resources=["configmaps"])), "no aesgcm key for secrets"),
], ids=["garbage", "kind", "base64", "length", "provider", "name", "no-secrets"])
def test_bad_key_file_is_one_clear_error(store, content, message):
    """A malformed key file gives an EncryptionError naming the file and the field, not a traceback."""
    store.key_path.write_bytes(content)
    with pytest.raises(EncryptionError, match=message) as info:
        put(store, secret())
    assert str(store.key_path) in info.value.message and "\n" not in info.value.message


def test_yaml_key_file_written_by_hand(store):
    """An EncryptionConfiguration in YAML (as written for a kube-apiserver) is read too."""
    secret_b64 = base64.b64encode(b"y" * 32).decode()
    store.key_path.write_text(f"""apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - aesgcm:
          keys:
            - name: handmade
              secret: {secret_b64}
      - identity: {{}}
""")
    put(store, secret())
    assert key_name_of(raw_rows(store)[0]) == "handmade"
    assert store.get("Secret", "default", "db")["stringData"]["plain"] == VALUE


def test_missing_key_file(store):
    """Without its key file a store with sealed rows refuses reads and writes; one without any makes a new key."""
    put(store, secret())
    store.key_path.unlink()
    store._ring = None
    with pytest.raises(EncryptionError, match="is missing"):
        store.get("Secret", "default", "db")
    with pytest.raises(EncryptionError, match="is missing"):
        put(store, secret("other"))
    for table in ("objects", "changes"):  # no sealed row left anywhere
        store._conn().execute(f"DELETE FROM {table} WHERE kind='Secret'")
    put(store, secret("fresh"))
    assert store.key_path.exists()
    assert store.get("Secret", "default", "fresh")["stringData"]["plain"] == VALUE


def test_wrong_key_of_the_same_name(store):
    """A key file whose key has the right name but other bytes is refused with a clear message."""
    put(store, secret())
    name = key_name_of(raw_rows(store)[0])
    store.key_path.write_bytes(render([Key(name, b"z" * 32)]))
    with pytest.raises(EncryptionError, match="does not decrypt"):
        store.get("Secret", "default", "db")


def test_rotation_reseals_everything_and_drops_the_old_key(tmp_path):
    """rotate_key: every Secret row (objects and change log) moves to the new key; the old key is dropped;
    another Store on the same file keeps reading and writes with the new key."""
    path = tmp_path / "s" / "kctl.db"
    store, other = Store(path), Store(path)
    try:
        for i in range(5):
            put(store, secret(f"s{i}"))
        put(store, secret("s0"), event="MODIFIED")
        old = key_name_of(raw_rows(store)[0])
        assert other.get("Secret", "default", "s1")["stringData"]["plain"] == VALUE  # loads the old ring
        name, rows = store.rotate_key()
        assert name != old and rows == len(raw_rows(store)) == 11
        assert {key_name_of(r) for r in raw_rows(store)} == {name}
        assert [k.name for k in KeyRing(store.key_path).keys()] == [name]
        assert other.get("Secret", "default", "s1")["stringData"]["plain"] == VALUE
        put(other, secret("late"))
        assert {key_name_of(r) for r in raw_rows(store)} == {name}
    finally:
        store.close()
        other.close()


def test_reads_keep_working_during_rotation(tmp_path):
    """A reader in another thread never fails while keys rotate under it."""
    path = tmp_path / "s" / "kctl.db"
    store = Store(path)
    for i in range(50):
        put(store, secret(f"s{i}"))
    reader = Store(path)
    errors: list[Exception] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                assert len(reader.list("Secret")[0]) == 50
            except Exception as exc:  # collected, asserted below
                errors.append(exc)
                return

    t = threading.Thread(target=read)
    t.start()
    try:
        for _ in range(3):
            store.rotate_key()
    finally:
        stop.set()
        t.join(30)
        reader.close()
        store.close()
    assert errors == []


def make_old_store(path) -> None:
    """A store as kctl wrote it before encryption (schema 2): a clear Secret, no key file."""
    store = Store(path)
    store.close()
    path.with_name(path.name + ".keys").unlink()
    conn = sqlite3.connect(path)
    data = json.dumps(secret())
    conn.execute("INSERT INTO objects VALUES ('Secret', 'default', 'db', 'db-uid', 2, ?)", (data,))
    conn.execute("INSERT INTO changes VALUES (2, 'ADDED', 'Secret', 'default', 'db', ?)", (data,))
    conn.execute("UPDATE meta SET value=2 WHERE key='revision'")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name='m003_encrypt_secrets'")
    conn.execute("PRAGMA user_version=2")
    conn.commit()
    conn.close()


def test_old_store_is_encrypted_on_open(tmp_path):
    """Opening a store of an older kctl seals its clear Secrets and makes the key file."""
    path = tmp_path / "s" / "kctl.db"
    make_old_store(path)
    store = Store(path)
    try:
        assert all(isinstance(r, bytes) for r in raw_rows(store))
        assert store.get("Secret", "default", "db")["stringData"]["plain"] == VALUE
        assert stat.S_IMODE(os.stat(store.key_path).st_mode) == 0o600
        for name in os.listdir(path.parent):
            assert VALUE.encode() not in (path.parent / name).read_bytes(), name
    finally:
        store.close()


def test_restore_needs_the_backups_key(tmp_path):
    """A backup from another store (other key) is refused with one line and changes nothing;
    with that store's key file beside this one, it restores."""
    theirs = Store(tmp_path / "a" / "kctl.db")
    put(theirs, secret("theirs"))
    theirs.backup(tmp_path / "backup.db")
    ours = Store(tmp_path / "b" / "kctl.db")
    try:
        put(ours, secret("ours"))
        with pytest.raises(StoreError, match="cannot restore: its Secrets do not open") as info:
            ours.restore(tmp_path / "backup.db")
        assert "\n" not in info.value.message
        assert ours.get("Secret", "default", "ours") is not None
        ours.key_path.write_bytes(theirs.key_path.read_bytes())
        ours.restore(tmp_path / "backup.db")
        assert ours.get("Secret", "default", "theirs")["stringData"]["plain"] == VALUE
    finally:
        ours.close()
        theirs.close()


def test_restore_of_an_old_backup_encrypts_it(tmp_path):
    """A backup of an older kctl (clear Secrets) is sealed as it is restored."""
    old = tmp_path / "old" / "kctl.db"
    make_old_store(old)
    store = Store(tmp_path / "s" / "kctl.db")
    try:
        store.restore(old)
        assert all(isinstance(r, bytes) for r in raw_rows(store))
        assert store.get("Secret", "default", "db")["stringData"]["plain"] == VALUE
    finally:
        store.close()
