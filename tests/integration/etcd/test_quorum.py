"""Quorum on a 3-member etcd: one member lost, writes go on; two lost, a write fails naming the lost quorum and
leaves nothing half-written; both back, writes succeed again (issue 17)."""

from __future__ import annotations

import secrets
import time

import pytest

from kctl.apiserver.server import APIServer
from kctl.store.contract import StoreUnavailable
from kctl.store.etcd.address import parse_address
from kctl.store.etcd.store import EtcdStore

REQUEST_TIMEOUT = 5.0     # how long the store waits for a member: keeps the "quorum lost" write short
RECOVERY_DEADLINE = 60.0  # an election on a loaded 2-core machine may take a few seconds


def configmap(name: str) -> dict:
    """A small ConfigMap in default."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"k": name}}


def names(api: APIServer) -> set[str]:
    """The names of the ConfigMaps in default."""
    items, _ = api.list(api.resource("configmaps"), namespace="default")
    return {item["metadata"]["name"] for item in items}


def create_eventually(api: APIServer, name: str) -> None:
    """Create a ConfigMap, retrying StoreUnavailable (a leader election under way) until the deadline."""
    deadline = time.monotonic() + RECOVERY_DEADLINE
    while True:
        try:
            api.create(configmap(name))
            return
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture
def store(etcd_cluster3, tmp_path):
    """An EtcdStore on the 3-member cluster (a fresh prefix); every member is running again afterwards."""
    address = parse_address(f"{etcd_cluster3.address}/quorum-{secrets.token_hex(4)}")
    store = EtcdStore(address, state_path=tmp_path / "state" / "kctl", tls=etcd_cluster3.tls,
                      request_timeout=REQUEST_TIMEOUT)
    yield store
    for index, member in enumerate(etcd_cluster3.members):
        if member.pid is None:
            etcd_cluster3.restart(index)
    etcd_cluster3.wait_healthy(timeout=RECOVERY_DEADLINE)
    store.close()


def test_one_member_lost_writes_go_on_two_lost_fail_clearly_then_recover(etcd_cluster3, store):
    """2 of 3 up: writes succeed; 1 of 3: StoreUnavailable naming the lost quorum, all or nothing; 3 again: writes."""
    cluster = etcd_cluster3
    api = APIServer(store, user="tester", audit_log=None)
    api.create(configmap("all-up"))

    cluster.kill(0)
    create_eventually(api, "one-lost")          # the survivors elect a leader if m0 led
    api.create(configmap("one-lost-again"))     # and then a write needs no retry

    batch = [f"batch-{i}" for i in range(3)]
    with pytest.raises(StoreUnavailable) as caught:
        with store.transaction() as txn:        # read while 2 of 3 answer, commit after the 2nd is lost
            for name in batch:
                obj = configmap(name)
                obj["metadata"]["uid"] = f"uid-{name}"
                txn.put("ConfigMap", "default", name, obj, event="ADDED")
            cluster.kill(1)
    message = str(caught.value)
    assert "quorum" in message and "unknown" in message, message
    silent = message.split("(", 1)[1].split(")", 1)[0]      # "... do not answer (URL, URL); ..."
    assert cluster.members[0].endpoint in silent and cluster.members[1].endpoint in silent, message
    assert cluster.members[2].endpoint not in silent, message

    cluster.restart(0)
    cluster.restart(1)
    cluster.wait_healthy(timeout=RECOVERY_DEADLINE)
    create_eventually(api, "recovered")

    present = names(api)
    assert {"all-up", "one-lost", "one-lost-again", "recovered"} <= present
    written = set(batch) & present
    assert written in (set(), set(batch)), f"half-written transaction: {sorted(written)}"
