"""kctl.store.open: an address chooses the backend (SQLite path or etcd://), the etcd state path, SQLite's rules."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from kctl.machinery.errors import ClientSideError
from kctl.store import open as opening


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A user whose data dir is tmp_path/data, with no KCTL_STORE or KCTL_ETCD_STATE_DIR set."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("KCTL_STORE", raising=False)
    monkeypatch.delenv("KCTL_ETCD_STATE_DIR", raising=False)
    return tmp_path


@pytest.fixture
def fake_etcd(monkeypatch):
    """kctl.store.etcd.store.EtcdStore replaced by a recorder: open_store's etcd branch without a cluster."""
    made: list[dict] = []

    class EtcdStore:
        def __init__(self, address, *, state_path, tls=None, **options):
            self.path = state_path
            made.append({"address": address, "state_path": state_path, "tls": tls, "options": options})

    module = types.ModuleType("kctl.store.etcd.store")
    module.EtcdStore = EtcdStore
    monkeypatch.setitem(sys.modules, "kctl.store.etcd.store", module)
    return made


@pytest.mark.parametrize("address,expected", [
    ("etcd://127.0.0.1:2379", True), ("ETCD://h:1", True), (" etcd://h:1", True), ("/var/lib/kctl/kctl.db", False),
    ("kctl.db", False), ("", False), (None, False), (Path("etcd:/x"), False),
], ids=["etcd", "upper", "space", "abs-path", "rel-path", "empty", "none", "pathlike"])
def test_is_etcd(address, expected):
    """Only an etcd:// text selects etcd; a path (even a Path) is SQLite."""
    assert opening.is_etcd(address) is expected


@pytest.mark.parametrize("address", ["etcd://", "etcd:///registry", "etcd://host:notaport"],
                         ids=["no-endpoints", "prefix-only", "bad-port"])
def test_a_bad_etcd_address_is_one_line_naming_store(home, address):
    """A bad etcd:// address is a ClientSideError of one line that starts with `--store ADDRESS:`."""
    with pytest.raises(ClientSideError) as caught:
        opening.open_store(address)
    message = caught.value.message
    assert message.startswith(f"--store {address}: ") and "\n" not in message
    assert not message.startswith(f"--store {address}: {address}:")  # the address is named once


def test_no_endpoints_says_how_to_write_one(home):
    """`etcd://` alone says what is missing and what an address looks like."""
    with pytest.raises(ClientSideError) as caught:
        opening.open_store("etcd://")
    assert caught.value.message == "--store etcd://: no etcd member given (e.g. etcd://10.0.0.1:2379)"


def test_state_path_default_is_per_cluster_and_prefix(home):
    """The default state path: $XDG_DATA_HOME/kctl/etcd/<12 hex>/kctl, the same for any endpoint order,
    different for another prefix or cluster."""
    one = opening.etcd_state_path("etcd://a:2379,b:2379/p1")
    assert one.name == "kctl" and one.parent.parent == home / "data" / "kctl" / "etcd"
    assert len(one.parent.name) == 12 and int(one.parent.name, 16) >= 0
    assert opening.etcd_state_path("etcd://b:2379,a:2379/p1") == one
    assert opening.etcd_state_path("etcd://a:2379,b:2379/p2") != one
    assert opening.etcd_state_path("etcd://a:2379/p1") != one


def test_state_dir_flag_and_environment(home, monkeypatch):
    """state_dir (the CLI's --etcd-state-dir) wins over $KCTL_ETCD_STATE_DIR; either gives DIR/kctl."""
    monkeypatch.setenv("KCTL_ETCD_STATE_DIR", str(home / "env"))
    assert opening.etcd_state_path("etcd://a:2379") == home / "env" / "kctl"
    assert opening.etcd_state_path("etcd://a:2379", state_dir=home / "flag") == home / "flag" / "kctl"


@pytest.mark.parametrize("address,expected", [
    (None, "data/kctl/kctl.db"), ("", "data/kctl/kctl.db"), ("s/x.db", "s/x.db"),
], ids=["default", "empty", "named"])
def test_local_path_of_sqlite(home, monkeypatch, address, expected):
    """A SQLite store's local anchor is its file (the default store's when none is named)."""
    monkeypatch.chdir(home)
    assert opening.local_path(address) in (home / expected, Path(expected))


def test_local_path_of_etcd_is_its_state_path(home):
    """An etcd store's local anchor is its state path; $KCTL_STORE=etcd://... selects it for None too."""
    assert opening.local_path("etcd://a:2379/x") == opening.etcd_state_path("etcd://a:2379/x")


def test_environment_etcd_address_is_used_by_library_callers(home, monkeypatch, fake_etcd):
    """open_store(None) with $KCTL_STORE=etcd://... opens etcd, not a SQLite file named `etcd:`."""
    monkeypatch.setenv("KCTL_STORE", "etcd://127.0.0.1:1/lib")
    store = opening.open_store(None)
    assert fake_etcd and store.path == opening.etcd_state_path("etcd://127.0.0.1:1/lib")
    assert opening.local_path(None) == store.path
    assert not list(home.glob("etcd*"))


def test_etcd_store_gets_state_path_tls_and_options(home, fake_etcd):
    """The etcd branch hands EtcdStore the parsed address, its state path, tls and options."""
    from kctl.store.etcd.address import EtcdTLS

    tls = EtcdTLS(ca_file="/ca.crt", cert_file=None, key_file=None)
    opening.open_store("etcd://127.0.0.1:2379/t1", tls=tls, state_dir=home / "st", compaction_interval=30.0)
    [made] = fake_etcd
    assert made["address"].endpoints and made["address"].prefix.endswith("t1")
    assert made["state_path"] == home / "st" / "kctl" and made["tls"] is tls
    assert made["options"] == {"compaction_interval": 30.0}


def test_sqlite_missing_folder_is_an_error(home):
    """An explicit SQLite path in a folder that does not exist: one line naming it; nothing is made."""
    path = home / "typo" / "kctl.db"
    with pytest.raises(ClientSideError, match=f"no store at {path}: folder"):
        opening.open_store(path, creating=True)
    assert not path.parent.exists()


@pytest.mark.parametrize("creating,made", [(False, False), (True, True), (None, True)],
                         ids=["reading", "writing", "library"])
def test_sqlite_missing_file_is_created_only_when_creating(home, creating, made):
    """A missing SQLite file in an existing folder: created when the caller creates (or a library), else an error."""
    path = home / "kctl.db"
    if made:
        store = opening.open_store(str(path), creating=creating)
        store.close()
    else:
        with pytest.raises(ClientSideError, match="no store at"):
            opening.open_store(str(path), creating=creating)
    assert path.exists() is made
