"""`kctl delete` (and label) with names of which some do not exist: act on the rest, report, exit 1."""

from __future__ import annotations

import pytest

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\n"


def make(kctl, *names: str) -> None:
    result = kctl("apply", "-f", "-", input="---\n".join(CM.format(name=n) for n in names))
    assert result.code == 0, result.err


@pytest.mark.parametrize("args,deleted,missing", [
    (["cm", "a", "nope"], ["a"], ["nope"]),
    (["cm", "nope", "a"], ["a"], ["nope"]),
    (["configmap/a", "configmap/nope", "configmap/b"], ["a", "b"], ["nope"]),
], ids=["missing-last", "missing-first", "type-slash-name"])
def test_delete_acts_on_existing_names_and_reports_the_rest(kctl, args, deleted, missing):
    """Existing names are deleted, each missing one gets kubectl's NotFound line, and the exit status is 1."""
    make(kctl, "a", "b")
    result = kctl("delete", *args)
    assert result.code == 1
    assert result.out == "".join(f'configmap "{n}" deleted\n' for n in deleted)
    assert result.err == "".join(f'Error from server (NotFound): configmaps "{n}" not found\n' for n in missing)
    left = kctl("get", "cm", "-o", "name").out.split()
    assert left == [f"configmap/{n}" for n in ("a", "b") if n not in deleted]


def test_delete_of_only_missing_names_keeps_the_not_found_status(kctl):
    """Nothing found at all: the NotFound line and kctl's NotFound exit status (3)."""
    result = kctl("delete", "cm", "nope")
    assert result.code == 3
    assert result.err == 'Error from server (NotFound): configmaps "nope" not found\n'


def test_delete_ignore_not_found_with_partial_names(kctl):
    """--ignore-not-found: the missing name is silent and the exit status 0."""
    make(kctl, "a")
    result = kctl("delete", "cm", "a", "nope", "--ignore-not-found")
    assert (result.code, result.out, result.err) == (0, 'configmap "a" deleted\n', "")


def test_delete_from_file_with_a_missing_object(kctl, tmp_path):
    """-f naming one existing and one missing object deletes the one and reports the other."""
    make(kctl, "a")
    manifest = tmp_path / "two.yaml"
    manifest.write_text(CM.format(name="a") + "---\n" + CM.format(name="gone"))
    result = kctl("delete", "-f", str(manifest))
    assert result.code == 1
    assert result.out == 'configmap "a" deleted\n'
    assert 'configmaps "gone" not found' in result.err


def test_label_acts_on_existing_names_and_reports_the_rest(kctl):
    """label with a missing name labels the others and exits 1."""
    make(kctl, "a")
    result = kctl("label", "cm", "a", "nope", "x=y")
    assert result.code == 1 and result.out == "configmap/a labeled\n"
    assert 'configmaps "nope" not found' in result.err


@pytest.mark.parametrize("text", ["", "---\n", "# only a comment\n"], ids=["empty", "separator", "comment"])
def test_apply_with_no_objects_is_an_error(kctl, text):
    """`apply -f -` with no objects: `error: no objects passed to apply`, exit 1, as kubectl."""
    result = kctl("apply", "-f", "-", input=text)
    assert result.code == 1
    assert result.err == "error: no objects passed to apply\n"
