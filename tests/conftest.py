"""Fixtures shared by every test: a fresh store in a temporary folder, the API over it, real etcd clusters."""

from __future__ import annotations

import os

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


def _etcd_cluster(tmp_path_factory, members: int):
    """A started EtcdCluster of `members` (TLS) in a fresh folder; fails (not skips) without /usr/bin/etcd."""
    from kctl.testing.etcdcluster import ETCD, EtcdCluster, EtcdClusterError

    if not os.path.exists(ETCD):
        pytest.fail(f"{ETCD} is missing: `make system` installs etcd-server (tools/install-system-deps.sh)")
    cluster = EtcdCluster(tmp_path_factory.mktemp(f"etcd{members}-"), members=members, die_with_parent=True)
    try:
        cluster.start()
    except EtcdClusterError as error:
        pytest.fail(f"etcd cluster did not start: {error}")
    return cluster


@pytest.fixture(scope="session")
def etcd_cluster(tmp_path_factory):
    """One single-member TLS etcd for the test session (each xdist worker its own); stores use fresh prefixes."""
    cluster = _etcd_cluster(tmp_path_factory, 1)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def etcd_cluster3(tmp_path_factory):
    """A three-member TLS etcd cluster for one test module (fault tests kill and restart its members)."""
    cluster = _etcd_cluster(tmp_path_factory, 3)
    yield cluster
    cluster.stop()


@pytest.fixture
def store_path(tmp_path, monkeypatch):
    """A store path for CLI tests, exported as KCTL_STORE; the store exists (as after `kctl init`)."""
    path = tmp_path / "cli" / "kctl.db"
    Store(path).close()
    monkeypatch.setenv("KCTL_STORE", str(path))
    return path
