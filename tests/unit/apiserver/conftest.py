"""Fixtures of the API server's tests: API servers on a real etcd store (the session's `etcd_cluster`)."""

from __future__ import annotations

import secrets
from typing import Callable, Iterator

import pytest

from kctl.apiserver.server import APIServer


@pytest.fixture
def etcd_apis(etcd_cluster, tmp_path) -> Iterator[Callable[[], APIServer]]:
    """A factory of API servers, each on its own handle of one fresh etcd store (closed after the test)."""
    from kctl.store.etcd.address import parse_address
    from kctl.store.etcd.store import EtcdStore

    address = parse_address(f"{etcd_cluster.address}/t-{secrets.token_hex(6)}")
    opened: list[APIServer] = []

    def make() -> APIServer:
        store = EtcdStore(address, state_path=tmp_path / "state" / "kctl", tls=etcd_cluster.tls)
        opened.append(APIServer(store, user="tester", audit_log=None))
        return opened[-1]

    yield make
    for api in opened:
        api.close()
