"""The shared informer: list, watch, re-list on Gone, indexes, selectors, handler order, factory."""

from __future__ import annotations

import threading

import pytest

from client_harness import wait_for

from kctl.machinery.selectors import parse_label_selector
from kctl.client.informer import Informer, InformerFactory, as_label_selector


def pod(name: str, *, namespace: str = "default", labels: dict | None = None, node: str | None = None,
        owners: list[str] | None = None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "img"}]}
    if node:
        spec["nodeName"] = node
    meta: dict = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owners:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"rs-{u}", "uid": u}
                                   for u in owners]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


class Recorder:
    """Handler that records (event, name) in the order the informer calls it."""

    def __init__(self, informer: Informer, tag: str = "") -> None:
        self.events: list[tuple[str, str]] = []
        self.tag = tag
        informer.add_handler(self.add, self.update, self.delete)

    def add(self, obj: dict) -> None:
        self.events.append((f"{self.tag}add", obj["metadata"]["name"]))

    def update(self, old: dict, new: dict) -> None:
        self.events.append((f"{self.tag}update", new["metadata"]["name"]))

    def delete(self, obj: dict) -> None:
        self.events.append((f"{self.tag}delete", obj["metadata"]["name"]))


@pytest.fixture
def stop():
    event = threading.Event()
    yield event
    event.set()


def started(api, stop, resource: str = "pods", **kwargs) -> Informer:
    informer = Informer(api, resource, **kwargs)
    informer.start(stop)
    assert informer.wait_for_sync(10)
    return informer


def test_initial_list_fills_cache_and_reports_adds(api, stop):
    """Objects that exist before start are cached and reported as adds; revision is the list's."""
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    api.create(pod("a"))
    api.create(pod("b", namespace="other"))
    informer = Informer(api, "pods")
    rec = Recorder(informer)
    assert not informer.has_synced()
    informer.start(stop)
    assert informer.wait_for_sync(10)
    assert sorted(rec.events) == [("add", "a"), ("add", "b")]
    assert informer.get("default", "a")["metadata"]["name"] == "a"
    assert informer.get("default", "missing") is None
    assert informer.revision == api.list(api.resource("pods"))[1]


def test_watch_delivers_add_update_delete_in_order(api, stop):
    """Changes after the list reach handlers in commit order, each after the cache holds it."""
    informer = started(api, stop)
    seen_in_cache: list[bool] = []
    informer.add_handler(on_add=lambda o: seen_in_cache.append(informer.get("default", o["metadata"]["name"])
                                                               is not None))
    rec = Recorder(informer)
    created = api.create(pod("a"))
    created["metadata"]["labels"] = {"x": "1"}
    api.update(created)
    api.delete(api.resource("pods"), "a", namespace="default")
    wait_for(lambda: len(rec.events) == 3, what="three events")
    assert rec.events == [("add", "a"), ("update", "a"), ("delete", "a")]
    assert seen_in_cache == [True]
    assert informer.get("default", "a") is None
    assert informer.revision == api.list(api.resource("pods"))[1]


def test_handlers_called_in_registration_order(api, stop):
    """Several handlers see each event one after the other, in the order they were added."""
    informer = Informer(api, "pods")
    calls: list[tuple[str, str]] = []
    informer.add_handler(on_add=lambda o: calls.append(("first", o["metadata"]["name"])))
    informer.add_handler(on_add=lambda o: calls.append(("second", o["metadata"]["name"])))
    informer.start(stop)
    assert informer.wait_for_sync(10)
    api.create(pod("a"))
    api.create(pod("b"))
    wait_for(lambda: len(calls) == 4, what="four calls")
    assert calls == [("first", "a"), ("second", "a"), ("first", "b"), ("second", "b")]


def test_late_handler_gets_adds_for_cached_objects(api, stop):
    """A handler added after sync is given on_add for everything already cached."""
    api.create(pod("a"))
    informer = started(api, stop)
    rec = Recorder(informer)
    assert rec.events == [("add", "a")]


def test_failing_handler_does_not_stop_others(api, stop):
    """A handler that raises is logged; the next handlers and later events still run."""
    informer = started(api, stop)

    def boom(obj: dict) -> None:
        raise RuntimeError("handler bug")

    informer.add_handler(on_add=boom)
    rec = Recorder(informer)
    api.create(pod("a"))
    api.create(pod("b"))
    wait_for(lambda: len(rec.events) == 2, what="both adds")


def test_relist_on_gone_reports_only_differences(api, store, stop):
    """A compacted change log makes the watch Gone; the re-list is diffed against the cache."""
    api.create(pod("keep"))
    api.create(pod("change"))
    api.create(pod("remove"))
    informer = Informer(api, "pods")
    rec = Recorder(informer)
    # list now, but start watching only after more writes were compacted away
    items, rev = api.list(api.resource("pods"))
    informer._replace(items, rev)
    changed = api.get(api.resource("pods"), "change", namespace="default")
    changed["metadata"]["labels"] = {"v": "2"}
    api.update(changed)
    api.delete(api.resource("pods"), "remove", namespace="default")
    api.create(pod("new"))
    store.compact(keep=0)
    lists_before = informer.lists
    rec.events.clear()
    informer.start(stop)
    wait_for(lambda: informer.lists > lists_before and len(rec.events) == 3, what="the re-list")
    assert sorted(rec.events) == [("add", "new"), ("delete", "remove"), ("update", "change")]
    assert sorted(p["metadata"]["name"] for p in informer.list()) == ["change", "keep", "new"]
    assert informer.get("default", "change")["metadata"]["labels"] == {"v": "2"}


def test_watch_error_relists_after_backoff(api, stop, monkeypatch):
    """Any other watch failure is retried with a fresh list; the cache stays right."""
    failures = {"left": 2}
    real_watch = api.watch

    def flaky_watch(*args, **kwargs):
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("database is locked")
        return real_watch(*args, **kwargs)

    monkeypatch.setattr(api, "watch", flaky_watch)
    informer = Informer(api, "pods", retry_base=0.01)
    informer.start(stop)
    assert informer.wait_for_sync(10)
    api.create(pod("a"))
    wait_for(lambda: informer.get("default", "a") is not None and informer.lists == 3,
             what="the pod, after two failed watches and three lists")
    assert failures["left"] == 0


@pytest.mark.parametrize("index, value, expected", [
    ("namespace", "default", ["a", "b"]),
    ("namespace", "other", ["c"]),
    ("owner", "u1", ["a", "c"]),
    ("owner", "u2", ["a"]),
    ("node", "n1", ["b"]),
    ("node", "n2", []),
], ids=["ns-default", "ns-other", "owner-shared", "owner-second-ref", "node", "node-empty"])
def test_builtin_indexes(api, stop, index, value, expected):
    """namespace, owner (every ownerReference uid) and node (spec.nodeName) indexes."""
    api.create(pod("a", owners=["u1", "u2"]))
    api.create(pod("b", node="n1"))
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    api.create(pod("c", namespace="other", owners=["u1"]))
    informer = started(api, stop)
    assert sorted(o["metadata"]["name"] for o in informer.by_index(index, value)) == expected


def test_indexes_follow_updates_and_deletes(api, stop):
    """Changing or deleting an object moves it out of the index values it no longer has."""
    informer = started(api, stop)
    a = api.create(pod("a", labels={"tier": "web"}))
    informer.add_index("tier", lambda o: [(o["metadata"].get("labels") or {}).get("tier", "")])
    wait_for(lambda: informer.by_index("tier", "web"), what="indexed")
    a["metadata"]["labels"] = {"tier": "db"}
    api.update(a)
    wait_for(lambda: informer.by_index("tier", "db"), what="re-indexed")
    assert informer.by_index("tier", "web") == []
    api.delete(api.resource("pods"), "a", namespace="default")
    wait_for(lambda: not informer.by_index("tier", "db"), what="dropped from index")
    assert informer.index_values("tier") == []
    with pytest.raises(KeyError):
        informer.by_index("nope", "x")


@pytest.mark.parametrize("selector, expected", [
    (None, ["a", "b", "c"]),
    ({"app": "web"}, ["a", "b"]),
    ({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}]},
     ["a"]),
    (parse_label_selector("app!=web"), ["c"]),
    ("app=web,tier notin (x)", ["b"]),
    ({}, ["a", "b", "c"]),
], ids=["none", "label-map", "selector-object", "LabelSelector", "text", "empty-map"])
def test_list_with_selector(api, stop, selector, expected):
    """list() filters by a label map, a metav1.LabelSelector, a LabelSelector or selector text."""
    api.create(pod("a", labels={"app": "web", "tier": "x"}))
    api.create(pod("b", labels={"app": "web"}))
    api.create(pod("c", labels={"app": "db"}))
    informer = started(api, stop)
    assert sorted(o["metadata"]["name"] for o in informer.list(selector=selector)) == expected


def test_list_by_namespace_and_cluster_scoped_get(api, stop):
    """list(namespace) uses the namespace index; cluster-scoped objects are got with "" or None."""
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    api.create(pod("a"))
    api.create(pod("b", namespace="other"))
    pods = started(api, stop)
    assert [o["metadata"]["name"] for o in pods.list("other")] == ["b"]
    assert len(pods.list()) == 2
    namespaces = started(api, stop, "namespaces")
    assert namespaces.get("", "other") is namespaces.get(None, "other") is not None
    assert namespaces.get_by_key("other")["metadata"]["name"] == "other"
    assert pods.get_by_key("other/b")["metadata"]["name"] == "b"


def test_resync_redelivers_updates(api, stop):
    """With resync set, every cached object is given to on_update(obj, obj) again periodically."""
    api.create(pod("a"))
    informer = Informer(api, "pods", resync=0.05)
    same: list[bool] = []
    informer.add_handler(on_update=lambda old, new: same.append(old is new))
    informer.start(stop)
    wait_for(lambda: len(same) >= 2, what="two resyncs")
    assert all(same)


def test_as_label_selector_rejects_other_types():
    """Anything but None, a LabelSelector, text or a mapping is a TypeError."""
    with pytest.raises(TypeError):
        as_label_selector(42)


def test_factory_shares_one_informer_per_resource(api, stop):
    """Every spelling of a resource gives the same informer; informers asked late start at once."""
    factory = InformerFactory(api)
    deployments = factory.informer("deployments")
    assert factory.informer("deployments.apps") is deployments
    assert factory.informer(api.resource("deploy")) is deployments
    factory.start(stop)
    assert factory.wait_for_sync(10)
    late = factory.informer("pods")
    assert late.wait_for_sync(10) and factory.has_synced()
    assert len(factory.informers()) == 2
