"""The store's loss as the CLI prints it: one line naming what is lost, a non-zero exit, never a traceback."""

from __future__ import annotations

import pytest

from kctl.store.contract import StoreUnavailable

LOST = "etcd://10.0.0.1:2379: the etcd cluster has lost its quorum (2 of 3 members do not answer)"
CONFIG_MAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: v}\n"


@pytest.fixture
def lost(monkeypatch):
    """Every SQLite store's reads and writes fail as an etcd store's do when its quorum is lost."""
    from kctl.store.sqlite import Store

    def fail(*_args, **_kwargs):
        raise StoreUnavailable(LOST)

    for method in ("get", "list", "list_pages", "transact"):
        monkeypatch.setattr(Store, method, fail)


@pytest.mark.parametrize("args, stdin, line", [
    (["get", "configmaps"], None, f"Error from server (ServiceUnavailable): {LOST}"),
    (["get", "configmap", "c"], None, f"Error from server (ServiceUnavailable): {LOST}"),
    (["delete", "configmap", "c"], None, f"Error from server (ServiceUnavailable): {LOST}"),
    (["apply", "-f", "-"], CONFIG_MAP, f"error: <stdin>: document 1 (line 1): {LOST}"),
    (["create", "namespace", "n"], None, f"error: <command line>: document 1: {LOST}"),
], ids=["list", "get", "delete", "apply", "create"])
def test_store_unavailable_is_one_line(kctl, lost, args, stdin, line):
    """Each everyday command prints the store's message once, as one line, and exits non-zero."""
    result = kctl(*args, input=stdin)
    assert result.code != 0
    assert result.err.strip().splitlines() == [line]
    assert "Traceback" not in result.err + result.out
