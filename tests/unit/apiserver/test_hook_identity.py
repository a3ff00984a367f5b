"""A mutating hook cannot forge what the API server owns: uid, timestamps, versions, deletion."""

from __future__ import annotations

import json
import stat
import sys
import textwrap

import pytest

FORGED = {
    "uid": "00000000-0000-0000-0000-000000000000",
    "creationTimestamp": "2001-01-01T00:00:00Z",
    "resourceVersion": "999999",
    "generation": 42,
    "managedFields": [{"manager": "hook", "operation": "Apply"}],
    "deletionTimestamp": "2001-01-01T00:00:00Z",
    "deletionGracePeriodSeconds": 0,
}


def _install_hook(api, tmp_path, field: str, value, operations: list[str]) -> None:
    """A real executable MutatingAdmissionHook that adds metadata.<field>: value on `operations`."""
    script = tmp_path / f"forge-{field}.py"
    ops = [{"op": "add", "path": f"/metadata/{field}", "value": value}]
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import base64, json, sys
        review = json.load(sys.stdin)
        patch = base64.b64encode({json.dumps(ops).encode()!r}).decode()
        json.dump({{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "response": {{"uid": review["request"]["uid"], "allowed": True,
                                "patchType": "JSONPatch", "patch": patch}}}}, sys.stdout)
        """))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    api.create({"apiVersion": "kctl.io/v1alpha1", "kind": "MutatingAdmissionHook", "metadata": {"name": "forge"},
                "spec": {"command": [str(script)], "failurePolicy": "Fail", "rules": [
                    {"operations": operations, "apiGroups": [""], "resources": ["configmaps"]}]}})


def _cm(**data) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data}


@pytest.mark.parametrize("field", sorted(FORGED), ids=sorted(FORGED))
def test_hook_cannot_forge_on_create(api, tmp_path, field):
    """A hook's patch of a server-owned field on CREATE is undone: the server's value is stored."""
    _install_hook(api, tmp_path, field, FORGED[field], ["CREATE"])
    stored = api.create(_cm(a="1"))
    meta = stored["metadata"]
    assert meta.get(field) != FORGED[field]
    assert meta.get("generation") in (None, 1) and "deletionTimestamp" not in meta
    assert all(e.get("manager") != "hook" for e in meta.get("managedFields") or ())  # only the server's entries
    again = api.get(api.resource("cm"), "c")
    assert again["metadata"]["uid"] == meta["uid"]
    assert again["metadata"].get(field) != FORGED[field]


@pytest.mark.parametrize("field", sorted(FORGED), ids=sorted(FORGED))
def test_hook_cannot_forge_on_update(api, tmp_path, field):
    """A hook's patch of a server-owned field on UPDATE is undone: the live object's value stays."""
    before = api.create(_cm(a="1"))
    _install_hook(api, tmp_path, field, FORGED[field], ["UPDATE"])
    result = api.apply(_cm(a="2"))
    assert result.error is None and result.action == "configured"
    after = api.get(api.resource("cm"), "c")
    assert after["data"] == {"a": "2"}
    for key in ("uid", "creationTimestamp"):
        assert after["metadata"][key] == before["metadata"][key]
    generation = before["metadata"].get("generation")
    assert after["metadata"].get("generation") in ((None,) if generation is None else (generation, generation + 1))
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    assert "deletionTimestamp" not in after["metadata"]
    assert "deletionGracePeriodSeconds" not in after["metadata"]
    assert all(e.get("manager") != "hook" for e in after["metadata"].get("managedFields") or ())


def test_hook_adding_deletion_timestamp_does_not_delete(api, tmp_path):
    """The issue's case: deletionTimestamp from a hook on UPDATE removed the object; now it stays."""
    api.create(_cm(a="1"))
    _install_hook(api, tmp_path, "deletionTimestamp", FORGED["deletionTimestamp"], ["UPDATE"])
    result = api.apply(_cm(a="2"))
    assert result.action == "configured"
    assert api.store.get("ConfigMap", "default", "c") is not None
    assert [c.type for c in api.store.changes(0) if c.kind == "ConfigMap"] == ["ADDED", "MODIFIED"]
