"""`kctl apply --prune` in real processes: only what this apply-set applied before is ever pruned."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kctl.apiserver.server import APIServer
from kctl.store.sqlite import Store

SECRET_VALUE = "s3cr3t-hunter2"

TEAM_B = f"""\
apiVersion: v1
kind: Namespace
metadata: {{name: team-b}}
---
apiVersion: v1
kind: Secret
metadata: {{name: b-token}}
stringData: {{token: {SECRET_VALUE}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: b-web}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: b-web}}}}
  template:
    metadata: {{labels: {{app: b-web}}}}
    spec: {{containers: [{{name: web, image: busybox}}]}}
"""


def configmap(name: str, *, labels: str = "{app: demo}", namespace: str = "") -> str:
    ns = f", namespace: {namespace}" if namespace else ""
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, labels: {labels}{ns}}}\ndata: {{k: v}}\n"


@pytest.fixture
def run(tmp_path):
    """run(*args) -> CompletedProcess of `kctl ARGS` in its own process on this test's store."""
    store = tmp_path / "store" / "kctl.db"
    store.parent.mkdir()
    env = {**os.environ, "KCTL_STORE": str(store)}
    kctl = Path(sys.executable).parent / "kctl"
    command = [str(kctl)] if kctl.exists() else [sys.executable, "-m", "kctl"]

    def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([*command, *args], env=env, capture_output=True, text=True, input=input,
                              timeout=120)

    run.store = store
    return run


@pytest.fixture
def api(run):
    """The API over the same store, to look at the result."""
    store = Store(run.store)
    yield APIServer(store, user="test")
    store.close()


def exists(api: APIServer, kind: str, name: str, namespace: str | None = "default") -> bool:
    from kctl.machinery.errors import NotFound

    try:
        obj = api.get(api.resource(kind), name, namespace=namespace)
    except NotFound:
        return False
    return not obj["metadata"].get("deletionTimestamp")


def folder(root: Path, name: str, files: dict[str, str]) -> Path:
    path = root / name
    path.mkdir(exist_ok=True)
    for file, text in files.items():
        (path / file).write_text(text)
    return path


def test_two_teams_prune_all_without_namespace(run, api, tmp_path):
    """Team A's `--prune --all` (no -n) prunes only A's removed object; B's Secret, Deployment and Namespace stay."""
    team_b = folder(tmp_path, "team-b", {"b.yaml": TEAM_B})
    assert run("apply", "-f", str(team_b)).returncode == 0
    team_a = folder(tmp_path, "team-a", {"a1.yaml": configmap("a1"), "a2.yaml": configmap("a2"),
                                         "ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n"})
    first = run("apply", "-f", str(team_a), "--prune", "--all")
    assert first.returncode == 0, first.stderr
    assert "pruned" not in first.stdout

    (team_a / "a2.yaml").unlink()
    second = run("apply", "-f", str(team_a), "--prune", "--all")
    assert second.returncode == 0, second.stderr
    assert [line for line in second.stdout.splitlines() if "pruned" in line] == ["configmap/a2 pruned"]
    assert not exists(api, "configmaps", "a2")
    assert exists(api, "configmaps", "a1") and exists(api, "namespaces", "team-a", None)
    assert exists(api, "secrets", "b-token") and exists(api, "deployments", "b-web")
    namespace_b = api.get(api.resource("namespaces"), "team-b")
    assert namespace_b.get("status", {}).get("phase", "Active") == "Active"
    assert SECRET_VALUE not in first.stdout + first.stderr + second.stdout + second.stderr


def test_selector_never_prunes_an_unlabelled_object_of_someone_else(run, api, tmp_path):
    """With -l app=demo, an unlabelled object in default applied by someone else is untouched."""
    other = folder(tmp_path, "other", {"o.yaml": configmap("other", labels="{}")})
    assert run("apply", "-f", str(other)).returncode == 0
    team_a = folder(tmp_path, "team-a", {"a1.yaml": configmap("a1"), "a2.yaml": configmap("a2")})
    assert run("apply", "-f", str(team_a), "--prune", "-l", "app=demo").returncode == 0
    (team_a / "a2.yaml").unlink()
    result = run("apply", "-f", str(team_a), "--prune", "-l", "app=demo")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["configmap/a1 unchanged", "configmap/a2 pruned"]
    assert exists(api, "configmaps", "other") and exists(api, "configmaps", "a1")


def test_someone_elses_applied_object_with_matching_label_is_not_pruned(run, api, tmp_path):
    """An object applied by another folder, even with the same label, is never this set's to prune."""
    team_a = folder(tmp_path, "team-a", {"a1.yaml": configmap("a1")})
    other = folder(tmp_path, "other", {"o.yaml": configmap("look-alike")})
    assert run("apply", "-f", str(team_a), "--prune", "-l", "app=demo").returncode == 0
    assert run("apply", "-f", str(other)).returncode == 0
    result = run("apply", "-f", str(team_a), "--prune", "-l", "app=demo")
    assert result.returncode == 0 and "pruned" not in result.stdout, result.stdout
    assert exists(api, "configmaps", "look-alike")


@pytest.mark.parametrize("mode,suffix", [("client", " (dry run)"), ("server", " (server dry run)")],
                         ids=["client", "server"])
def test_dry_run_prints_what_would_be_pruned_and_deletes_nothing(run, api, tmp_path, mode, suffix):
    """--dry-run prints `... pruned (dry run)` and deletes nothing, nor changes the record."""
    team_a = folder(tmp_path, "team-a", {"a1.yaml": configmap("a1"), "a2.yaml": configmap("a2")})
    assert run("apply", "-f", str(team_a), "--prune", "--all").returncode == 0
    (team_a / "a2.yaml").unlink()
    result = run("apply", "-f", str(team_a), "--prune", "--all", f"--dry-run={mode}")
    assert result.returncode == 0, result.stderr
    assert f"configmap/a2 pruned{suffix}" in result.stdout.splitlines()
    assert exists(api, "configmaps", "a2")
    again = run("apply", "-f", str(team_a), "--prune", "--all")
    assert "configmap/a2 pruned" in again.stdout.splitlines()


def test_namespace_is_pruned_only_when_it_was_a_member(run, api, tmp_path):
    """A Namespace the set applied goes (last, after its content); one it never applied stays."""
    assert run("apply", "-f", "-", input="apiVersion: v1\nkind: Namespace\nmetadata: {name: keep}\n").returncode == 0
    team_a = folder(tmp_path, "team-a", {
        "a.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: gone}\n---\n" + configmap("c", namespace="gone"),
        "b.yaml": configmap("b")})
    assert run("apply", "-f", str(team_a), "--prune", "--all").returncode == 0
    (team_a / "a.yaml").unlink()
    result = run("apply", "-f", str(team_a), "--prune", "--all")
    assert result.returncode == 0, result.stderr
    pruned = [line for line in result.stdout.splitlines() if line.endswith("pruned")]
    assert pruned == ["configmap/c pruned", "namespace/gone pruned"]
    assert exists(api, "namespaces", "keep", None)


def test_applyset_parent_records_members_as_kubectl_does(run, api, tmp_path):
    """--applyset=NAME: a Secret parent with kubectl's id label and annotations; members carry part-of."""
    from kctl.applyset import ParentRef

    team_a = folder(tmp_path, "team-a", {"a.yaml": configmap("a1") + "---\n" + configmap("x", namespace="other")})
    run("apply", "-f", "-", input="apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n")
    result = run("apply", "-f", str(team_a), "--prune", "--applyset=team-a")
    assert result.returncode == 0, result.stderr
    parent = api.get(api.resource("secrets"), "team-a", namespace="default")
    set_id = ParentRef(kind="Secret", namespace="default", name="team-a").id
    assert parent["metadata"]["labels"]["applyset.kubernetes.io/id"] == set_id
    annotations = parent["metadata"]["annotations"]
    assert annotations["applyset.kubernetes.io/contains-group-kinds"] == "ConfigMap"
    assert annotations["applyset.kubernetes.io/additional-namespaces"] == "other"
    assert annotations["applyset.kubernetes.io/tooling"].startswith("kctl/v")
    inventory = json.loads(base64.b64decode(parent["data"]["kctl-inventory.json"]))
    assert sorted((i["namespace"], i["name"]) for i in inventory) == [("default", "a1"), ("other", "x")]
    member = api.get(api.resource("configmaps"), "a1", namespace="default")
    assert member["metadata"]["labels"]["applyset.kubernetes.io/part-of"] == set_id


def test_kubectl_applyset_id_is_computed_as_the_kep_says():
    """The id is applyset-<base64url(sha256(name.namespace.kind.group))>-v1."""
    import hashlib

    from kctl.applyset import ParentRef

    digest = hashlib.sha256(b"app.ns.Secret.").digest()
    expected = "applyset-" + base64.urlsafe_b64encode(digest).decode().rstrip("=") + "-v1"
    assert ParentRef(kind="Secret", namespace="ns", name="app").id == expected


def test_recreated_object_is_not_pruned(run, api, tmp_path):
    """An object deleted and re-created by someone else (new uid) is not pruned, though it has the name."""
    team_a = folder(tmp_path, "team-a", {"a1.yaml": configmap("a1"), "a2.yaml": configmap("a2")})
    assert run("apply", "-f", str(team_a), "--prune", "--all").returncode == 0
    assert run("delete", "cm", "a2").returncode == 0
    assert run("apply", "-f", "-", input=configmap("a2", labels="{}")).returncode == 0
    (team_a / "a2.yaml").unlink()
    result = run("apply", "-f", str(team_a), "--prune", "--all")
    assert result.returncode == 0 and "pruned" not in result.stdout, result.stdout
    assert exists(api, "configmaps", "a2")


@pytest.mark.parametrize("args,message", [
    (["--prune"], "without explicitly passing --all"),
    (["--applyset=x"], "--applyset requires --prune"),
    (["--prune", "--applyset=deployments/x"], "must be a Secret or a ConfigMap"),
    (["--prune", "--applyset=Bad_Name"], "not a valid object name"),
], ids=["prune-alone", "applyset-without-prune", "parent-kind", "parent-name"])
def test_bad_prune_options_are_refused(run, tmp_path, args, message):
    """Wrong --prune/--applyset combinations get one line and a non-zero exit; nothing is applied."""
    team_a = folder(tmp_path, "team-a", {"a1.yaml": configmap("a1")})
    result = run("apply", "-f", str(team_a), *args)
    assert result.returncode != 0 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert run("get", "cm", "a1").returncode != 0


def test_stdin_prune_needs_an_applyset_name(run):
    """`-f -` with --prune --all has no apply-set to derive: one clear error, nothing written."""
    result = run("apply", "-f", "-", "--prune", "--all", input=configmap("a1"))
    assert result.returncode == 1 and "needs --applyset=NAME" in result.stderr, result.stderr
    named = run("apply", "-f", "-", "--prune", "--applyset=piped", input=configmap("a1"))
    assert named.returncode == 0 and named.stdout == "configmap/a1 created\n", named.stderr


def test_parent_of_another_tool_is_refused(run, api):
    """A parent that another tool manages (or a plain Secret of that name) is not taken over."""
    run("apply", "-f", "-", input="apiVersion: v1\nkind: Secret\nmetadata: {name: taken}\n")
    result = run("apply", "-f", "-", "--prune", "--applyset=taken", input=configmap("a1"))
    assert result.returncode == 1 and "is not the parent of this apply-set" in result.stderr, result.stderr
    assert not exists(api, "configmaps", "a1")
