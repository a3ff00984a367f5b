"""Secrets encrypted at rest: the key file beside the store, and AES-GCM as Kubernetes' aesgcm provider.

kctl.store.sqlite calls this module to seal the stored JSON of every Secret, in `objects` and
in the change log, and to open it again (kctl.store.etcd.store does the same before a value
reaches etcd); kctl.store.migrations calls it to encrypt the clear Secrets of an older store.
Both stores inherit StoreKeys (their key file and its ring, read on first use); the crypto
library is imported only when a Secret is sealed or opened.

The key file is `<store>.keys` (e.g. `kctl.db.keys`), mode 0600, created on first use. It
holds a Kubernetes EncryptionConfiguration (written as JSON, which is also YAML), so the
same keys could be handed to a kube-apiserver:

    {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
     "resources": [{"resources": ["secrets"],
                    "providers": [{"aesgcm": {"keys": [{"name": "key-...", "secret": "<base64>"}]}},
                                  {"identity": {}}]}]}

The first key writes; every key listed reads. A sealed value is, as in Kubernetes,
`k8s:enc:aesgcm:v1:<keyname>:` + 12-byte random nonce + ciphertext and tag, with the
object's (kind, namespace, name) as authenticated data, so a sealed row cannot be moved
to another object. The store keeps it as a BLOB; clear rows are TEXT.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kctl.store.contract import ENCRYPTED_KINDS, StoreError  # noqa: F401  (the kinds sealed, kept by the contract)

if TYPE_CHECKING:  # the crypto library is imported only when a Secret is sealed or opened
    import sqlite3

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

PREFIX = b"k8s:enc:aesgcm:v1:"
NONCE_BYTES = 12
KEY_BYTES = 32
CONFIG_API_VERSION = "apiserver.config.k8s.io/v1"


class EncryptionError(StoreError):
    """The key file is missing, unreadable or malformed, or a sealed value does not open with it."""


class Key(NamedTuple):
    """One named AES key (16, 24 or 32 bytes)."""

    name: str
    secret: bytes


def key_path(store_path: Path) -> Path:
    """Where the keys of the store at store_path live: beside it, `<name>.keys`."""
    return store_path.with_name(store_path.name + ".keys")


class StoreKeys:
    """The key file and key ring of a store whose local anchor (state file) is `self.path`.

    A base of kctl.store.sqlite.Store and kctl.store.etcd.store.EtcdStore: the key file is
    `<path>.keys`, its KeyRing made on first use.
    """

    path: Path
    _ring: KeyRing | None = None

    @property
    def key_path(self) -> Path:
        """The key file sealing this store's Secrets: `<path>.keys`, beside the store's state."""
        return key_path(self.path)

    def keyring(self) -> KeyRing:
        """The ring of the key file (it may not exist yet: see the stores' ensure_key)."""
        if self._ring is None:
            self._ring = KeyRing(self.key_path)
        return self._ring

    def check_backup_keys(self, src: "sqlite3.Connection", source: Path, *, tables: tuple[str, ...],
                          put_key: str) -> None:
        """StoreError unless every key a backup's Secrets are sealed with opens them with this store's key file.

        `src`: the backup (kctl's backup format, a SQLite store file); one sealed row of `tables`
        is tried per key. `put_key` says in the message where the backup's key file belongs.
        """
        tried: set[str | None] = set()
        for table in tables:
            for kind, namespace, name, data in src.execute(
                    f"SELECT kind, namespace, name, data FROM {table} WHERE typeof(data)='blob'"):
                key = key_name_of(data)
                if key in tried:
                    continue
                tried.add(key)
                try:
                    self.keyring().open(data, aad(kind, namespace, name), what=f"{kind} {namespace}/{name}")
                except EncryptionError as exc:
                    raise StoreError(f"{source}: cannot restore: its Secrets do not open with this store's key "
                                     f"file ({exc.message}); put the key file of the store the backup was made "
                                     f"from {put_key}, see docs/security.md") from None


def aad(kind: str, namespace: str, name: str) -> bytes:
    """The authenticated data that binds a sealed value to its object."""
    return f"{kind}/{namespace}/{name}".encode()


def key_name_of(blob: bytes) -> str | None:
    """The key name a sealed value names, or None if it is not one of ours."""
    if not blob.startswith(PREFIX):
        return None
    name, sep, _ = blob[len(PREFIX):].partition(b":")
    return name.decode("utf-8", "replace") if sep else None


def new_key() -> Key:
    """A fresh random 32-byte key with a name that is unique in practice (date + random)."""
    return Key(f"key-{time.strftime('%Y%m%d', time.gmtime())}-{os.urandom(4).hex()}", os.urandom(KEY_BYTES))


def render(keys: list[Key]) -> bytes:
    """The key file's content for keys (the first one writes)."""
    config = {"apiVersion": CONFIG_API_VERSION, "kind": "EncryptionConfiguration",
              "resources": [{"resources": ["secrets"], "providers": [
                  {"aesgcm": {"keys": [{"name": k.name, "secret": base64.b64encode(k.secret).decode()}
                                       for k in keys]}},
                  {"identity": {}}]}]}
    return (json.dumps(config, indent=2) + "\n").encode()


def parse(path: Path, text: bytes) -> list[Key]:
    """The aesgcm keys of an EncryptionConfiguration (JSON, or YAML written by hand), in order."""
    try:
        config = json.loads(text)
    except ValueError:
        try:
            from ruamel.yaml import YAML

            config = YAML(typ="safe").load(text)
        except Exception as exc:  # ruamel raises many kinds
            raise EncryptionError(f"{path}: not an EncryptionConfiguration: {type(exc).__name__}") from None
    if not isinstance(config, dict) or config.get("kind") != "EncryptionConfiguration":
        raise EncryptionError(f"{path}: not an EncryptionConfiguration (kind must be EncryptionConfiguration)")
    keys: list[Key] = []
    for i, entry in enumerate(config.get("resources") or []):
        if not isinstance(entry, dict) or "secrets" not in (entry.get("resources") or []):
            continue
        for j, provider in enumerate(entry.get("providers") or []):
            where = f"{path}: resources[{i}].providers[{j}]"
            if not isinstance(provider, dict) or len(provider) != 1:
                raise EncryptionError(f"{where}: must name exactly one provider")
            (kind, body), = provider.items()
            if kind == "identity":
                continue
            if kind != "aesgcm":
                raise EncryptionError(f"{where}: provider {kind!r} is not supported by kctl (aesgcm, identity)")
            for n, item in enumerate((body or {}).get("keys") or []):
                keys.append(_key(f"{where}.aesgcm.keys[{n}]", item))
    if not keys:
        raise EncryptionError(f"{path}: no aesgcm key for secrets")
    return keys


def _key(where: str, item: object) -> Key:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"] \
            or ":" in item["name"]:
        raise EncryptionError(f"{where}.name: must be a non-empty name without ':'")
    try:
        secret = base64.b64decode(str(item.get("secret", "")), validate=True)
    except (binascii.Error, ValueError):
        raise EncryptionError(f"{where}.secret: not base64") from None
    if len(secret) not in (16, 24, 32):
        raise EncryptionError(f"{where}.secret: must be 16, 24 or 32 bytes, not {len(secret)}")
    return Key(item["name"], secret)


def write_key_file(path: Path, keys: list[Key], *, replace: bool) -> bool:
    """Write keys to path atomically (0600). replace=False never overwrites: returns False if it exists."""
    from kctl.store.privatefiles import write_private

    return write_private(path, render(keys), replace=replace)


class KeyRing:
    """The keys of one store's key file, re-read whenever the file changes (a rotation in another process)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._signature: tuple | None = None
        self._keys: list[Key] = []
        self._ciphers: dict[str, AESGCM] = {}

    def exists(self) -> bool:
        """Whether the key file is there (it may still be malformed)."""
        return self.path.exists()

    def keys(self) -> list[Key]:
        """The current keys (first = primary); EncryptionError if the file is missing or malformed."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise EncryptionError(f"key file {self.path} is missing: the store's Secrets cannot be read or "
                                  "written without it (copy the key file of this store beside it; "
                                  "see docs/security.md)") from None
        signature = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
        with self._lock:
            if signature != self._signature:
                if stat.S_IMODE(st.st_mode) & 0o077:
                    _tighten(self.path, st)
                try:
                    text = self.path.read_bytes()
                except OSError as exc:
                    raise EncryptionError(f"key file {self.path}: cannot read: {exc.strerror}") from None
                self._keys = parse(self.path, text)
                self._ciphers = {}
                self._signature = signature
            return self._keys

    def _cipher(self, key: Key) -> "AESGCM":
        cipher = self._ciphers.get(key.name)
        if cipher is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            cipher = self._ciphers[key.name] = AESGCM(key.secret)
        return cipher

    def primary(self) -> Key:
        """The key new values are sealed with (the file's first)."""
        return self.keys()[0]

    def seal(self, plaintext: bytes, authenticated: bytes) -> bytes:
        """Encrypt with the primary key: PREFIX + name + ':' + nonce + ciphertext||tag."""
        key = self.primary()
        nonce = os.urandom(NONCE_BYTES)
        return PREFIX + key.name.encode() + b":" + nonce + self._cipher(key).encrypt(nonce, plaintext, authenticated)

    def open(self, blob: bytes, authenticated: bytes, *, what: str) -> bytes:
        """Decrypt a sealed value; EncryptionError naming `what` if no key of the file opens it."""
        name = key_name_of(blob)
        if name is None:
            raise EncryptionError(f"{what}: stored value is not a kctl-encrypted value")
        key = next((k for k in self.keys() if k.name == name), None)
        if key is None:
            raise EncryptionError(f"{what}: encrypted with key {name!r}, which key file {self.path} does not "
                                  "hold (wrong or old key file? see docs/security.md)")
        body = blob[len(PREFIX) + len(name.encode()) + 1:]
        from cryptography.exceptions import InvalidTag

        try:
            return self._cipher(key).decrypt(body[:NONCE_BYTES], body[NONCE_BYTES:], authenticated)
        except (InvalidTag, ValueError):
            raise EncryptionError(f"{what}: key {name!r} of {self.path} does not decrypt it "
                                  "(a different key of the same name? wrong key file?)") from None


def _tighten(path: Path, st: os.stat_result) -> None:
    """A key file readable by others is made 0600 if it is ours, refused if it is not."""
    if st.st_uid != os.getuid():
        raise EncryptionError(f"key file {path} has mode {stat.S_IMODE(st.st_mode):04o} and belongs to "
                              f"uid {st.st_uid}: refusing to use it (make it 0600 and yours)")
    os.chmod(path, 0o600)
