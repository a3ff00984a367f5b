"""Secrets at rest, as a user runs kctl: real processes, real files; no file of the store holds a Secret's value."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

KCTL = str(Path(sys.executable).parent / "kctl")
VALUE = "Zq9-the-launch-code-7781"
STRING_VALUE = "plain-string-data-4471-xyzzy"
B64 = base64.b64encode(VALUE.encode()).decode()
MANIFEST = f"""apiVersion: v1
kind: Secret
metadata:
  name: db
  labels: {{app: web}}
type: Opaque
data:
  password: {B64}
stringData:
  token: {STRING_VALUE}
"""
NEEDLES = [VALUE.encode(), B64.encode(), STRING_VALUE.encode(), base64.b64encode(STRING_VALUE.encode())]


@pytest.fixture
def run(tmp_path):
    """run(*args, input=None) -> CompletedProcess of the real `kctl` on a store of this test (text)."""
    folder = tmp_path / "state"
    folder.mkdir(mode=0o700)
    env = {**os.environ, "KCTL_STORE": str(folder / "kctl.db")}
    env.pop("KCTL_SERVER", None)

    def kctl(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([KCTL, *args], input=input, capture_output=True, text=True, env=env, timeout=120)

    kctl.folder = folder
    return kctl


def leaks(folder: Path) -> list[str]:
    """Every (file, needle) of the folder, sub-folders included, where a Secret value or its base64 appears."""
    return [f"{p.relative_to(folder)}: {n!r}" for p in sorted(folder.rglob("*")) if p.is_file()
            for n in NEEDLES if n in p.read_bytes()]


def test_applied_secret_is_nowhere_in_the_store_files(run, tmp_path):
    """`kctl apply -f` a Secret, then backup: neither value nor base64 in db, -wal, -shm, keys or the
    backup (last-applied annotation included); `kctl get secret -o yaml` still shows it."""
    manifest = tmp_path / "secret.yaml"
    manifest.write_text(MANIFEST)
    done = run("apply", "-f", str(manifest))
    assert done.returncode == 0, done.stderr
    assert run("backup", str(run.folder / "backup.db")).returncode == 0
    files = {p.name for p in run.folder.iterdir()}
    assert {"kctl.db", "kctl.db.keys", "backup.db"} <= files
    assert leaks(run.folder) == []
    shown = run("get", "secret", "db", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    obj = json.loads(shown.stdout)
    assert obj["data"]["password"] == B64
    assert base64.b64decode(obj["data"]["token"]).decode() == STRING_VALUE
    assert B64 in run("get", "secret", "db", "-o", "yaml").stdout
    assert run("get", "secrets", "-l", "app=web", "-o", "name").stdout == "secret/db\n"
    assert run("get", "secrets", "--field-selector", "metadata.name=db", "-o", "name").stdout == "secret/db\n"


def test_rotate_key(run, tmp_path):
    """`kctl encryption rotate-key` writes a new key, keeps Secrets readable and leaves no value in the files."""
    manifest = tmp_path / "secret.yaml"
    manifest.write_text(MANIFEST)
    assert run("apply", "-f", str(manifest)).returncode == 0
    before = json.loads((run.folder / "kctl.db.keys").read_text())
    done = run("encryption", "rotate-key")
    assert done.returncode == 0, done.stderr
    after = json.loads((run.folder / "kctl.db.keys").read_text())
    [old] = before["resources"][0]["providers"][0]["aesgcm"]["keys"]
    [new] = after["resources"][0]["providers"][0]["aesgcm"]["keys"]
    assert new["name"] != old["name"] and new["name"] in done.stdout
    assert oct((run.folder / "kctl.db.keys").stat().st_mode & 0o777) == "0o600"
    assert json.loads(run("get", "secret", "db", "-o", "json").stdout)["data"]["password"] == B64
    assert leaks(run.folder) == []


@pytest.mark.parametrize("damage,message", [
    (lambda keys: keys.unlink(), "is missing"),
    (lambda keys: keys.write_text("{not a config"), "not an EncryptionConfiguration"),
    (lambda keys: keys.write_text(keys.read_text().replace('"secret": "', '"secret": "AAAA', 1)),
     "must be 16, 24 or 32 bytes"),
], ids=["missing", "garbage", "wrong-key"])
def test_bad_key_file_is_one_line(run, tmp_path, damage, message):
    """A missing or broken key file: `kctl get secret` exits non-zero with one line naming the key file."""
    manifest = tmp_path / "secret.yaml"
    manifest.write_text(MANIFEST)
    assert run("apply", "-f", str(manifest)).returncode == 0
    damage(run.folder / "kctl.db.keys")
    done = run("get", "secret", "db", "-o", "yaml")
    assert done.returncode != 0
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert message in done.stderr and "kctl.db.keys" in done.stderr
    assert VALUE not in done.stderr and B64 not in done.stderr
    assert run("get", "configmaps").returncode == 0  # what is not encrypted still reads


def test_restore_with_unknown_key_is_one_line(run, tmp_path):
    """A backup whose Secrets were sealed by another store's key is refused with one line; nothing changes."""
    manifest = tmp_path / "secret.yaml"
    manifest.write_text(MANIFEST)
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    env = {**os.environ, "KCTL_STORE": str(other / "kctl.db")}
    for args in (["apply", "-f", str(manifest)], ["backup", str(tmp_path / "other.db")]):
        assert subprocess.run([KCTL, *args], env=env, capture_output=True, timeout=120).returncode == 0
    assert run("create", "namespace", "keep").returncode == 0
    done = run("restore", str(tmp_path / "other.db"))
    assert done.returncode != 0 and len(done.stderr.splitlines()) == 1
    assert "cannot restore" in done.stderr and "Traceback" not in done.stderr
    assert run("get", "namespace", "keep", "-o", "name").stdout == "namespace/keep\n"
    (run.folder / "kctl.db.keys").write_bytes((other / "kctl.db.keys").read_bytes())
    assert run("restore", str(tmp_path / "other.db")).returncode == 0
    assert json.loads(run("get", "secret", "db", "-o", "json").stdout)["data"]["password"] == B64
