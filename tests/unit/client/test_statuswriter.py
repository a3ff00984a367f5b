"""The status writer (kctl.client.statuswriter): write status only when it changed, re-read on Conflict, batch."""

from __future__ import annotations

import copy

import pytest

from kctl.client.statuswriter import StatusWriter, status_differs, strip_volatile
from kctl.machinery.errors import Conflict, Invalid

CONDITIONS = [{"type": "Available", "status": "True", "lastUpdateTime": "2024-01-01T00:00:00Z",
               "lastTransitionTime": "2024-01-01T00:00:00Z"}]


def deployment(name: str = "web") -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


def stored(api, name: str = "web") -> dict:
    return api.get(api.resource("deployments"), name, namespace="default")


def bump(api, name: str = "web", **status: object) -> dict:
    """Someone else writes the status (so a copy read before is stale)."""
    live = stored(api, name)
    live["status"] = {**(live.get("status") or {}), **status}
    return api.update_status(live)


class CountingAPI:
    """The real API, counting status writes; its first `conflicts` update_status calls raise Conflict."""

    def __init__(self, api, *, conflicts: int = 0) -> None:
        self.api = api
        self.conflicts = conflicts
        self.update_status_calls = 0
        self.update_status_all_calls = 0

    def __getattr__(self, name: str):
        return getattr(self.api, name)

    def update_status(self, obj: dict, **kwargs) -> dict:
        self.update_status_calls += 1
        if self.conflicts > 0:
            self.conflicts -= 1
            raise Conflict("the object has been modified")
        return self.api.update_status(obj, **kwargs)

    def update_status_all(self, objs: list[dict], **kwargs):
        self.update_status_all_calls += 1
        return self.api.update_status_all(objs, **kwargs)


@pytest.mark.parametrize("status, ignore, expected", [
    ({"replicas": 1, "conditions": CONDITIONS}, ["conditions[].lastUpdateTime"],
     {"replicas": 1, "conditions": [{"type": "Available", "status": "True",
                                     "lastTransitionTime": "2024-01-01T00:00:00Z"}]}),
    ({"replicas": 1, "conditions": CONDITIONS}, ["conditions"], {"replicas": 1}),
    ({"replicas": 1, "conditions": CONDITIONS}, ["conditions[]"], {"replicas": 1}),
    ({"replicas": 1, "lastScheduleTime": "x"}, ["lastScheduleTime"], {"replicas": 1}),
    ({"a": {"b": 1, "c": 2}}, ["a.b"], {"a": {"c": 2}}),
    ({"replicas": 1}, ["conditions[].lastUpdateTime", "a.b.c"], {"replicas": 1}),
    ({"conditions": "not-a-list"}, ["conditions[].x"], {"conditions": "not-a-list"}),
    (None, ["x"], {}),
], ids=["each-condition-field", "whole-field", "whole-list", "top-level", "nested", "absent", "not-a-list", "none"])
def test_strip_volatile(status, ignore, expected):
    """Ignored paths are removed (`[]`: every item of a list); the input is not changed."""
    before = copy.deepcopy(status)
    assert strip_volatile(status, ignore) == expected
    assert status == before


@pytest.mark.parametrize("current, desired, ignore, differs", [
    ({"replicas": 1}, {"replicas": 1}, [], False),
    ({"replicas": 1}, {"replicas": 2}, [], True),
    (None, {}, [], False),
    ({"conditions": CONDITIONS}, {"conditions": [{**CONDITIONS[0], "lastUpdateTime": "later"}]},
     ["conditions[].lastUpdateTime"], False),
    ({"conditions": CONDITIONS}, {"conditions": [{**CONDITIONS[0], "status": "False"}]},
     ["conditions[].lastUpdateTime"], True),
], ids=["same", "changed", "none-is-empty", "only-volatile-changed", "real-change-beside-volatile"])
def test_status_differs(current, desired, ignore, differs):
    """A status differs only by fields that are not ignored."""
    assert status_differs(current, desired, ignore=ignore) is differs


def test_bad_ignore_path_is_refused_at_once(api):
    """An empty field name in an ignore path is a programming error, said when the writer is made."""
    with pytest.raises(ValueError, match="empty field name"):
        StatusWriter(api, ignore=["conditions..x"])


def test_writes_a_changed_status(api):
    """A changed status is written through the status path and the stored object returned."""
    dep = api.create(deployment())
    written = StatusWriter(api).write(dep, {"replicas": 3})
    assert written["status"] == {"replicas": 3} and stored(api)["status"] == {"replicas": 3}
    assert "status" not in dep  # the argument is never mutated


def test_unchanged_status_is_not_written(api):
    """The same status (or one differing only in ignored fields) costs no write."""
    dep = api.create(deployment())
    dep = api.update_status({**dep, "status": {"replicas": 1, "conditions": CONDITIONS}})
    counting = CountingAPI(api)
    writer = StatusWriter(counting, ignore=["conditions[].lastUpdateTime"])
    later = [{**CONDITIONS[0], "lastUpdateTime": "2025-01-01T00:00:00Z"}]
    assert writer.write(dep, {"replicas": 1, "conditions": later}) is dep
    assert writer.write(dep, lambda current: dict(current["status"])) is dep
    assert counting.update_status_calls == 0
    assert stored(api)["metadata"]["resourceVersion"] == dep["metadata"]["resourceVersion"]


def test_conflict_rereads_and_writes_onto_the_live_object(api):
    """A stale object conflicts; the writer reads it again and writes the status onto it."""
    stale = api.create(deployment())
    bump(api, replicas=7)
    written = StatusWriter(api, backoff=0).write(stale, {"replicas": 2})
    assert written["status"] == {"replicas": 2} and stored(api)["status"] == {"replicas": 2}


def test_a_function_status_merges_onto_what_the_live_object_has(api):
    """With a function, the status is recomputed from the object as read again after a Conflict."""
    stale = api.create(deployment())
    bump(api, collisionCount=1)
    seen: list[dict] = []

    def merged(current: dict) -> dict:
        seen.append(current.get("status") or {})
        return {**(current.get("status") or {}), "replicas": 2}

    StatusWriter(api, backoff=0).write(stale, merged)
    assert stored(api)["status"] == {"collisionCount": 1, "replicas": 2}
    assert seen == [{}, {"collisionCount": 1}]


def test_conflict_after_reread_shows_no_change_then_nothing_is_written(api):
    """When the live object already has the wanted status, the retry writes nothing."""
    stale = api.create(deployment())
    live = bump(api, replicas=2)
    assert StatusWriter(api, backoff=0).write(stale, {"replicas": 2}) == live


def test_still_conflicting_raises_the_conflict(api):
    """Every attempt conflicting: the last Conflict is raised (temporary: the queue retries it)."""
    dep = api.create(deployment())
    counting = CountingAPI(api, conflicts=10)
    slept: list[float] = []
    with pytest.raises(Conflict):
        StatusWriter(counting, attempts=3, backoff=0.5, sleep=slept.append).write(dep, {"replicas": 1})
    assert counting.update_status_calls == 3 and slept == [0.5, 0.5]


def test_gone_object_is_success(api):
    """An object deleted before the write (or before the re-read) gives None, raising nothing."""
    dep = api.create(deployment())
    api.delete(api.resource("deployments"), "web", namespace="default")
    assert StatusWriter(api, backoff=0).write(dep, {"replicas": 1}) is None


def test_replaced_object_is_left_alone(api):
    """A new object under the same name (another uid) does not get the old one's status."""
    old = api.create(deployment())
    api.delete(api.resource("deployments"), "web", namespace="default")
    api.create(deployment())
    assert StatusWriter(api, backoff=0).write(old, {"replicas": 9}) is None
    assert "replicas" not in (stored(api).get("status") or {})


def test_other_errors_pass_through(api):
    """An invalid status is not retried: Invalid reaches the caller at once."""
    dep = api.create(deployment())
    counting = CountingAPI(api)
    with pytest.raises(Invalid):
        StatusWriter(counting).write(dep, {"replicas": "many"})
    assert counting.update_status_calls == 1


def test_write_all_is_one_batch(api):
    """Several changed statuses go in one update_status_all; unchanged ones are not sent."""
    a, b, c = (api.create(deployment(n)) for n in ("a", "b", "c"))
    c = api.update_status({**c, "status": {"replicas": 5}})
    counting = CountingAPI(api)
    results = StatusWriter(counting).write_all([(a, {"replicas": 1}), (b, lambda cur: {"replicas": 2}),
                                                (c, {"replicas": 5})])
    assert counting.update_status_all_calls == 1 and counting.update_status_calls == 0
    assert [r["status"]["replicas"] for r in results] == [1, 2, 5]
    assert results[2] is c
    assert [stored(api, n)["status"]["replicas"] for n in ("a", "b", "c")] == [1, 2, 5]


def test_write_all_rereads_the_conflicted_and_skips_the_gone(api):
    """In a batch a stale object is written again after a re-read; a deleted one gives None."""
    a, b = api.create(deployment("a")), api.create(deployment("b"))
    bump(api, "a", collisionCount=3)
    api.delete(api.resource("deployments"), "b", namespace="default")
    results = StatusWriter(api, backoff=0).write_all(
        [(a, lambda cur: {**(cur.get("status") or {}), "replicas": 1}), (b, {"replicas": 1})])
    assert results[0]["status"] == {"collisionCount": 3, "replicas": 1} and results[1] is None


def test_write_all_raises_the_first_error_after_trying_every_pair(api):
    """One invalid status does not stop the others; its error is raised once all were tried."""
    a, b = api.create(deployment("a")), api.create(deployment("b"))
    with pytest.raises(Invalid):
        StatusWriter(api).write_all([(a, {"replicas": "many"}), (b, {"replicas": 4})])
    assert stored(api, "b")["status"] == {"replicas": 4}


def test_write_all_of_nothing_changed_sends_nothing(api):
    """No changed status: no request at all."""
    a = api.create(deployment("a"))
    counting = CountingAPI(api)
    assert StatusWriter(counting).write_all([(a, {})]) == [a]
    assert counting.update_status_all_calls == 0


def test_gone_at_the_reread_is_success(api):
    """A Conflict, then the object is gone when read again: None, raising nothing."""
    dep = api.create(deployment())
    api.delete(api.resource("deployments"), "web", namespace="default")
    counting = CountingAPI(api, conflicts=1)
    assert StatusWriter(counting, backoff=0).write(dep, {"replicas": 1}) is None
    assert counting.update_status_calls == 1
