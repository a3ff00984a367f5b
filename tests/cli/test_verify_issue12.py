"""Defects found by trying issue 12 end to end as a kubectl user: `get all` beside a CRD without
categories, `get` of names partly missing, `create -f` with no objects, a Job's own labels."""

from __future__ import annotations

import pytest

CRD_NO_CATEGORIES = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
"""

CMS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c}
"""


def test_get_all_beside_crd_without_categories(kctl):
    """`get all,cm` works when a CRD names no categories (was an internal TypeError)."""
    assert kctl("apply", "-f", "-", input=CRD_NO_CATEGORIES).code == 0
    assert kctl("apply", "-f", "-", input=CMS).code == 0
    result = kctl("get", "all,cm", "-o", "name")
    assert result.code == 0, result.err
    assert result.out.split() == ["configmap/a", "configmap/c"]


@pytest.mark.parametrize(("args", "shown", "errors", "code"), [
    (["get", "cm", "a", "nope", "c", "-o", "name"], ["configmap/a", "configmap/c"], ['"nope"'], 1),
    (["get", "cm", "nope", "a", "-o", "name"], ["configmap/a"], ['"nope"'], 1),
    (["get", "cm/a", "cm/x", "cm/y", "-o", "name"], ["configmap/a"], ['"x"', '"y"'], 1),
    (["get", "cm", "x", "y"], [], ['"x"', '"y"'], 3),
])
def test_get_names_partly_missing(kctl, args, shown, errors, code):
    """`get` of names partly missing prints those that exist and reports each missing one, exit 1 (kubectl)."""
    assert kctl("apply", "-f", "-", input=CMS).code == 0
    result = kctl(*args)
    assert result.out.split() == shown
    lines = result.err.splitlines()
    assert len(lines) == len(errors)
    for line, name in zip(lines, errors):
        assert line.startswith("Error from server (NotFound): configmaps ") and name in line
    assert result.code == code


@pytest.mark.parametrize("manifest", ["", "\n", "---\n", "# only a comment\n---\n---\n"])
def test_create_without_objects_is_an_error(kctl, manifest):
    """`create -f -` with no objects fails as kubectl's (`no objects passed to create`), as apply does."""
    result = kctl("create", "-f", "-", input=manifest)
    assert (result.code, result.err.strip()) == (1, "error: no objects passed to create")
    assert kctl("apply", "-f", "-", input=manifest).err.strip() == "error: no objects passed to apply"


JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: j%s}
spec:
  template:
    metadata: %s
    spec: {restartPolicy: Never, containers: [{name: c, image: busybox:1}]}
"""


@pytest.mark.parametrize(("suffix", "job_labels", "template_meta", "expected"), [
    ("1", "", "{}", {"job-name": "j1", "batch.kubernetes.io/job-name": "j1"}),
    ("2", "", "{labels: {app: x}}", {"app": "x"}),  # defaulted from the template as sent
    ("3", ", labels: {team: t}", "{labels: {app: x}}", {"team": "t"}),
])
def test_job_metadata_labels(kctl, suffix, job_labels, template_meta, expected):
    """A Job without labels shows its template's, generated ones included (Kubernetes' Job example)."""
    import json

    manifest = JOB.replace("{name: j%s}", "{name: j%s%s}") % (suffix, job_labels, template_meta)
    assert kctl("apply", "-f", "-", input=manifest).code == 0
    job = json.loads(kctl("get", "job", f"j{suffix}", "-o", "json").out)
    labels = job["metadata"].get("labels") or {}
    uid = job["metadata"]["uid"]
    for key, value in expected.items():
        assert labels.get(key) == value
    if template_meta == "{}":
        assert labels["controller-uid"] == labels["batch.kubernetes.io/controller-uid"] == uid
    else:
        assert labels == expected


SECRET = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {password: %s, same: Unchanged0Value}\n"


def test_diff_masks_secret_values(kctl):
    """`kctl diff` of a Secret shows which keys change, never a value or its base64 (kubectl's Masker)."""
    import base64

    assert kctl("apply", "-f", "-", input=SECRET % "OldS3cretValue").code == 0
    result = kctl("diff", "-f", "-", input=SECRET % "NewS3cretValue")
    assert result.code == 1, result.err
    for value in ("OldS3cretValue", "NewS3cretValue", "Unchanged0Value"):
        assert value not in result.out
        assert base64.b64encode(value.encode()).decode() not in result.out
    assert '-  password: "*** (before)"' in result.out
    assert '+  password: "*** (after)"' in result.out
    assert '   same: "***"' in result.out
    assert kctl("diff", "-f", "-", input=SECRET % "OldS3cretValue").code == 0


def test_restore_of_a_missing_file_is_a_client_error(kctl, tmp_path):
    """`restore` of a path that does not exist (or a folder) says `error:`, not `Error from server`."""
    assert kctl("apply", "-f", "-", input=CMS).code == 0
    result = kctl("restore", str(tmp_path / "nope.db"))
    assert (result.code, result.err.strip()) == (1, f'error: the path "{tmp_path / "nope.db"}" does not exist')
    result = kctl("restore", str(tmp_path))
    assert result.code == 1 and result.err.startswith("error: ") and len(result.err.splitlines()) == 1
    assert kctl("get", "cm", "-o", "name").out.split() == ["configmap/a", "configmap/c"]


@pytest.mark.parametrize("args", [
    ["apply", "--dry-run", "-f", "-"],
    ["apply", "-f", "-", "--dry-run"],
    ["create", "-f", "-", "--dry-run"],
])
def test_bare_dry_run_means_client(kctl, args):
    """A bare `--dry-run` is kubectl's deprecated `--dry-run=client`: a warning, nothing written."""
    result = kctl(*args, input=CMS)
    assert result.code == 0, result.err
    assert "configmap/a" in result.out and "(dry run)" in result.out
    assert "--dry-run is deprecated" in result.err
    assert kctl("get", "cm", "a", "--ignore-not-found", "-o", "name").out == ""


def test_dry_run_with_a_separate_value_still_works(kctl):
    """`--dry-run server` (value as the next word) keeps working and warns nothing."""
    result = kctl("apply", "-f", "-", "--dry-run", "server", input=CMS)
    assert result.code == 0 and "(server dry run)" in result.out and result.err == ""


def test_get_several_names_one_missing_prints_a_list(kctl):
    """`get cm a nope -o json` prints a List holding `a` (several names are never a single object)."""
    import json

    assert kctl("apply", "-f", "-", input=CMS).code == 0
    result = kctl("get", "cm", "a", "nope", "-o", "json")
    assert result.code == 1
    listed = json.loads(result.out)
    assert listed["kind"] == "List" and [o["metadata"]["name"] for o in listed["items"]] == ["a"]
    assert json.loads(kctl("get", "cm", "a", "-o", "json").out)["kind"] == "ConfigMap"


@pytest.mark.parametrize(("args", "words"), [
    (["get", "cm", "--bogus"], ["No such option '--bogus'", "'kctl get --help'"]),
    (["frob"], ["No such command 'frob'", "'kctl --help'"]),
    (["logs"], ["Missing argument 'POD'", "'kctl logs --help'"]),
    (["get", "cm", "--no-headers=maybe"], ["'--no-headers'", "'kctl get --help'"]),
    (["get", "-n"], ["'-n' requires an argument", "'kctl get --help'"]),
    (["delete", "cm", "x", "--timeout=abc"], ['invalid duration "abc"', "'kctl delete --help'"]),
    (["encryption", "rotate-key", "--bogus"], ["'--bogus'", "'kctl encryption rotate-key --help'"]),
])
def test_usage_errors_are_one_line(kctl, args, words):
    """A command-line usage error is one `error:` line naming the command's --help, exit 2."""
    result = kctl(*args)
    assert result.code == 2
    assert len(result.err.splitlines()) == 1 and result.err.startswith("error: "), result.err
    for word in words:
        assert word in result.err
