"""kctl.applyset: parent names, default set names, member labels, and the prune plan on a real store."""

from __future__ import annotations

import pytest

from kctl.applyset import (PART_OF_LABEL, ApplySet, ApplySetError, ParentRef, default_parent_name, label_members,
                           load, parse_parent, prune_plan, record)
from kctl.sync.inventory import Entry


@pytest.mark.parametrize("value,kind,name", [
    ("web", "Secret", "web"),
    ("secrets/web", "Secret", "web"),
    ("secret/web", "Secret", "web"),
    ("configmaps/web.v2", "ConfigMap", "web.v2"),
    ("cm/web", "ConfigMap", "web"),
], ids=["bare", "secrets", "secret", "configmaps", "cm"])
def test_parse_parent(value, kind, name):
    """kubectl's --applyset forms name a Secret (default) or ConfigMap parent in the given namespace."""
    assert parse_parent(value, namespace="team") == ParentRef(kind=kind, namespace="team", name=name)


@pytest.mark.parametrize("value", ["pods/x", "deployments.apps/x", "Bad_Name", "", "-x", "configmaps/"],
                         ids=["pod", "deployment", "underscore", "empty", "leading-dash", "no-name"])
def test_parse_parent_refuses(value):
    """Other kinds and names that are not object names are refused with ApplySetError."""
    with pytest.raises(ApplySetError):
        parse_parent(value, namespace="default")


def test_default_parent_name_is_stable_per_set_of_paths(tmp_path):
    """Same paths (any order, relative or absolute) give one name; other paths another; stdin none."""
    a, b = tmp_path / "Team A", tmp_path / "b"
    name = default_parent_name([str(a), str(b)])
    assert name == default_parent_name([str(b), str(a)])
    assert name.startswith("kctl-apply-team-a-")
    assert parse_parent(name, namespace="default").name == name
    assert default_parent_name([str(a)]) != name
    with pytest.raises(ApplySetError, match="--applyset"):
        default_parent_name(["-"])


def test_label_members_sets_part_of_and_refuses_another_set():
    """Members get the part-of label (input untouched); a manifest naming another set is an error."""
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"app": "x"}}}
    labelled, = label_members([obj], "applyset-abc-v1")
    assert labelled["metadata"]["labels"] == {"app": "x", PART_OF_LABEL: "applyset-abc-v1"}
    assert PART_OF_LABEL not in obj["metadata"]["labels"]
    other = {**obj, "metadata": {"name": "a", "labels": {PART_OF_LABEL: "applyset-other-v1"}}}
    with pytest.raises(ApplySetError, match="part-of"):
        label_members([other], "applyset-abc-v1")


@pytest.fixture
def api(tmp_path):
    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store

    store = Store(tmp_path / "kctl.db")
    yield APIServer(store, user="test")
    store.close()


def cm(name: str, *, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}}}


def test_prune_plan_takes_only_recorded_labelled_same_uid_members(api):
    """Candidates: recorded, still labelled part-of, same uid, not kept; everything else is left alone."""
    parent = ParentRef(kind="Secret", namespace="default", name="set")
    member = {PART_OF_LABEL: parent.id}
    for obj in (cm("gone", labels=member), cm("kept", labels=member), cm("relabelled"),
                cm("recreated", labels=member), cm("stranger", labels=member)):
        api.create(obj)
    recorded = [Entry.of(api.get(api.resource("configmaps"), n, namespace="default"))
                for n in ("gone", "kept", "relabelled", "recreated")]
    recorded[3] = Entry(api_version="v1", kind="ConfigMap", namespace="default", name="recreated", uid="old-uid")
    applyset = record(api, ApplySet(parent=parent), recorded)
    assert load(api, parent).inventory == applyset.inventory
    plan = prune_plan(api, applyset, {("ConfigMap", "default", "kept")})
    assert [obj["metadata"]["name"] for _, obj in plan] == ["gone"]
