"""`kctl get` hides metadata.managedFields unless --show-managed-fields; kctl apply --server-side; managers."""

from __future__ import annotations

import json

import pytest
import yaml

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: '1'}\n"


@pytest.fixture
def applied(kctl):
    """One ConfigMap made by `kctl apply --server-side` (tracked: managedFields from the start)."""
    result = kctl("apply", "--server-side", "-f", "-", input=CM)
    assert result.code == 0, result.err
    return kctl


def _load(fmt: str, text: str):
    return json.loads(text) if fmt == "json" else yaml.safe_load(text)


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_get_hides_managed_fields(applied, fmt):
    """-o yaml|json print no managedFields by default."""
    out = applied("get", "cm", "c", "-o", fmt)
    assert out.code == 0, out.err
    assert "managedFields" not in _load(fmt, out.out)["metadata"]


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_show_managed_fields_prints_the_entries(applied, fmt):
    """--show-managed-fields keeps them: the server-side apply's entry (manager kctl, Apply)."""
    out = applied("get", "cm", "c", "-o", fmt, "--show-managed-fields")
    assert out.code == 0, out.err
    [entry] = _load(fmt, out.out)["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"]) == ("kctl", "Apply")
    assert entry["fieldsV1"]["f:data"]["f:a"] == {}


def test_jsonpath_sees_no_managed_fields_by_default(applied):
    """Templates see the object as printed: without managedFields unless asked."""
    path = "jsonpath={.metadata.managedFields[*].manager}"
    assert applied("get", "cm", "c", "-o", path).out.strip() == ""
    assert applied("get", "cm", "c", "-o", path, "--show-managed-fields").out.strip() == "kctl"


def test_commands_name_their_managers(applied):
    """On a tracked object each kctl command writes as kctl-<command>, as kubectl's kubectl-<command>."""
    assert applied("label", "cm", "c", "x=y").code == 0
    out = applied("get", "cm", "c", "-o", "json", "--show-managed-fields")
    managers = [(e["manager"], e["operation"]) for e in json.loads(out.out)["metadata"]["managedFields"]]
    assert managers == [("kctl", "Apply"), ("kctl-label", "Update")]


def test_client_side_apply_creates_untracked_objects(kctl):
    """kctl apply (client side) over SQLite stores no managedFields: kctl's own creates start untracked."""
    assert kctl("apply", "-f", "-", input=CM).code == 0
    out = kctl("get", "cm", "c", "-o", "json", "--show-managed-fields")
    assert "managedFields" not in json.loads(out.out)["metadata"]


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
"""


def test_apply_server_side_conflict_and_force(kctl):
    """kctl apply --server-side: serverside-applied; after a scale, kubectl's conflict text; --force-conflicts wins."""
    first = kctl("apply", "--server-side", "-f", "-", input=DEPLOYMENT)
    assert (first.code, first.out) == (0, "deployment.apps/web serverside-applied\n"), first.err
    assert kctl("scale", "deployment", "web", "--replicas=4").code == 0
    refused = kctl("apply", "--server-side", "-f", "-", input=DEPLOYMENT)
    assert refused.code != 0
    assert 'Apply failed with 1 conflict: conflict with "kctl-scale" using apps/v1: .spec.replicas' in refused.err
    assert "--force-conflicts" in refused.err
    forced = kctl("apply", "--server-side", "--force-conflicts", "-f", "-", input=DEPLOYMENT)
    assert forced.code == 0, forced.err
    obj = json.loads(kctl("get", "deployment", "web", "-o", "json", "--show-managed-fields").out)
    assert obj["spec"]["replicas"] == 2
    assert [(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]] == [("kctl", "Apply")]


@pytest.mark.parametrize("args,message", [
    (["--force-conflicts"], "--force-conflicts only works with --server-side"),
    (["--server-side", "--dry-run=client"], "--dry-run=client doesn't work with --server-side"),
    (["--server-side", "--prune", "--all"], "cannot be combined with --prune"),
])
def test_apply_server_side_refuses_what_it_cannot_do(kctl, args, message):
    """Flags that do not go with --server-side are a usage error, one line."""
    result = kctl("apply", *args, "-f", "-", input=DEPLOYMENT)
    assert result.code == 2 and message in result.err
