"""Store.watch(kind=...) yields and decodes only that kind's changes (an informer watches one kind),
and the API's watch of one resource asks the store for only that kind."""

from __future__ import annotations

import pytest

from kctl.store.sqlite import Store


def put(store: Store, kind: str, name: str) -> None:
    with store.transaction() as txn:
        txn.put(kind, "default", name, {"kind": kind, "metadata": {"name": name}}, event="ADDED")


@pytest.mark.parametrize("kind, expected", [
    (None, [("Pod", "a"), ("Event", "e1"), ("Pod", "b"), ("Event", "e2")]),
    ("Pod", [("Pod", "a"), ("Pod", "b")]),
    ("Event", [("Event", "e1"), ("Event", "e2")]),
    ("Node", []),
], ids=["every-kind", "pods", "events", "none-of-it"])
def test_watch_of_one_kind_decodes_only_that_kind(tmp_path, monkeypatch, kind, expected):
    """Only the watched kind's rows are yielded and decoded; every kind without `kind`."""
    store = Store(tmp_path / "db" / "kctl.db")
    try:
        since = store.list("Pod", None)[1]
        for k, name in [("Pod", "a"), ("Event", "e1"), ("Pod", "b"), ("Event", "e2")]:
            put(store, k, name)
        decoded: list[str] = []
        real_decode = store._decode

        def counting_decode(kind_: str, namespace: str, name: str, data):
            decoded.append(kind_)
            return real_decode(kind_, namespace, name, data)

        monkeypatch.setattr(store, "_decode", counting_decode)
        got = [(c.kind, c.name) for c in store.watch(since, timeout=0, kind=kind)]
        assert got == expected
        assert decoded == [k for k, _ in expected]
    finally:
        store.close()


def test_api_watch_of_one_resource_asks_the_store_for_its_kind(api, monkeypatch):
    """APIServer.watch(rt) passes rt's group_kind down, so other kinds are never decoded for it."""
    asked: list[str | None] = []
    real_watch = api.store.watch

    def recording_watch(since: int, **kwargs):
        asked.append(kwargs.get("kind"))
        return real_watch(since, **kwargs)

    monkeypatch.setattr(api.store, "watch", recording_watch)
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}})
    assert [t for t, _ in api.watch(api.resource("deployments"), since=0, timeout=0)] == []
    assert [o["metadata"]["name"] for _, o in api.watch(api.resource("configmaps"), since=0, timeout=0)] == ["c"]
    list(api.watch(None, since=0, timeout=0))
    assert asked == ["Deployment.apps", "ConfigMap", None]
