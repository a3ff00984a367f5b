"""BoundPods: the agent's pods by uid, the informer's objects overlaid with the agent's own newer writes."""

from __future__ import annotations

import pytest

from kctl.agent.boundpods import UID_INDEX, BoundPods


class FakeInformer:
    """The few Informer calls BoundPods makes, over a dict the test fills."""

    def __init__(self) -> None:
        self.items: dict[str, dict] = {}  # name -> pod
        self.indexes: dict[str, object] = {}

    def add_index(self, name, fn) -> None:
        self.indexes[name] = fn

    def by_index(self, name, value):
        fn = self.indexes[name]
        return [p for p in self.items.values() if value in fn(p)]

    def index_values(self, name):
        fn = self.indexes[name]
        return sorted({v for p in self.items.values() for v in fn(p)})

    def list(self):
        return list(self.items.values())

    def __len__(self) -> int:
        return len(self.items)


def pod(name: str, uid: str, rv: int, phase: str = "") -> dict:
    out = {"metadata": {"name": name, "uid": uid, "resourceVersion": str(rv)}}
    if phase:
        out["status"] = {"phase": phase}
    return out


@pytest.mark.parametrize("cached, written, expected", [
    (pod("a", "u1", 5, "Pending"), None, "Pending"),
    (pod("a", "u1", 5, "Pending"), pod("a", "u1", 7, "Running"), "Running"),
    (pod("a", "u1", 9, "Failed"), pod("a", "u1", 7, "Running"), "Failed"),
    (None, pod("a", "u1", 7, "Running"), None),
], ids=["informer-only", "own-write-newer", "informer-caught-up", "gone-from-informer"])
def test_get_serves_the_newest_known_version(cached, written, expected):
    """An own write newer than the informer's copy is served, an older one dropped; a pod the informer lost is gone."""
    informer = FakeInformer()
    pods = BoundPods(informer)
    assert UID_INDEX in informer.indexes
    if cached is not None:
        informer.items["a"] = cached
    if written is not None:
        pods.offer(written)
    got = pods.get("u1")
    if expected is None:
        assert got is None
    else:
        assert got["status"]["phase"] == expected
        assert [p["status"]["phase"] for p in pods.values()] == [expected]


def test_get_hands_out_a_copy_and_forget_drops_the_overlay():
    """Changing what get returned changes nothing; forget drops the agent's own version."""
    informer = FakeInformer()
    pods = BoundPods(informer)
    informer.items["a"] = pod("a", "u1", 5, "Pending")
    pods.offer(pod("a", "u1", 7, "Running"))
    pods.get("u1")["status"]["phase"] = "Mangled"
    assert pods.get("u1")["status"]["phase"] == "Running"
    pods.forget("u1")
    assert pods.get("u1")["status"]["phase"] == "Pending"
    assert pods.uids() == ["u1"] and len(pods) == 1
