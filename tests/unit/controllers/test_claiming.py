"""The DaemonSet, ReplicaSet and Deployment controllers claim through kctl.client.claim (canAdopt, conflicts)."""

from __future__ import annotations

import pytest

from kctl.machinery.errors import Conflict
from kctl.machinery.selectors import from_label_selector_object
from kctl.client.claim import ClaimIncomplete
from kctl.controllers.daemonset import DaemonSetController
from kctl.controllers.replicaset import ReplicaSetController

SELECTOR = {"matchLabels": {"app": "agent"}}


class APIPods:
    """The part of a pod informer the claim code reads, answered from the API (always fresh)."""

    def __init__(self, api) -> None:
        self.api = api

    def list(self, namespace: str | None = None, *, selector: object = None) -> list[dict]:
        pods, _ = self.api.list(self.api.resource("pods"), namespace=namespace)
        wanted = from_label_selector_object(selector) if isinstance(selector, dict) else selector
        return [p for p in pods if wanted is None or wanted.matches(p["metadata"].get("labels") or {})]

    def by_index(self, index: str, uid: str) -> list[dict]:
        assert index == "owner"
        return [p for p in self.list() if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or ())]


class ConflictingAPI:
    """The API, except that updates of pods named in `conflicts` raise Conflict."""

    def __init__(self, api, conflicts: set[str]) -> None:
        self._api, self.conflicts = api, conflicts

    def __getattr__(self, name: str):
        return getattr(self._api, name)

    def update(self, obj: dict, **kwargs) -> dict:
        if obj["metadata"]["name"] in self.conflicts:
            raise Conflict("the object has been modified")
        return self._api.update(obj, **kwargs)


def workload(api, kind: str, resource: str) -> dict:
    """A DaemonSet or ReplicaSet selecting app=agent, kept by a finalizer so a delete only marks it."""
    return api.create({"apiVersion": "apps/v1", "kind": kind,
                       "metadata": {"name": "agent", "namespace": "default", "finalizers": ["test.kctl/keep"]},
                       "spec": {"selector": SELECTOR,
                                "template": {"metadata": {"labels": {"app": "agent"}},
                                             "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}})


def orphan(api, name: str) -> dict:
    return api.create({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "default", "labels": {"app": "agent"}},
                       "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}})


def controller_for(kind: str, api):
    """A DaemonSet or ReplicaSet controller wired to `api` with an always-fresh pod view."""
    if kind == "DaemonSet":
        c = DaemonSetController()
        c._ds_rt = api.resource("daemonsets")
    else:
        c = ReplicaSetController()
        c._rs_rt = api.resource("replicasets")
    c.api, c.pods, c._pod_rt = api, APIPods(api), api.resource("pods")
    return c


def claim(kind: str, c, owner: dict):
    """Run the controller's claim; (pods, incomplete) whatever way the controller reports it."""
    selector = from_label_selector_object(SELECTOR)
    if kind == "DaemonSet":
        try:
            return c._claim_pods(owner, selector), False
        except ClaimIncomplete:
            return [], True
    return c._claim_pods(owner, selector)


def finish(api, resource: str) -> None:
    """Drop the finalizer so the marked owner goes."""
    rt = api.resource(resource)
    live = api.find(rt, "agent", namespace="default")
    if live is not None:
        live["metadata"]["finalizers"] = []
        api.update(live)


@pytest.mark.parametrize("kind, resource", [("DaemonSet", "daemonsets"), ("ReplicaSet", "replicasets")])
def test_stale_cache_does_not_adopt_for_an_owner_being_deleted(api, kind, resource):
    """The owner is re-read before adopting: one the cache thinks live but is being deleted adopts no orphan."""
    cached = workload(api, kind, resource)
    pod = orphan(api, "hand-made")
    api.delete(api.resource(resource), "agent", namespace="default")
    try:
        pods, incomplete = claim(kind, controller_for(kind, api), cached)
        assert pods == [] and incomplete
        live = api.get(api.resource("pods"), "hand-made", namespace="default")
        assert not live["metadata"].get("ownerReferences")
        assert live["metadata"]["uid"] == pod["metadata"]["uid"]
    finally:
        finish(api, resource)


@pytest.mark.parametrize("kind, resource", [("DaemonSet", "daemonsets"), ("ReplicaSet", "replicasets")])
def test_adoption_conflict_makes_the_claim_incomplete(api, kind, resource):
    """An adoption that conflicts is skipped (the next sync sees the change) and the sync retries."""
    owner = workload(api, kind, resource)
    orphan(api, "contended")
    orphan(api, "free")
    try:
        pods, incomplete = claim(kind, controller_for(kind, ConflictingAPI(api, {"contended"})), owner)
        assert incomplete
        if kind == "ReplicaSet":
            assert [p["metadata"]["name"] for p in pods] == ["free"]
        adopted = api.get(api.resource("pods"), "free", namespace="default")
        assert adopted["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
        assert not api.get(api.resource("pods"), "contended", namespace="default")["metadata"].get("ownerReferences")
    finally:
        finish(api, resource)
