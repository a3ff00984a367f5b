"""Fixtures shared by every test: a fresh store in a temporary folder, and the API over it."""

from __future__ import annotations

import pytest

from kctl.apiserver.server import APIServer
from kctl.store.sqlite import Store


@pytest.fixture
def store(tmp_path):
    """A new SQLite store (WAL, synchronous=FULL) in a temporary folder."""
    s = Store(tmp_path / "state" / "kctl.db")
    yield s
    s.close()


@pytest.fixture
def api(store):
    """The API layer over the fresh store, with warnings collected in api.warnings."""
    warnings: list[str] = []
    server = APIServer(store, user="tester", warn=warnings.append)
    server.warnings = warnings
    return server


@pytest.fixture
def store_path(tmp_path, monkeypatch):
    """A store path for CLI tests, exported as KCTL_STORE; the store exists (as after `kctl init`)."""
    path = tmp_path / "cli" / "kctl.db"
    Store(path).close()
    monkeypatch.setenv("KCTL_STORE", str(path))
    return path
