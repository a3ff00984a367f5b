"""kctl.ops.diff as a library: `kctl diff`'s comparison on the API it is given, outside any command."""

from __future__ import annotations

from kctl.manifests.sources import Document
from kctl.ops.diff import diff_documents


def _doc(obj: dict, index: int = 0) -> Document:
    return Document(source="test.yaml", index=index, line=None, obj=obj)


def _cm(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": data}


def test_diff_documents(api, capsys):
    """A changed object gives its unified diff, an unchanged one nothing, a bad one its error; nothing is written."""
    api.create(_cm("same", a="1"))
    api.create(_cm("changed", a="1"))
    bad = {"apiVersion": "v1", "kind": "NoSuchKind", "metadata": {"name": "x"}}
    entries = diff_documents(api, [_doc(_cm("same", a="1")), _doc(_cm("changed", a="2"), 1), _doc(bad, 2)],
                             namespace="default")
    assert [e.document.index for e in entries] == [1, 2]
    changed, failed = entries
    assert changed.error is None
    assert changed.lines[:2] == ["--- LIVE/v1.ConfigMap.default.changed\n", "+++ MERGED/v1.ConfigMap.default.changed\n"]
    assert '-  a: "1"\n' in changed.lines and '+  a: "2"\n' in changed.lines
    assert failed.error is not None and failed.lines == []
    assert api.get(api.resource("configmaps"), "changed", namespace="default")["data"] == {"a": "1"}
    assert capsys.readouterr() == ("", "")


def test_diff_of_pruned_and_secret(api):
    """An object a prune would delete diffs against nothing; a Secret's values never appear."""
    live = api.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"},
                       "data": {"password": "c2VjcmV0"}})
    (entry,) = diff_documents(api, [], pruned=[live])
    assert entry.document is None and entry.lines[0] == "--- LIVE/v1.Secret.default.s\n"
    assert all(not line.startswith("+") or line.startswith("+++") for line in entry.lines)
    assert not any("c2VjcmV0" in line for line in entry.lines)
