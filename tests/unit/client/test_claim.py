"""ControllerRefManager (kctl.client.claim): adopt matching orphans, release owned objects that stopped matching."""

from __future__ import annotations

import copy

import pytest

from kctl.machinery.errors import Conflict, NotFound
from kctl.machinery.selectors import LabelSelector, from_label_selector_object
from kctl.client.claim import ClaimResult, ControllerRefManager, controller_ref, owner_reference

OWNER_UID = "rs-uid"
OTHER_UID = "other-uid"
RT = object()  # the owner's resource type: the fake API only checks it is passed through


def owner(*, deleting: bool = False, uid: str = OWNER_UID) -> dict:
    """A ReplicaSet selecting app=web."""
    meta = {"name": "web", "namespace": "default", "uid": uid, "resourceVersion": "1"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta,
            "spec": {"selector": {"matchLabels": {"app": "web"}}}}


def pod(name: str, *, app: str = "web", owned_by: str | None = None, extra_refs: tuple = (),
        deleting: bool = False, namespace: str = "default") -> dict:
    """A pod labelled app=<app>, optionally with a controller reference to owned_by."""
    meta: dict = {"name": name, "namespace": namespace, "uid": f"{name}-uid", "resourceVersion": "5",
                  "labels": {"app": app}}
    refs = [dict(r) for r in extra_refs]
    if owned_by is not None:
        refs.append({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x", "uid": owned_by,
                     "controller": True, "blockOwnerDeletion": True})
    if refs:
        meta["ownerReferences"] = refs
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


class FakeAPI:
    """get() returns the fresh owner (or NotFound); update() records what is sent or raises a scripted error by name."""

    def __init__(self, fresh_owner: dict | None, errors: dict[str, Exception] | None = None) -> None:
        self.fresh_owner = fresh_owner
        self.errors = errors or {}
        self.gets = 0
        self.updates: list[dict] = []

    def get(self, rt: object, name: str, *, namespace: str | None = None) -> dict:
        assert rt is RT and name == "web" and namespace == "default"
        self.gets += 1
        if self.fresh_owner is None:
            raise NotFound("replicasets", name, namespace)
        return copy.deepcopy(self.fresh_owner)

    def update(self, obj: dict) -> dict:
        error = self.errors.get(obj["metadata"]["name"])
        if error is not None:
            raise error
        self.updates.append(copy.deepcopy(obj))  # as sent
        written = copy.deepcopy(obj)
        written["metadata"]["resourceVersion"] = "6"
        return written


def run(candidates: list[dict], *, cached: dict | None = None, fresh: dict | None | str = "same",
        errors: dict[str, Exception] | None = None,
        selector: LabelSelector | None = None) -> tuple[ClaimResult, FakeAPI]:
    """Claim candidates for `cached` (default: a live owner) against an API whose fresh copy is `fresh`."""
    cached = cached or owner()
    api = FakeAPI(copy.deepcopy(cached) if fresh == "same" else fresh, errors)
    if selector is None:
        selector = from_label_selector_object(cached["spec"]["selector"])
    manager = ControllerRefManager(api, cached, kind="ReplicaSet", owner_rt=RT, selector=selector)
    return manager.claim(candidates), api


def names(objs: list[dict]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


LABELLER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "notes", "uid": "cm-uid"}


@pytest.mark.parametrize("candidates, kwargs, claimed, adopted, released, complete", [
    ([pod("orphan")], {}, ["orphan"], ["orphan"], [], True),
    ([pod("stranger", app="db")], {}, [], [], [], True),
    ([pod("mine", owned_by=OWNER_UID)], {}, ["mine"], [], [], True),
    ([pod("strayed", app="db", owned_by=OWNER_UID, extra_refs=(LABELLER,))], {}, [], [], ["strayed"], True),
    ([pod("theirs", owned_by=OTHER_UID)], {}, [], [], [], True),
    ([pod("theirs", app="db", owned_by=OTHER_UID)], {}, [], [], [], True),
    ([pod("orphan", deleting=True)], {}, [], [], [], True),
    ([pod("orphan", namespace="other")], {}, [], [], [], True),
    ([pod("orphan")], {"selector": LabelSelector()}, [], [], [], True),
    ([pod("orphan"), pod("mine", owned_by=OWNER_UID), pod("strayed", app="db", owned_by=OWNER_UID)],
     {"cached": owner(deleting=True)}, ["mine"], [], [], True),
    ([pod("orphan"), pod("mine", owned_by=OWNER_UID)], {"fresh": owner(deleting=True)}, ["mine"], [], [], False),
    ([pod("orphan")], {"fresh": None}, [], [], [], False),
    ([pod("orphan")], {"fresh": owner(uid="new-uid")}, [], [], [], False),
    ([pod("orphan"), pod("other")], {"errors": {"orphan": Conflict("modified")}}, ["other"], ["other"], [], False),
    ([pod("orphan")], {"errors": {"orphan": NotFound("pods", "orphan", "default")}}, [], [], [], True),
    ([pod("strayed", app="db", owned_by=OWNER_UID)], {"errors": {"strayed": Conflict("modified")}},
     [], [], [], False),
    ([pod("strayed", app="db", owned_by=OWNER_UID)],
     {"errors": {"strayed": NotFound("pods", "strayed", "default")}}, [], [], [], True),
], ids=["orphan-matching-adopted", "orphan-not-matching-ignored", "owned-matching-claimed",
        "owned-not-matching-released", "owned-by-other-ignored", "owned-by-other-not-matching-ignored",
        "orphan-being-deleted-ignored", "orphan-in-other-namespace-ignored", "empty-selector-adopts-nothing",
        "owner-deleting-keeps-owned-only", "owner-deleting-fresh-refuses", "owner-gone-fresh-refuses",
        "owner-replaced-fresh-refuses", "adopt-conflict-skipped", "adopt-not-found-moot",
        "release-conflict-incomplete", "release-not-found-moot"])
def test_claim(candidates, kwargs, claimed, adopted, released, complete):
    """Each candidate is claimed, adopted, released or ignored as client-go's ClaimObject decides."""
    result, api = run(candidates, **kwargs)
    assert names(result.claimed) == claimed
    assert names(result.adopted) == adopted
    assert names(result.released) == released
    assert result.complete is complete
    assert (result.problem is None) is complete
    assert sorted(names(api.updates)) == sorted(adopted + released)


def test_adopted_object_carries_our_controller_reference():
    """Adoption writes our controller ownerReference (blockOwnerDeletion) and claims the object as written."""
    result, api = run([pod("orphan", extra_refs=(LABELLER,))])
    written = api.updates[0]
    assert controller_ref(written) == owner_reference(owner(), "ReplicaSet")
    assert LABELLER in written["metadata"]["ownerReferences"]
    assert result.claimed[0]["metadata"]["resourceVersion"] == "6"
    assert written["metadata"]["resourceVersion"] == "5"  # the update carries the version the cache saw


def test_released_object_keeps_other_references():
    """Release removes only our reference; the object's other ownerReferences stay (none left: field dropped)."""
    result, api = run([pod("a", app="db", owned_by=OWNER_UID, extra_refs=(LABELLER,)),
                       pod("b", app="db", owned_by=OWNER_UID)])
    by_name = {o["metadata"]["name"]: o for o in api.updates}
    assert by_name["a"]["metadata"]["ownerReferences"] == [LABELLER]
    assert "ownerReferences" not in by_name["b"]["metadata"]
    assert names(result.released) == ["a", "b"]


@pytest.mark.parametrize("fresh, gets", [("same", 1), (None, 1)], ids=["may-adopt", "refused"])
def test_owner_rechecked_once_per_claim(fresh, gets):
    """The owner is read fresh once before the first adoption, not once per orphan, and not without orphans."""
    _, api = run([pod("a"), pod("b"), pod("c")], fresh=fresh)
    assert api.gets == gets
    _, api = run([pod("mine", owned_by=OWNER_UID), pod("strayed", app="db", owned_by=OWNER_UID)])
    assert api.gets == 0


def test_problem_names_the_refusal_and_conflicts():
    """ClaimResult.problem is one line naming why the claim is incomplete."""
    result, _ = run([pod("orphan")], fresh=owner(deleting=True))
    assert result.problem == 'may not adopt: ReplicaSet "web" is being deleted'
    result, _ = run([pod("a"), pod("b")], errors={"a": Conflict("x"), "b": Conflict("y")})
    assert result.problem == 'Pod "a": could not adopt it, it changed (and 1 more)'
