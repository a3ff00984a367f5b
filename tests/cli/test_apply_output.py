"""`kctl apply -o yaml|json|name`: the applied objects instead of result lines, as kubectl prints them."""

from __future__ import annotations

import json

import pytest

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{k: v}}\n"
TWO = CM.format(name="a") + "---\n" + CM.format(name="b")


def load_yaml(text: str):
    from kctl.manifests.yamlio import load_documents

    (_, _, obj), = load_documents(text, source="out")
    return obj


@pytest.mark.parametrize("args,expected", [
    (["-o", "name"], "configmap/a\nconfigmap/b\n"),
    (["-o", "name", "--dry-run=client"], "configmap/a\nconfigmap/b\n"),
    (["-o=name"], "configmap/a\nconfigmap/b\n"),
], ids=["name", "name-dry-run", "name-equals"])
def test_apply_output_name(kctl, args, expected):
    """-o name prints TYPE/NAME per applied object, nothing else."""
    result = kctl("apply", "-f", "-", *args, input=TWO)
    assert (result.code, result.out) == (0, expected), result.err


def test_apply_output_yaml_one_object_and_a_list(kctl):
    """-o yaml prints the stored object itself, or a v1 List of them when several were applied."""
    one = kctl("apply", "-f", "-", "-o", "yaml", input=CM.format(name="a"))
    assert one.code == 0, one.err
    obj = load_yaml(one.out)
    assert obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == "a" and obj["metadata"]["resourceVersion"]
    several = load_yaml(kctl("apply", "-f", "-", "-o", "yaml", input=TWO).out)
    assert several["kind"] == "List" and several["apiVersion"] == "v1"
    assert [i["metadata"]["name"] for i in several["items"]] == ["a", "b"]


def test_apply_output_json(kctl):
    """-o json prints a List of the applied objects as JSON."""
    result = kctl("apply", "-f", "-", "-o", "json", input=TWO)
    assert result.code == 0, result.err
    body = json.loads(result.out)
    assert body["kind"] == "List" and [i["data"]["k"] for i in body["items"]] == ["v", "v"]


def test_apply_output_keeps_stdout_clean_when_pruning(kctl, tmp_path):
    """With -o, what was pruned is said on stderr, so stdout stays the applied objects only."""
    manifest = tmp_path / "set.yaml"
    manifest.write_text(TWO)
    assert kctl("apply", "-f", str(manifest), "--prune", "--all").code == 0
    manifest.write_text(CM.format(name="a"))
    result = kctl("apply", "-f", str(manifest), "--prune", "--all", "-o", "name")
    assert (result.code, result.out) == (0, "configmap/a\n"), result.err
    assert "configmap/b pruned" in result.err


def test_apply_output_unknown_format_is_refused(kctl):
    """An -o that apply cannot print is one clear error, and nothing is applied."""
    result = kctl("apply", "-f", "-", "-o", "wide", input=CM.format(name="a"))
    assert result.code == 2 and "allowed formats are: json, name, yaml" in result.err
    assert kctl("get", "cm", "a").code != 0
