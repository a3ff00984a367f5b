"""write_all reads what admission needs once per round: the hooks, the plugins' lists, the namespace."""

from __future__ import annotations

import pytest

from kctl.apiserver.objcopy import json_copy

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"},
       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
LIMITS = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults"},
          "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}, "default": {"cpu": "200m"}}]}}


class CountingStore:
    """The real store, with every list and get noted by kind."""

    def __init__(self, store) -> None:
        self._store = store
        self.lists: list[str] = []
        self.gets: list[str] = []

    def __getattr__(self, name: str):
        return getattr(self._store, name)

    def list(self, kind, *args, **kwargs):
        self.lists.append(kind)
        return self._store.list(kind, *args, **kwargs)

    def get(self, kind, *args, **kwargs):
        self.gets.append(kind)
        return self._store.get(kind, *args, **kwargs)


@pytest.fixture
def counting(api):
    spy = CountingStore(api.store)
    api.store = spy
    return spy


def test_a_batch_lists_each_admission_kind_once(api, counting):
    """Ten pod creates in one write_all list each kind the admission chain reads once, and read the namespace once."""
    results = api.write_all([("create", json_copy(POD)) for _ in range(10)])
    assert [r.error for r in results] == [None] * 10
    assert counting.lists and len(counting.lists) == len(set(counting.lists)), counting.lists
    assert counting.gets.count("Namespace") == 1


def test_each_write_still_admitted(api):
    """What was stored before the batch applies to every write of it: a LimitRange's defaults on all ten pods."""
    api.create(LIMITS)
    results = api.write_all([("create", json_copy(POD)) for _ in range(10)])
    requests = [r.obj["spec"]["containers"][0].get("resources", {}).get("requests") for r in results]
    assert requests == [{"cpu": "100m"}] * 10


def test_reads_are_fresh_for_the_next_batch(api, counting):
    """The reads are the round's own: the next write_all lists again (and sees a LimitRange stored in between)."""
    api.write_all([("create", json_copy(POD))])
    first = len(counting.lists)
    api.create(LIMITS)
    [result] = api.write_all([("create", json_copy(POD))])
    assert len(counting.lists) > first + 1
    assert result.obj["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "100m"}


def test_json_copy_copies_deeply():
    """Nested dicts and lists are new objects; leaves are equal; other containers are deep-copied too."""
    obj = {"a": [{"b": 1, "c": [None, True, 1.5, "s"]}], "t": (1, [2]), "s": {"x"}}
    copied = json_copy(obj)
    assert copied == obj
    assert copied["a"] is not obj["a"] and copied["a"][0] is not obj["a"][0]
    assert copied["a"][0]["c"] is not obj["a"][0]["c"]
    assert copied["t"][1] is not obj["t"][1] and copied["s"] is not obj["s"]
    copied["a"][0]["c"].append("more")
    assert obj["a"][0]["c"] == [None, True, 1.5, "s"]
