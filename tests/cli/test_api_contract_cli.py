"""The store's administration through the API contract: with --server each command is refused in one line."""

from __future__ import annotations

import pytest

SERVER = "ssh://root@127.0.0.1:1/srv/kctl.db"  # never contacted: the refusal comes first


@pytest.mark.parametrize("args", [
    ["vacuum"],
    ["encryption", "rotate-key"],
    ["backup", "copy.db"],
    ["restore", "backup.db"],
])
def test_store_administration_is_refused_with_server(kctl, args, tmp_path, monkeypatch):
    """vacuum, rotate-key, backup and restore with --server: one error line, exit 1, no traceback."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "backup.db").write_bytes(b"a backup")
    result = kctl("--server", SERVER, *args)
    assert result.code == 1
    assert result.err.strip().splitlines() == [
        "error: not supported with --server: run this command on the control host"]
    assert not (tmp_path / "copy.db").exists() and (tmp_path / "backup.db").read_bytes() == b"a backup"
