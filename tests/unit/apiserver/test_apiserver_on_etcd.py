"""The API server on a real etcd store (the session's `etcd_cluster`, a fresh key prefix per test): batches
larger than one etcd transaction (32 writes) split or refused, bind_all in parts, and concurrent writers of
two handles whose transactions conflict re-run (no address given twice, no update lost)."""

from __future__ import annotations

import threading

import pytest

from kctl.apiserver.contract import Binding
from kctl.apiserver.server import APIServer
from kctl.machinery.errors import BadRequest


def config_map(name: str, value: str = "v") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": value}}


def test_a_batch_larger_than_one_etcd_transaction(etcd_apis):
    """limit + 2 objects: refused whole, nothing written, with --atomic; written in two transactions without."""
    api = etcd_apis()
    limit = api.store.max_writes_per_transaction
    assert limit is not None
    n = limit + 2
    with pytest.raises(BadRequest) as caught:
        api.write_all([("apply", config_map(f"a{i}")) for i in range(n)], atomic=True)
    assert f"an atomic write of {n} objects is more than one transaction of the store {api.store.where} " \
           f"holds ({limit} writes)" in caught.value.message
    assert api.store.list("ConfigMap")[0] == []
    results = api.write_all([("apply", config_map(f"c{i}")) for i in range(n)])
    assert [(r.action, r.error) for r in results] == [("created", None)] * n
    assert len(api.store.list("ConfigMap")[0]) == n
    revisions = {r.obj["metadata"]["resourceVersion"] for r in results}
    assert len(revisions) == 2  # etcd: one revision per transaction (limit objects, then 2)


def test_bind_all_larger_than_one_etcd_transaction(etcd_apis):
    """40 bindings in one call: every pod bound."""
    api = etcd_apis()
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
             "spec": {"containers": [{"name": "c", "image": "busybox"}]}} for i in range(40)]
    assert all(r.error is None for r in api.write_all([("create", p) for p in pods]))
    results = api.bind_all([Binding("default", f"p{i}", "node-1") for i in range(40)])
    assert [(r.action, r.error) for r in results] == [("bound", None)] * 40
    assert {p["spec"].get("nodeName") for p in api.store.list("Pod")[0]} == {"node-1"}


def test_concurrent_writers_on_two_handles_conflict_and_run_again(etcd_apis):
    """Two handles creating Services and updating one ConfigMap at once: every address once, no update lost."""
    first, second = etcd_apis(), etcd_apis()
    first.create(config_map("counter", "0"))
    errors: list[BaseException] = []

    def work(api: APIServer, who: str) -> None:
        try:
            for i in range(6):
                api.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"{who}{i}"},
                            "spec": {"selector": {"app": who}, "ports": [{"port": 80}]}})
                while True:  # read-modify-write with the resourceVersion as precondition, as a controller does
                    current = api.get(api.resource("configmaps"), "counter", namespace="default")
                    current["data"]["k"] = str(int(current["data"]["k"]) + 1)
                    try:
                        api.update(current)
                        break
                    except Exception as exc:  # noqa: BLE001 - a Conflict: read again
                        if type(exc).__name__ != "Conflict":
                            raise
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(api, who)) for api, who in ((first, "a"), (second, "b"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads)
    services = first.store.list("Service")[0]
    ips = [s["spec"]["clusterIP"] for s in services if s["metadata"]["name"] != "kubernetes"]
    assert len(ips) == 12 and len(set(ips)) == 12
    addresses = {a["metadata"]["name"] for a in first.store.list("IPAddress.networking.k8s.io")[0]}
    assert set(ips) <= addresses
    assert first.get(first.resource("configmaps"), "counter", namespace="default")["data"]["k"] == "12"
