"""The shared informer's server-side filters (label and field selectors), its delivery observers,
and that it follows exactly one kind (a custom kind also called Pod is not a Pod)."""

from __future__ import annotations

import threading

import pytest

from client_harness import wait_for

from kctl.client.informer import Delivery, Informer, InformerFactory, as_field_selector
from kctl.machinery.errors import BadRequest
from kctl.machinery.selectors import parse_field_selector, parse_label_selector

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "pods.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "pods", "singular": "pod", "kind": "Pod"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def pod(name: str, *, node: str | None = None, labels: dict | None = None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "img"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default",
                                                          "labels": labels or {}}, "spec": spec}


class Recorder:
    """Handlers that note (event, name) in the order the informer calls them."""

    def __init__(self, informer: Informer) -> None:
        self.events: list[tuple[str, str]] = []
        informer.add_handler(lambda o: self.events.append(("add", o["metadata"]["name"])),
                             lambda old, new: self.events.append(("update", new["metadata"]["name"])),
                             lambda o: self.events.append(("delete", o["metadata"]["name"])))


@pytest.fixture
def stop():
    """A stop event, set afterwards so every informer thread ends."""
    event = threading.Event()
    yield event
    event.set()


def started(informer: Informer, stop: threading.Event) -> Informer:
    informer.start(stop)
    assert informer.wait_for_sync(30)
    return informer


def names(informer: Informer) -> list[str]:
    return sorted(o["metadata"]["name"] for o in informer.list())


def bind(api, name: str, node: str) -> None:
    current = api.get(api.resource("pods"), name, namespace="default")
    current["spec"]["nodeName"] = node
    api.update(current)


def relabel(api, name: str, labels: dict) -> None:
    current = api.get(api.resource("pods"), name, namespace="default")
    current["metadata"]["labels"] = labels
    api.update(current)


@pytest.mark.parametrize("selectors, sentinel, expected", [
    ({"field_selector": "spec.nodeName=h1"}, {"node": "h1"}, ["on-h1", "on-h1-web"]),
    ({"field_selector": parse_field_selector("spec.nodeName=h1", kind="Pod")}, {"node": "h1"},
     ["on-h1", "on-h1-web"]),
    ({"field_selector": "spec.nodeName="}, {}, ["nowhere"]),
    ({"label_selector": "app=web"}, {"labels": {"app": "web"}}, ["on-h1-web", "on-h2-web"]),
    ({"label_selector": {"app": "web"}}, {"labels": {"app": "web"}}, ["on-h1-web", "on-h2-web"]),
    ({"label_selector": parse_label_selector("app=web"), "field_selector": "spec.nodeName!=h1"},
     {"node": "h2", "labels": {"app": "web"}}, ["on-h2-web"]),
    ({"label_selector": "", "field_selector": ""}, {}, ["nowhere", "on-h1", "on-h1-web", "on-h2-web"]),
], ids=["field-text", "field-parsed", "field-empty-value", "label-text", "label-map", "both", "empty-selectors"])
def test_only_selected_objects_arrive(api, stop, selectors, sentinel, expected):
    """The first list and later watch events hold only what the selectors select."""
    api.create(pod("on-h1", node="h1"))
    api.create(pod("on-h1-web", node="h1", labels={"app": "web"}))
    informer = Informer(api, "pods", **selectors)
    rec = Recorder(informer)
    started(informer, stop)
    api.create(pod("on-h2-web", node="h2", labels={"app": "web"}))
    api.create(pod("nowhere"))
    api.create(pod("zz-last", **sentinel))  # selected: once it arrived, every earlier change was seen
    wait_for(lambda: informer.get("default", "zz-last") is not None, what="the sentinel pod")
    assert names(informer) == expected + ["zz-last"]
    assert sorted(n for kind, n in rec.events if kind == "add") == expected + ["zz-last"]
    assert all(kind == "add" for kind, _ in rec.events)


def test_object_that_stops_matching_is_deleted_for_that_informer(api, stop):
    """Binding a pod elsewhere is a DELETE for the h1 informer, an update for the unfiltered one;
    binding it (back) to h1 is an ADD for the h1 informer."""
    api.create(pod("p", node="h1"))
    on_h1 = Informer(api, "pods", field_selector="spec.nodeName=h1")
    every = Informer(api, "pods")
    rec_h1, rec_all = Recorder(on_h1), Recorder(every)
    started(on_h1, stop)
    started(every, stop)
    rec_h1.events.clear()
    rec_all.events.clear()
    relabel(api, "p", {"v": "1"})  # still on h1: an update
    wait_for(lambda: rec_h1.events == [("update", "p")], what="the update on h1")
    bind(api, "p", "h2")
    wait_for(lambda: rec_h1.events[-1:] == [("delete", "p")], what="the delete on h1")
    assert on_h1.get("default", "p") is None and names(on_h1) == []
    assert on_h1.by_index("node", "h1") == []
    bind(api, "p", "h1")
    wait_for(lambda: rec_h1.events[-1:] == [("add", "p")], what="the add on h1")
    assert rec_h1.events == [("update", "p"), ("delete", "p"), ("add", "p")]
    wait_for(lambda: len(rec_all.events) == 3, what="three updates on the unfiltered informer")
    assert rec_all.events == [("update", "p")] * 3


def test_label_selected_informer_sees_relabels_as_delete_and_add(api, stop):
    """Losing the selected label is a DELETE, regaining it an ADD; deleting an unselected pod says nothing."""
    api.create(pod("web", labels={"app": "web"}))
    api.create(pod("db", labels={"app": "db"}))
    informer = Informer(api, "pods", label_selector="app=web")
    rec = Recorder(informer)
    started(informer, stop)
    relabel(api, "web", {"app": "other"})
    relabel(api, "web", {"app": "web"})
    api.delete(api.resource("pods"), "db", namespace="default", grace_period=0)
    api.delete(api.resource("pods"), "web", namespace="default", grace_period=0)
    wait_for(lambda: len(rec.events) == 4, what="four events")
    assert rec.events == [("add", "web"), ("delete", "web"), ("add", "web"), ("delete", "web")]


def test_relist_after_gone_drops_what_stopped_matching(api, store, stop):
    """On Gone the filtered re-list is diffed against the cache: a pod bound elsewhere meanwhile is deleted."""
    api.create(pod("stays", node="h1"))
    api.create(pod("moves", node="h1"))
    informer = Informer(api, "pods", field_selector="spec.nodeName=h1")
    rec = Recorder(informer)
    items, rev = api.list(api.resource("pods"), field_selector=informer.field_selector)
    informer._replace(items, rev)  # listed, but watching only after the log was compacted away
    bind(api, "moves", "h2")
    api.create(pod("arrives", node="h1"))
    store.compact(keep=0)
    rec.events.clear()
    informer.start(stop)
    wait_for(lambda: informer.lists >= 1 and len(rec.events) == 2, what="the re-list")
    assert sorted(rec.events) == [("add", "arrives"), ("delete", "moves")]
    assert names(informer) == ["arrives", "stays"]


@pytest.mark.parametrize("text, message", [
    ("spec.nodeName", "can't understand"),
    ("spec.hostname=x", "field label not supported: spec.hostname"),
], ids=["no-operator", "unsupported-field"])
def test_bad_field_selector_is_one_clear_error(api, text, message):
    """A field selector the kind does not support is a BadRequest naming it, raised when asked for."""
    with pytest.raises(BadRequest, match=message):
        InformerFactory(api).informer("pods", field_selector=text)
    with pytest.raises(TypeError):
        as_field_selector(42)


def test_factory_shares_one_informer_per_resource_and_selectors(api, stop):
    """Same resource and selectors (text or parsed): one informer; other selectors or none: another."""
    factory = InformerFactory(api)
    on_h1 = factory.informer("pods", field_selector="spec.nodeName=h1")
    assert factory.informer("po", field_selector=parse_field_selector("spec.nodeName==h1", kind="Pod")) is on_h1
    every = factory.informer("pods")
    assert every is not on_h1 and factory.informer("pods", field_selector="") is every
    assert factory.informer("pods", label_selector="app=web", field_selector="spec.nodeName=h1") is not on_h1
    assert factory.informer("pods", label_selector="app=web") is factory.informer("pods", label_selector={"app": "web"})
    assert len(factory.informers()) == 4
    api.create(pod("a", node="h1"))
    api.create(pod("b", node="h2"))
    factory.start(stop)
    assert factory.wait_for_sync(30)
    assert names(on_h1) == ["a"] and names(every) == ["a", "b"]


def test_observers_get_each_delivery_with_its_times(api, stop):
    """observe(fn) is given a Delivery per event after its handlers ran; a failing observer is skipped."""
    api.create(pod("listed"))
    informer = Informer(api, "pods")
    deliveries: list[Delivery] = []
    handled: list[str] = []
    informer.add_handler(on_add=lambda o: handled.append(o["metadata"]["name"]),
                         on_update=lambda old, new: handled.append(new["metadata"]["name"]))

    def broken(delivery: Delivery) -> None:
        raise RuntimeError("observer bug")

    informer.observe(broken)
    informer.observe(lambda d: deliveries.append((d, list(handled))))
    started(informer, stop)
    created = api.create(pod("watched"))
    relabel(api, "watched", {"v": "2"})
    wait_for(lambda: len(deliveries) == 3, what="three deliveries")
    assert [(d.type, d.namespace, d.name) for d, _ in deliveries] == [
        ("ADDED", "default", "listed"), ("ADDED", "default", "watched"), ("MODIFIED", "default", "watched")]
    assert deliveries[1][0].revision == int(created["metadata"]["resourceVersion"])
    for d, seen in deliveries:
        assert d.received <= d.dispatched <= d.done
        assert seen[-1] == d.name  # the handlers had run
    assert informer.delivered == 3


def test_a_custom_kind_named_pod_is_not_a_pod(api, stop):
    """Pod.example.com objects do not reach the pods informer (the kind is matched with its group)."""
    informer = Informer(api, "pods")
    rec = Recorder(informer)
    started(informer, stop)
    api.create(CRD)
    api.create({"apiVersion": "example.com/v1", "kind": "Pod",
                "metadata": {"name": "impostor", "namespace": "default"}})
    api.create(pod("real"))
    wait_for(lambda: ("add", "real") in rec.events, what="the real pod")
    assert rec.events == [("add", "real")]
