"""Fixtures of the etcd store's own tests: stores on the session's etcd (tests/conftest.py), each a fresh prefix."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from kctl.store.etcd.address import parse_address
from kctl.store.etcd.store import EtcdStore


@pytest.fixture
def make_etcd_store(etcd_cluster: Any, tmp_path: Path) -> Iterator[Callable[..., EtcdStore]]:
    """A factory of new EtcdStores on the session's etcd (closed after the test); options go to EtcdStore."""
    made: list[EtcdStore] = []

    def make(*, prefix: str | None = None, state: Path | None = None, **options: Any) -> EtcdStore:
        address = parse_address(f"{etcd_cluster.address}{prefix or '/t-' + secrets.token_hex(6)}")
        options.setdefault("tls", etcd_cluster.tls)
        store = EtcdStore(address, state_path=state or tmp_path / f"s{len(made)}" / "kctl", **options)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture
def etcd_store(make_etcd_store: Callable[..., EtcdStore]) -> EtcdStore:
    """A new EtcdStore (it holds the `default` Namespace)."""
    return make_etcd_store()
