"""apply treats a manifest's resourceVersion as a precondition, as kubectl's patch does."""

from __future__ import annotations

import pytest

from kctl.machinery.errors import Conflict


def _cm(data: dict, rv: str | None = None) -> dict:
    meta = {"name": "c"}
    if rv is not None:
        meta["resourceVersion"] = rv
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def test_second_of_two_edits_of_one_version_conflicts(api):
    """Two edits of the same `get -o yaml`: the first applies, the second is a Conflict."""
    rv = api.create(_cm({"a": "0"}))["metadata"]["resourceVersion"]
    first = api.apply(_cm({"a": "alice"}, rv))
    assert first.error is None and first.action == "configured"
    second = api.apply(_cm({"a": "bob"}, rv))
    assert isinstance(second.error, Conflict)
    assert second.error.exit_code == 5
    assert second.error.message == (
        'error when applying patch: Operation cannot be fulfilled on configmaps "c": the object has been '
        "modified; please apply your changes to the latest version and try again")
    assert api.get(api.resource("cm"), "c")["data"] == {"a": "alice"}


@pytest.mark.parametrize("rv", [None, "", "current"], ids=["absent", "empty", "current"])
def test_no_or_current_resource_version_applies(api, rv):
    """Without a resourceVersion (git manifests), or with the live one, apply goes through."""
    live = api.create(_cm({"a": "0"}))["metadata"]["resourceVersion"]
    api.patch(api.resource("cm"), "c", {"data": {"b": "1"}}, patch_type="merge")
    current = api.get(api.resource("cm"), "c")["metadata"]["resourceVersion"]
    assert current != live
    result = api.apply(_cm({"a": "1"}, current if rv == "current" else rv))
    assert result.error is None and result.action == "configured"
    assert api.get(api.resource("cm"), "c")["data"]["a"] == "1"


def test_stale_version_with_unchanged_content_still_conflicts(api):
    """A stale manifest that matches the live content is refused too (kubectl sends the version)."""
    rv = api.create(_cm({"a": "0"}))["metadata"]["resourceVersion"]
    api.patch(api.resource("cm"), "c", {"metadata": {"labels": {"x": "y"}}}, patch_type="merge")
    result = api.apply(_cm({"a": "0"}, rv))
    assert isinstance(result.error, Conflict)


def test_stale_version_in_atomic_batch_writes_nothing(api):
    """With --atomic, one stale manifest keeps the whole batch out."""
    rv = api.create(_cm({"a": "0"}))["metadata"]["resourceVersion"]
    api.apply(_cm({"a": "1"}))
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}, "data": {}}
    results = api.write_all([("apply", other), ("apply", _cm({"a": "2"}, rv))], atomic=True)
    assert isinstance(results[1].error, Conflict)
    assert api.store.get("ConfigMap", "default", "d") is None
