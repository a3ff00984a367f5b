"""kctl.sync.render: plain folders of manifests into objects with file and line; errors that point."""

from __future__ import annotations

import os
import pickle

import pytest

from kctl.sync.render import RenderError, Rendered, render


def write(root, name: str, text: str):
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def cm(name: str, extra: str = "") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{extra}"


def names(items: list[Rendered]) -> list[str]:
    return [item.obj["metadata"]["name"] for item in items]


def test_plain_folder_recursive_sorted_dot_entries_skipped(tmp_path):
    """Every *.yaml/*.yml/*.json below, depth first in name order; dot-files/-folders and others skipped."""
    write(tmp_path, "b.yaml", cm("b"))
    write(tmp_path, "a.yml", cm("a"))
    write(tmp_path, "c.json", '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}')
    write(tmp_path, "sub/deeper/d.yaml", cm("d"))
    write(tmp_path, "aa/e.yaml", cm("e"))
    write(tmp_path, ".hidden/x.yaml", cm("x"))
    write(tmp_path, ".y.yaml", cm("y"))
    write(tmp_path, "README.md", "not: read\n")
    items = render(tmp_path)
    assert names(items) == ["a", "e", "b", "c", "d"]
    assert [item.where() for item in items] == ["a.yml:1", "aa/e.yaml:1", "b.yaml:1", "c.json:1",
                                                "sub/deeper/d.yaml:1"]


def test_path_inside_the_checkout(tmp_path):
    """`path` selects a folder (or one file) under the root; files are still named from the root."""
    write(tmp_path, "apps/web/cm.yaml", cm("web"))
    write(tmp_path, "other.yaml", cm("other"))
    assert [i.where() for i in render(tmp_path, "apps")] == ["apps/web/cm.yaml:1"]
    assert names(render(tmp_path, "apps/web/cm.yaml")) == ["web"]
    assert render(tmp_path / "apps", ".")[0].file == "web/cm.yaml"


def test_multi_document_lines_and_empty_documents(tmp_path):
    """Each document of a stream, with the line it starts on; empty documents are skipped."""
    write(tmp_path, "all.yaml", "---\n" + cm("one") + "---\n# only a comment\n---\n" + cm("two") + "---\n")
    items = render(tmp_path)
    assert names(items) == ["one", "two"]
    assert [item.line for item in items] == [2, 9]
    assert all(isinstance(item.obj, dict) and type(item.obj["metadata"]) is dict for item in items)


def test_list_documents_are_expanded(tmp_path):
    """`kind: List` and `*List` documents give their items, at the List's line."""
    write(tmp_path, "list.yaml", cm("first") + "---\napiVersion: v1\nkind: ConfigMapList\nitems:\n"
          "- {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}\n"
          "- {apiVersion: v1, kind: ConfigMap, metadata: {name: z}}\n")  # (`y` reads as true)
    items = render(tmp_path)
    assert names(items) == ["first", "x", "z"]
    assert [item.line for item in items] == [1, 6, 6]


def test_empty_folder_renders_to_nothing(tmp_path):
    """No manifests is not an error here (the reconciler decides what an empty render means)."""
    (tmp_path / "empty").mkdir()
    assert render(tmp_path, "empty") == []


@pytest.mark.parametrize("text, line, message", [
    (cm("ok") + "---\nkind: [\n", 7, "expected"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nmetadata: {name: b}\n", 4, "duplicate key"),
    (cm("ok") + "---\n- just\n- a list\n", 6, "expected a mapping"),
    ("apiVersion: v1\nmetadata: {name: a}\n", 1, "kind is missing"),
    ("kind: ConfigMap\nmetadata: {name: a}\n", 1, "apiVersion is missing"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {labels: {}}\n", 1, "metadata.name is missing"),
    ("apiVersion: v1\nkind: ConfigMap\n", 1, "metadata is missing"),
    ("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap}\n", 1,
     "item 1: not a Kubernetes object: metadata"),
], ids=["syntax", "duplicate-key", "not-a-mapping", "no-kind", "no-apiversion", "no-name",
        "no-metadata", "list-item"])
def test_bad_documents_name_file_and_line(tmp_path, text, line, message):
    """A parse error or a non-object document: RenderError `FILE:LINE: message`."""
    write(tmp_path, "ok.yaml", cm("fine"))
    write(tmp_path, "sub/bad.yaml", text)
    with pytest.raises(RenderError) as info:
        render(tmp_path)
    error = info.value
    assert (error.file, error.line) == ("sub/bad.yaml", line)
    assert message in error.message
    assert str(error) == f"sub/bad.yaml:{line}: {error.message}" and "\n" not in str(error)
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


def test_same_object_twice_is_an_error(tmp_path):
    """Two documents declaring one object (kind, namespace, name): the second is the error."""
    write(tmp_path, "a.yaml", cm("same"))
    write(tmp_path, "b.yaml", cm("other") + "---\n" + cm("same"))
    with pytest.raises(RenderError, match=r"^b.yaml:6: ConfigMap same is also declared at a.yaml:1$"):
        render(tmp_path)
    write(tmp_path, "b.yaml", cm("same", "  namespace: elsewhere\n"))
    assert len(render(tmp_path)) == 2


@pytest.mark.parametrize("path", ["..", "../outside", "sub/../../x", "/etc"])
def test_path_escaping_the_root(tmp_path, path):
    """A path that leads out of the checkout is refused."""
    root = tmp_path / "checkout"
    write(root, "sub/a.yaml", cm("a"))
    with pytest.raises(RenderError, match="leads outside the checkout"):
        render(root, path)


def test_symlinks_out_of_the_root_are_refused(tmp_path):
    """A symbolic link (file or folder) pointing outside the checkout is an error, not followed."""
    root = tmp_path / "checkout"
    write(tmp_path, "secret/passwd.yaml", cm("stolen"))
    write(root, "a.yaml", cm("a"))
    os.symlink(tmp_path / "secret", root / "linked")
    with pytest.raises(RenderError, match="^linked: 'linked' leads outside the checkout"):
        render(root)
    (root / "linked").unlink()
    os.symlink(tmp_path / "secret" / "passwd.yaml", root / "z.yaml")
    with pytest.raises(RenderError, match="z.yaml"):
        render(root)
    with pytest.raises(RenderError):
        render(root, "z.yaml")


def test_symlinks_inside_the_root_are_followed_once(tmp_path):
    """A link to a folder inside the checkout is read; a link back up the tree is not looped."""
    write(tmp_path, "real/a.yaml", cm("a"))
    os.symlink(tmp_path / "real", tmp_path / "zlink")
    os.symlink(tmp_path, tmp_path / "real" / "up")
    assert names(render(tmp_path)) == ["a"]


def test_missing_path(tmp_path):
    """A path that does not exist is named in the error."""
    with pytest.raises(RenderError, match="^nope: no such file or directory$"):
        render(tmp_path, "nope")


def test_folder_with_kustomization_is_built_not_read(tmp_path):
    """A subfolder holding kustomization.yaml is built as one: its other files are not read plainly."""
    write(tmp_path, "plain.yaml", cm("plain"))
    write(tmp_path, "app/kustomization.yaml", "resources: [cm.yaml]\nnamePrefix: app-\n")
    write(tmp_path, "app/cm.yaml", cm("x"))
    write(tmp_path, "app/unlisted.yaml", cm("unlisted"))
    assert names(render(tmp_path)) == ["app-x", "plain"]
    assert names(render(tmp_path, "app")) == ["app-x"]
