"""Where the store is: a mistyped --store/KCTL_STORE is an error, not a new empty store; loose modes are tightened."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

KCTL = str(Path(sys.executable).parent / "kctl")
CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"


def kctl(*args: str, env: dict, input: str | None = None) -> subprocess.CompletedProcess:
    """The real command in its own process (text)."""
    return subprocess.run([KCTL, *args], input=input, capture_output=True, text=True, env=env, timeout=120)


def env_for(store: Path | None, tmp_path: Path) -> dict:
    """The environment of a user whose data dir is in tmp_path, with KCTL_STORE=store (or none)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KCTL_STORE", "KCTL_SERVER")}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    if store is not None:
        env["KCTL_STORE"] = str(store)
    return env


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("args", [
    ["get", "pods"], ["get", "configmaps", "-A"], ["delete", "configmap", "c"], ["apply", "-f", "-"],
    ["create", "-f", "-"], ["backup", "x.db"], ["encryption", "rotate-key"], ["daemon", "--no-agents"],
], ids=["get", "get-all", "delete", "apply", "create", "backup", "rotate-key", "daemon"])
def test_named_store_in_missing_folder_is_an_error(tmp_path, args):
    """KCTL_STORE in a folder that does not exist: every command says `no store at PATH`, creates nothing."""
    store = tmp_path / "typo" / "kctl.db"
    done = kctl(*args, env=env_for(store, tmp_path), input=CM)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [done.stderr.strip()] and f"no store at {store}" in done.stderr
    assert not store.parent.exists()


@pytest.mark.parametrize("args", [["get", "pods"], ["describe", "configmap", "c"], ["delete", "configmap", "c"],
                                  ["vacuum"], ["backup", "x.db"]],
                         ids=["get", "describe", "delete", "vacuum", "backup"])
def test_reading_a_missing_store_file_is_an_error(tmp_path, args):
    """The folder exists but the file does not: commands that only read or change say `no store at PATH`."""
    (tmp_path / "state").mkdir()
    store = tmp_path / "state" / "kctl.db"
    done = kctl(*args, env=env_for(store, tmp_path))
    assert done.returncode == 1 and f"no store at {store}" in done.stderr and "No resources" not in done.stdout
    assert not store.exists()


def test_writing_commands_create_a_named_store(tmp_path):
    """apply (and create) make the named store when its folder exists; reads then work."""
    (tmp_path / "state").mkdir()
    store = tmp_path / "state" / "kctl.db"
    env = env_for(store, tmp_path)
    assert kctl("apply", "-f", "-", env=env, input=CM).returncode == 0
    assert kctl("get", "cm", "c", "-o", "name", env=env).stdout == "configmap/c\n"
    assert mode(store) == 0o600 and mode(store.parent) == 0o700


def test_init_creates_folder_store_and_key(tmp_path):
    """`kctl --store PATH init` makes the folder (0700), the store and its key file (0600); again is harmless."""
    store = tmp_path / "new" / "kctl.db"
    env = env_for(None, tmp_path)
    done = kctl("--store", str(store), "init", env=env)
    assert done.returncode == 0 and "created" in done.stdout
    assert mode(store.parent) == 0o700 and mode(store) == 0o600
    assert mode(store.with_name("kctl.db.keys")) == 0o600
    again = kctl("--store", str(store), "init", env=env)
    assert again.returncode == 0 and "exists" in again.stdout
    assert kctl("--store", str(store), "get", "pods", env=env).returncode == 0


def test_default_store_is_created_on_first_use(tmp_path):
    """Without --store/KCTL_STORE a new user's `kctl get pods` works and makes $XDG_DATA_HOME/kctl/kctl.db."""
    done = kctl("get", "pods", env=env_for(None, tmp_path))
    assert done.returncode == 0 and "No resources found" in done.stderr + done.stdout
    assert (tmp_path / "data" / "kctl" / "kctl.db").exists()
    assert mode(tmp_path / "data" / "kctl") == 0o700


def test_loose_modes_are_tightened(tmp_path):
    """A store folder of ours with mode 0755 and files with 0644 are made 0700 / 0600 on the next command."""
    folder = tmp_path / "state"
    store = folder / "kctl.db"
    env = env_for(store, tmp_path)
    assert kctl("init", env=env).returncode == 0
    os.chmod(folder, 0o755)
    for name in ("kctl.db", "kctl.db.keys"):
        os.chmod(folder / name, 0o644)
    assert kctl("apply", "-f", "-", env=env,
                input="apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: v}\n").returncode == 0
    assert mode(folder) == 0o700
    for name in os.listdir(folder):  # files 0600 (another part may keep a folder of its own here: 0700)
        assert mode(folder / name) == (0o700 if (folder / name).is_dir() else 0o600), name


def test_shared_folder_is_refused(tmp_path):
    """A store in a folder everyone may write to (sticky, like /tmp) is refused with one line."""
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, 0o1777)
    done = kctl("apply", "-f", "-", env=env_for(folder / "kctl.db", tmp_path), input=CM)
    assert done.returncode != 0 and len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert "folder of its own" in done.stderr
    assert not (folder / "kctl.db").exists()
