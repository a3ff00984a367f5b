"""The API server's watch-fed caches on a real etcd store (kctl.apiserver.configcache): a few requests read through
and start none, a kind read often gets one (this server's own writes seen across the switch), another APIServer's
CRDs and hooks are seen within a second, this one's own at once, an Event create costs two etcd requests (a batch
two per transaction), bind_all reads its pods in one, and SQLite keeps reading the store."""

from __future__ import annotations

import stat
import sys
import textwrap
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import pytest

from kctl.apiserver.configcache import CACHED_KINDS, CRD_KIND, READ_THROUGH
from kctl.apiserver.contract import Binding
from kctl.apiserver.server import APIServer
from kctl.machinery.errors import BadRequest, Forbidden

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]},
}
GADGET = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"size": 1}}
#: how long another process's write may take to reach this one's cache (etcd pushes it in milliseconds)
SEEN_WITHIN = 1.0


def warm(api: APIServer) -> APIServer:
    """api with every cache started (each cached kind read past the reads that go to the store)."""
    for kind in CACHED_KINDS:
        for _ in range(READ_THROUGH + 1):
            api._config.list(kind)
    assert set(api._config._caches) == CACHED_KINDS
    return api


def cache_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("kctl-cache-")]


@contextmanager
def counted_requests() -> Iterator[list[str]]:
    """Every requests.Session.request made in the block (the etcd gateway's API paths), in order."""
    import requests

    made: list[str] = []
    original = requests.Session.request

    def request(session, method, url, *args, **kwargs):
        if not threading.current_thread().name.startswith(("kctl-cache-", "kctl-etcd-watch")):  # not the caches'
            made.append(url.rsplit("/v3", 1)[-1])
        return original(session, method, url, *args, **kwargs)

    requests.Session.request = request
    try:
        yield made
    finally:
        requests.Session.request = original


def eventually(check: Callable[[], object], *, within: float) -> float:
    """Seconds from now to the start of the first call of check() that returns without raising (so a slow
    successful call, e.g. one that runs a hook, does not count); re-raises its error once `within` has passed."""
    start = time.monotonic()
    while True:
        began = time.monotonic()
        try:
            check()
            return began - start
        except Exception:
            if time.monotonic() - start > within:
                raise
            time.sleep(0.01)


def deny_hook(tmp_path, name: str = "deny") -> dict:
    """A ValidatingAdmissionHook refusing every ConfigMap create labelled deny=yes."""
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, sys
        review = json.load(sys.stdin)
        json.dump({{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "response": {{"uid": review["request"]["uid"], "allowed": False,
                                "status": {{"message": "denied by {name}"}}}}}}, sys.stdout)
        """))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {"apiVersion": "kctl.io/v1alpha1", "kind": "ValidatingAdmissionHook", "metadata": {"name": name},
            "spec": {"command": [str(script)], "objectSelector": {"matchLabels": {"deny": "yes"}},
                     "rules": [{"operations": ["CREATE"], "apiGroups": [""], "resources": ["configmaps"]}]}}


def config_map(name: str, *, deny: bool = False) -> dict:
    labels = {"deny": "yes"} if deny else {}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {}}


def event(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": name, "namespace": "default"}, "reason": "Scheduled",
            "message": "assigned", "type": "Normal"}


def test_a_few_requests_read_the_store_and_start_no_cache(etcd_apis, tmp_path):
    """A one-shot command's requests (a create, a get, a list, another create) open no watch: no cache, no thread;
    a hook and a CRD this server writes apply to its very next requests (read from the store)."""
    api = etcd_apis()
    api.create(deny_hook(tmp_path))
    with pytest.raises(Forbidden, match="denied by deny"):
        api.create(config_map("x", deny=True))
    api.create(CRD)
    assert api.create(GADGET)["spec"]["size"] == 1
    assert api.get(api.resource("gadgets"), "g", namespace="default")["spec"]["size"] == 1
    assert [o["metadata"]["name"] for o in api.list(api.resource("gadgets"), namespace="default")[0]] == ["g"]
    assert api._config._caches == {} and not cache_threads()
    assert api._config._reads[CRD_KIND] < READ_THROUGH  # (the kind read most: every lookup of a resource)


def test_a_kind_read_often_gets_its_cache_and_own_writes_are_seen_across_the_switch(etcd_apis, tmp_path):
    """Creates past READ_THROUGH start the caches of the kinds each create reads; a hook written before and one
    deleted after the switch both apply to the next create."""
    api = etcd_apis()
    api.create(deny_hook(tmp_path))
    for i in range(READ_THROUGH + 2):
        with pytest.raises(Forbidden, match="denied by deny"):
            api.create(config_map(f"x{i}", deny=True))
    assert {"Namespace", "ValidatingAdmissionHook.kctl.io", CRD_KIND} <= set(api._config._caches)
    assert cache_threads()
    api.delete(api.resource("validatingadmissionhooks"), "deny")
    assert api.create(config_map("after", deny=True))["metadata"]["name"] == "after"


def test_a_crd_of_another_api_server_is_usable_within_a_second(etcd_apis):
    """A CRD created by another APIServer on the same prefix: this one creates its objects within a second."""
    here, there = warm(etcd_apis()), etcd_apis()
    with pytest.raises(BadRequest):
        here.create(GADGET)
    there.create(CRD)
    waited = eventually(lambda: here.create(GADGET), within=10)
    assert waited < SEEN_WITHIN
    assert here.resource("gadgets").kind == "Gadget"


def test_a_hook_of_another_api_server_applies_within_a_second(etcd_apis, tmp_path):
    """A hook created by another APIServer refuses this one's next matching create within a second."""
    here, there = warm(etcd_apis()), etcd_apis()
    here.create(config_map("before", deny=True))  # no hook yet
    there.create(deny_hook(tmp_path))
    attempts = iter(range(1000))

    def refused() -> None:
        name = f"try{next(attempts)}"
        try:
            here.create(config_map(name, deny=True))
        except Forbidden:
            return
        raise AssertionError(f"{name} was created: the hook is not seen yet")

    assert eventually(refused, within=10) < SEEN_WITHIN


def test_read_your_writes_for_hooks_and_crds_in_one_api_server(etcd_apis, tmp_path):
    """This APIServer's own hook and CRD apply to its very next create, its CRD delete to the next lookup."""
    api = warm(etcd_apis())  # the caches are running before the writes below
    api.create(config_map("warm", deny=True))
    api.create(deny_hook(tmp_path))
    with pytest.raises(Forbidden, match="denied by deny"):
        api.create(config_map("x", deny=True))
    api.create(CRD)
    assert api.create(GADGET)["spec"]["size"] == 1
    api.delete(api.resource("crd"), "gadgets.example.com")
    with pytest.raises(BadRequest):
        api.resource("gadgets")


def test_an_event_create_costs_two_etcd_requests(etcd_apis):
    """Once the caches run, creating an Event reads its key and namespace in one request, then commits."""
    api = warm(etcd_apis())
    api.create(event("warm"))
    with counted_requests() as made:
        api.create(event("e1"))
    assert made == ["/kv/txn", "/kv/txn"], made


def test_a_batch_of_two_transactions_costs_four_etcd_requests(etcd_apis):
    """limit + 8 Events: each of the two transactions reads its keys in one request, then commits."""
    api = warm(etcd_apis())
    api.create(event("warm"))
    n = api.store.max_writes_per_transaction + 8
    with counted_requests() as made:
        results = api.write_all([("create", event(f"e{i}")) for i in range(n)])
    assert [r.error for r in results] == [None] * n
    assert made == ["/kv/txn"] * 4, made


def test_bind_all_reads_its_pods_in_one_request(etcd_apis):
    """Once the caches run, ten bindings: one request reads every pod, one commits (no request per pod)."""
    api = warm(etcd_apis())
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    api.write_all([("create", {**pod, "metadata": {**pod["metadata"], "name": f"p{i}"}}) for i in range(10)])
    with counted_requests() as made:
        results = api.bind_all([Binding("default", f"p{i}", "n1") for i in range(10)])
    assert [r.error for r in results] == [None] * 10
    assert len(made) <= 2, made


def test_close_stops_the_cache_threads(etcd_apis):
    """APIServer.close() ends every thread its caches started."""
    api = warm(etcd_apis())
    assert cache_threads()
    api.close()
    assert not cache_threads()


def test_sqlite_reads_the_store_and_starts_no_cache(tmp_path):
    """On SQLite (local reads) the API server keeps reading the store: no cache, no thread."""
    from kctl.store.sqlite import Store

    api = APIServer(Store(tmp_path / "kctl.db"), user="tester", audit_log=None)
    try:
        api.create(config_map("c"))
        assert api.store.reads_are_remote is False
        assert api._config is None
        assert not [t.name for t in threading.enumerate() if t.name.startswith("kctl-cache-")]
    finally:
        api.close()
