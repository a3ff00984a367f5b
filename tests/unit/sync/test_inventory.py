"""kctl.sync.inventory: the source label, inventory entries, prune candidates and the fast-path check."""

from __future__ import annotations

import pytest

from kctl.admission.validation.names import label_value_problems
from kctl.sync.inventory import (SOURCE_LABEL, SYNC_ANNOTATION, Entry, inventory_of, prune_candidates,
                                 prune_share_exceeded, source_label_value, still_owned, sync_disabled,
                                 unchanged_since_apply)


@pytest.mark.parametrize("namespace,name", [("default", "web"), ("a" * 63, "b" * 253), ("team-x", "n" * 60)],
                         ids=["short", "longest", "just-over"])
def test_source_label_is_a_valid_label_value(namespace, name):
    """`namespace.name` when it fits, else a hashed form that is still a valid, distinct label value."""
    value = source_label_value(namespace, name)
    assert label_value_problems(value) == []
    if len(namespace) + len(name) + 1 <= 63:
        assert value == f"{namespace}.{name}"
    else:
        assert value != source_label_value(namespace, name[:-1] + "x")


def test_entry_round_trips_through_status():
    """An entry written to status.inventory reads back equal, with the store's key of its kind."""
    entry = Entry("apps/v1", "Deployment", "default", "web", uid="u1", resource_version="7")
    assert Entry.from_status(entry.to_status()) == entry
    assert entry.key == ("Deployment.apps", "default", "web")
    assert Entry("v1", "Namespace", "", "team").key == ("Namespace", "", "team")
    source = {"status": {"inventory": [entry.to_status(), {"kind": "Broken"}]}}
    assert inventory_of(source) == [entry]


@pytest.mark.parametrize("pruned,total,limit,exceeded", [
    (0, 0, 50, False), (1, 2, 50, False), (2, 3, 50, True), (3, 4, 75, False), (1, 1, 99, True),
    (1, 1, 100, False), (1, 10, 0, True)], ids=["nothing", "half", "two-thirds", "at-limit", "all", "all-allowed",
                                                 "zero-limit"])
def test_prune_share(pruned, total, limit, exceeded):
    """More than maxPrunePercent percent of the inventory is refused; exactly the limit is allowed."""
    assert prune_share_exceeded(pruned, total, limit) is exceeded


def test_prune_candidates_are_what_the_revision_dropped():
    """Entries whose key the new revision does not hold, in inventory order."""
    a, b, c = (Entry("v1", "ConfigMap", "default", n) for n in "abc")
    assert prune_candidates([a, b, c], {a.key, c.key}) == [b]


def live(label: str | None, uid: str = "u1", disabled: bool = False) -> dict:
    meta: dict = {"name": "x", "namespace": "default", "uid": uid}
    if label:
        meta["labels"] = {SOURCE_LABEL: label}
    if disabled:
        meta["annotations"] = {SYNC_ANNOTATION: "disabled"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


@pytest.mark.parametrize("obj,owned", [
    (live("default.s"), True), (live("default.other"), False), (live(None), False),
    (live("default.s", uid="u2"), False), (None, False)],
    ids=["same", "other-source", "nobody", "recreated", "gone"])
def test_still_owned_needs_label_and_uid(obj, owned):
    """Prune touches only the object it recorded (uid) that still carries this source's label."""
    entry = Entry("v1", "ConfigMap", "default", "x", uid="u1")
    assert still_owned(entry, obj, "default.s") is owned


def test_sync_disabled_annotation():
    assert sync_disabled(live("default.s", disabled=True))
    assert not sync_disabled(live("default.s"))


def test_unchanged_since_apply_sees_any_write(api):
    """True while every object keeps its recorded resourceVersion; a patch or a delete makes it False."""
    objs = [api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}, "data": {}})
            for i in range(3)]
    objs.append(api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}))
    inventory = [Entry.of(o) for o in objs]
    assert unchanged_since_apply(api, inventory)
    api.patch(api.resource("configmaps"), "c1", {"data": {"x": "1"}}, patch_type="merge", namespace="default")
    assert not unchanged_since_apply(api, inventory)
    inventory = [Entry.of(api.get(api.resource("configmaps"), f"c{i}", namespace="default")) for i in range(3)]
    assert unchanged_since_apply(api, inventory)
    api.delete(api.resource("configmaps"), "c2", namespace="default")
    assert not unchanged_since_apply(api, inventory)
    assert not unchanged_since_apply(api, [Entry("v1", "ConfigMap", "default", "c0")])  # no version recorded
