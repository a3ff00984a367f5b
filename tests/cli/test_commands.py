"""The kctl commands end to end on a real SQLite store: output lines and exit statuses."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap

import pytest

DEPLOY = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: web
      labels: {app: web, tier: front}
    spec:
      replicas: 2
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          containers:
          - name: httpd
            image: busybox:1.36
            args: ["httpd", "-f"]
    """)

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: v\n"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_apply_created_configured_unchanged(kctl, tmp_path):
    """apply prints kubectl's result word per document."""
    f = write(tmp_path, "d.yaml", DEPLOY)
    assert kctl("apply", "-f", f).out == "deployment.apps/web created\n"
    assert kctl("apply", "-f", f).out == "deployment.apps/web unchanged\n"
    f2 = write(tmp_path, "d2.yaml", DEPLOY.replace("replicas: 2", "replicas: 3"))
    assert kctl("apply", "-f", f2).out == "deployment.apps/web configured\n"
    assert kctl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}").out == "3"


def test_apply_removes_field_dropped_from_manifest(kctl, tmp_path):
    """A label removed from the manifest is removed; one set by someone else stays."""
    kctl("apply", "-f", write(tmp_path, "a.yaml", DEPLOY))
    assert kctl("label", "deploy", "web", "owner=ops").code == 0
    kctl("apply", "-f", write(tmp_path, "b.yaml", DEPLOY.replace(", tier: front", "")))
    labels = json.loads(kctl("get", "deploy", "web", "-o", "json").out)["metadata"]["labels"]
    assert labels == {"app": "web", "owner": "ops"}


def test_apply_directory_recursive_stdin_json_and_list(kctl, tmp_path):
    """-f DIR (-R), -f - (stdin), JSON documents and List objects all apply."""
    (tmp_path / "dir" / "sub").mkdir(parents=True)
    write(tmp_path, "dir/a.yaml", CM.format(name="a"))
    write(tmp_path, "dir/sub/b.yaml", CM.format(name="b"))
    assert kctl("apply", "-f", str(tmp_path / "dir")).out == "configmap/a created\n"
    assert kctl("apply", "-R", "-f", str(tmp_path / "dir")).out == "configmap/a unchanged\nconfigmap/b created\n"
    doc = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}}]}
    result = kctl("apply", "-f", "-", input=json.dumps(doc))
    assert result.out == "configmap/c created\nconfigmap/d created\n", result.err


@pytest.mark.parametrize("mode,suffix", [("client", " (dry run)"), ("server", " (server dry run)")],
                         ids=["client", "server"])
def test_apply_dry_run_writes_nothing(kctl, tmp_path, mode, suffix):
    """--dry-run prints what would happen and stores nothing."""
    out = kctl("apply", "--dry-run", mode, "-f", write(tmp_path, "d.yaml", DEPLOY)).out
    assert out == f"deployment.apps/web created{suffix}\n"
    assert kctl("get", "deploy", "web").code == 3


def test_apply_prune(kctl, tmp_path):
    """--prune -l deletes objects this file's apply-set applied before that it no longer holds."""
    both = CM.format(name="a").replace("name: a", "name: a\n  labels: {set: x}") + "---\n" + \
        CM.format(name="b").replace("name: b", "name: b\n  labels: {set: x}")
    kctl("apply", "--prune", "-l", "set=x", "-f", write(tmp_path, "set.yaml", both))
    kctl("create", "-f", write(tmp_path, "c.yaml",
                               CM.format(name="c").replace("name: c", "name: c\n  labels: {set: x}")))
    one = CM.format(name="a").replace("name: a", "name: a\n  labels: {set: x}")
    result = kctl("apply", "--prune", "-l", "set=x", "-f", write(tmp_path, "set.yaml", one))
    assert result.out == "configmap/a unchanged\nconfigmap/b pruned\n", result.err
    names = kctl("get", "cm", "-o", "name").out.split()
    assert names == ["configmap/a", "configmap/c"]  # c was never applied: not pruned


def test_apply_bad_document_names_file_and_field(kctl, tmp_path):
    """An invalid document gets one line naming file, document and field; the others are applied."""
    bad = DEPLOY.replace("replicas: 2", "replicas: two")
    f = write(tmp_path, "mixed.yaml", CM.format(name="ok") + "---\n" + bad)
    result = kctl("apply", "-f", f)
    assert result.code == 6
    assert result.out == "configmap/ok created\n"
    line, = result.err.strip().splitlines()
    assert f in line and "document 2" in line and "spec.replicas" in line


def test_apply_atomic_writes_all_or_nothing(kctl, tmp_path):
    """--atomic: one bad document means nothing is written."""
    bad = DEPLOY.replace("replicas: 2", "replicas: two")
    f = write(tmp_path, "mixed.yaml", CM.format(name="ok") + "---\n" + bad)
    result = kctl("apply", "--atomic", "-f", f)
    assert result.code == 6 and "no document was written" in result.err
    assert kctl("get", "cm", "ok").code == 3


@pytest.mark.parametrize("payload,needle", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(64), "binary"),
    (b"a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
     b"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
     b"g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n", ""),
    (b"[" * 5000 + b"]" * 5000, "deep"),
    (b"kind: [unclosed\n", "line"),
    (b"- just\n- a list\n", "mapping"),
], ids=["binary", "yaml-bomb", "deep-nesting", "syntax", "not-a-mapping"])
def test_bad_input_is_one_line_without_traceback(kctl, payload, needle):
    """Garbage, bombs and deep nesting give one clear line and a non-zero exit; nothing written."""
    result = kctl("apply", "-f", "-", input=payload)
    assert result.code != 0
    assert "Traceback" not in result.err and len(result.err.strip().splitlines()) == 1, result.err
    assert needle.lower() in result.err.lower()
    assert kctl("get", "cm", "-A", "-o", "name").out == ""


def test_create_existing_is_already_exists(kctl, tmp_path):
    """create of an existing object exits 4 (AlreadyExists)."""
    f = write(tmp_path, "c.yaml", CM.format(name="a"))
    assert kctl("create", "-f", f).code == 0
    result = kctl("create", "-f", f)
    assert result.code == 4 and "already exists" in result.err


def test_get_formats(kctl, tmp_path):
    """get: table, wide, name, yaml that applies back unchanged, json, custom-columns."""
    f = write(tmp_path, "d.yaml", DEPLOY)
    kctl("apply", "-f", f)
    table = kctl("get", "deployments").out.splitlines()
    assert table[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert table[1].split()[:2] == ["web", "0/2"]
    assert "SELECTOR" in kctl("get", "deploy", "-o", "wide").out
    assert kctl("get", "deploy", "-o", "name").out == "deployment.apps/web\n"
    yaml_out = kctl("get", "deploy", "web", "-o", "yaml").out
    assert kctl("apply", "-f", "-", input=yaml_out).out == "deployment.apps/web unchanged\n"
    assert json.loads(kctl("get", "deploy", "-o", "json").out)["kind"] == "List"
    cols = kctl("get", "deploy", "-o", "custom-columns=N:.metadata.name,IMG:.spec.template.spec.containers[*].image")
    assert cols.out.split() == ["N", "IMG", "web", "busybox:1.36"]


def test_get_selectors_and_namespaces(kctl, tmp_path):
    """-l, --field-selector, -n and -A choose what is listed."""
    docs = [CM.format(name="a").replace("name: a", "name: a\n  labels: {app: x}"),
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n",
            CM.format(name="b").replace("name: b", "name: b\n  namespace: other\n  labels: {app: 'y'}")]
    kctl("apply", "-f", write(tmp_path, "all.yaml", "---\n".join(docs)))
    assert kctl("get", "cm", "-l", "app=x", "-o", "name").out == "configmap/a\n"
    assert kctl("get", "cm", "-n", "other", "-o", "name").out == "configmap/b\n"
    assert kctl("get", "cm", "-A", "--field-selector", "metadata.namespace=other", "-o", "name").out == "configmap/b\n"
    assert kctl("get", "cm", "-A", "-l", "app in (x,y)", "-o", "name").out == "configmap/a\nconfigmap/b\n"
    empty = kctl("get", "cm", "-l", "app=none")
    assert empty.out == "" and "No resources found in default namespace." in empty.err
    assert kctl("get", "cm", "-l", "app in (x").code == 1


def test_get_missing_is_not_found(kctl):
    """get of a missing name exits 3 with kubectl's message."""
    result = kctl("get", "pod", "nope")
    assert result.code == 3 and 'pods "nope" not found' in result.err


def test_get_unknown_type(kctl):
    """An unknown resource type is a clear error."""
    result = kctl("get", "widgets")
    assert result.code == 1 and 'doesn\'t have a resource type "widgets"' in result.err


def test_describe_shows_fields_and_events(kctl, tmp_path):
    """describe renders the object and its events."""
    kctl("apply", "-f", write(tmp_path, "d.yaml", DEPLOY))
    uid = json.loads(kctl("get", "deploy", "web", "-o", "json").out)["metadata"]["uid"]
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1"}, "type": "Normal",
             "reason": "ScalingReplicaSet", "message": "Scaled up replica set web-abc to 2",
             "involvedObject": {"kind": "Deployment", "name": "web", "namespace": "default", "uid": uid},
             "source": {"component": "deployment-controller"}, "count": 1}
    kctl("create", "-f", "-", input=json.dumps(event))
    out = kctl("describe", "deploy", "web").out
    assert "Name:" in out and "web" in out and "ScalingReplicaSet" in out and "Scaled up replica set" in out


def test_delete_variants(kctl, tmp_path):
    """delete by name, by -l, by -f, and --all."""
    docs = "---\n".join(CM.format(name=n).replace(f"name: {n}", f"name: {n}\n  labels: {{g: '{g}'}}")
                        for n, g in [("a", 1), ("b", 2), ("c", 3), ("d", 3)])
    assert kctl("apply", "-f", write(tmp_path, "all.yaml", docs)).code == 0
    assert kctl("delete", "cm", "a").out == 'configmap "a" deleted\n'
    assert kctl("delete", "cm", "-l", "g=2").out == 'configmap "b" deleted\n'
    assert kctl("delete", "-f", write(tmp_path, "c.yaml", CM.format(name="c"))).out == 'configmap "c" deleted\n'
    assert kctl("delete", "cm", "--all").out == 'configmap "d" deleted\n'
    assert kctl("delete", "cm", "a").code == 3
    assert kctl("delete", "cm", "a", "--ignore-not-found").code == 0


def test_delete_cascade_orphan(kctl, tmp_path):
    """--cascade=orphan keeps dependents and strips their ownerReference."""
    kctl("apply", "-f", write(tmp_path, "d.yaml", DEPLOY))
    uid = json.loads(kctl("get", "deploy", "web", "-o", "json").out)["metadata"]["uid"]
    child = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "child", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": uid}]}}
    kctl("create", "-f", "-", input=json.dumps(child))
    assert kctl("delete", "deploy", "web", "--cascade", "orphan").code == 0
    assert "ownerReferences" not in json.loads(kctl("get", "cm", "child", "-o", "json").out)["metadata"]


def test_delete_wait_times_out_on_finalizer(kctl, tmp_path):
    """--wait with --timeout gives up (exit 9) while a finalizer holds the object."""
    cm = CM.format(name="held").replace("name: held", "name: held\n  finalizers: [example.com/hold]")
    kctl("apply", "-f", write(tmp_path, "h.yaml", cm))
    result = kctl("delete", "cm", "held", "--timeout", "0.3")
    assert result.code == 9 and "timed out" in result.err
    assert kctl("delete", "cm", "held", "--no-wait").code == 0


def test_diff_exit_status(kctl, tmp_path):
    """diff exits 0 with no differences and 1 with a unified diff of them."""
    f = write(tmp_path, "d.yaml", DEPLOY)
    kctl("apply", "-f", f)
    assert kctl("diff", "-f", f).code == 0
    changed = kctl("diff", "-f", write(tmp_path, "d2.yaml", DEPLOY.replace("replicas: 2", "replicas: 5")))
    assert changed.code == 1
    assert "-  replicas: 2" in changed.out and "+  replicas: 5" in changed.out
    assert kctl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}").out == "2"


@pytest.mark.parametrize("type_,patch,path,expect", [
    ("merge", '{"spec":{"replicas":4}}', "{.spec.replicas}", "4"),
    ("json", '[{"op":"replace","path":"/spec/replicas","value":5}]', "{.spec.replicas}", "5"),
    ("strategic", '{"spec":{"template":{"spec":{"containers":[{"name":"httpd","image":"busybox:2"}]}}}}',
     "{.spec.template.spec.containers[*].image}", "busybox:2"),
], ids=["merge", "json", "strategic"])
def test_patch(kctl, tmp_path, type_, patch, path, expect):
    """patch --type merge|json|strategic changes the stored object."""
    kctl("apply", "-f", write(tmp_path, "d.yaml", DEPLOY))
    result = kctl("patch", "deploy", "web", "--type", type_, "-p", patch)
    assert result.out == "deployment.apps/web patched\n", result.err
    assert kctl("get", "deploy", "web", "-o", f"jsonpath={path}").out == expect


def test_patch_invalid_value_is_invalid(kctl, tmp_path):
    """A patch that breaks the schema exits 6 and names the field."""
    kctl("apply", "-f", write(tmp_path, "d.yaml", DEPLOY))
    result = kctl("patch", "deploy", "web", "--type", "merge", "-p", '{"spec":{"replicas":"x"}}')
    assert result.code == 6 and "spec.replicas" in result.err


def test_label_and_annotate(kctl, tmp_path):
    """label/annotate add, refuse to overwrite without --overwrite, and remove with key-."""
    kctl("apply", "-f", write(tmp_path, "c.yaml", CM.format(name="a")))
    assert kctl("label", "cm", "a", "x=1").out == "configmap/a labeled\n"
    refused = kctl("label", "cm", "a", "x=2")
    assert refused.code != 0 and "--overwrite" in refused.err
    assert kctl("label", "cm", "a", "x=2", "--overwrite").code == 0
    assert kctl("annotate", "cm/a", "note=hi").out == "configmap/a annotated\n"
    kctl("label", "cm", "a", "x-")
    meta = json.loads(kctl("get", "cm", "a", "-o", "json").out)["metadata"]
    assert "x" not in (meta.get("labels") or {}) and meta["annotations"]["note"] == "hi"


def test_edit_with_editor(kctl, tmp_path, monkeypatch):
    """edit runs $EDITOR (no shell) on the object and stores the result."""
    editor = tmp_path / "editor.py"
    editor.write_text(f"#!{sys.executable}\nimport sys\np = sys.argv[1]\n"
                      "s = open(p).read().replace('k: v', 'k: edited')\nopen(p, 'w').write(s)\n")
    editor.chmod(0o755)
    kctl("apply", "-f", write(tmp_path, "c.yaml", CM.format(name="a")))
    monkeypatch.setenv("EDITOR", str(editor))
    assert kctl("edit", "cm", "a").out == "configmap/a edited\n"
    assert kctl("get", "cm", "a", "-o", "jsonpath={.data.k}").out == "edited"


def test_explain(kctl):
    """explain prints the kind's fields and a field's description."""
    out = kctl("explain", "deployment.spec.strategy").out
    assert "Deployment" in out and "rollingUpdate" in out
    assert kctl("explain", "pod.spec.nosuchfield").code != 0


def test_api_resources_version_completion(kctl):
    """api-resources lists kinds; version and completion print."""
    out = kctl("api-resources").out
    assert "deployments" in out and "apps/v1" in out and "mutatingadmissionhooks" in out
    assert "Client Version: v" in kctl("version").out
    assert "_KCTL_COMPLETE" in kctl("completion", "bash").out


def test_backup_restore_vacuum(kctl, tmp_path, store_path):
    """backup writes a 0600 copy; restore brings back its objects; vacuum keeps them."""
    kctl("apply", "-f", write(tmp_path, "a.yaml", CM.format(name="a")))
    backup = tmp_path / "backup.db"
    assert kctl("backup", str(backup)).code == 0
    assert stat.S_IMODE(os.stat(backup).st_mode) == 0o600
    kctl("delete", "cm", "a")
    assert kctl("restore", str(backup)).code == 0
    assert kctl("get", "cm", "a", "-o", "name").out == "configmap/a\n"
    assert kctl("vacuum").code == 0
    assert kctl("get", "cm", "a", "-o", "name").out == "configmap/a\n"


def test_hooks_from_examples(kctl, tmp_path):
    """The example hooks: the mutating one labels objects, the validating one refuses :latest (exit 7)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    hooks_dir = os.path.join(root, "examples", "hooks")
    text = open(os.path.join(hooks_dir, "hooks.yaml")).read().replace("@HOOKS_DIR@", hooks_dir)
    assert kctl("apply", "-f", "-", input=text).code == 0
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "busybox:latest"}]}}
    refused = kctl("apply", "-f", "-", input=json.dumps(pod))
    assert refused.code == 7 and "latest" in refused.err
    pod["spec"]["containers"][0]["image"] = "busybox:1.36"
    assert kctl("apply", "-f", "-", input=json.dumps(pod)).code == 0
    labels = json.loads(kctl("get", "pod", "p", "-o", "json").out)["metadata"]["labels"]
    assert labels.get("kctl.io/managed") == "true"


def test_jsonpath_on_a_list_query_sees_the_list_and_o_equals_works(kctl) -> None:
    """`get KIND -o jsonpath` renders against the List (as kubectl), even for one object; `-o=FMT` is accepted."""
    kctl("create", "-f", "-", input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: only}\n")
    assert kctl("get", "cm", "-o", "jsonpath={.items[0].metadata.name}").out == "only"
    assert kctl("get", "cm", "-o", "jsonpath={.metadata.name}").out == ""
    assert kctl("get", "cm", "only", "-o=jsonpath={.metadata.name}").out == "only"
    assert kctl("get", "cm", "-o=name").out == "configmap/only\n"


def test_create_namespace_by_name(kctl) -> None:
    """`create namespace NAME` makes a Namespace; again: AlreadyExists; other generators: usage error."""
    assert kctl("create", "namespace", "team-a").out == "namespace/team-a created\n"
    assert kctl("create", "ns", "team-a").code == 4
    refused = kctl("create", "configmap", "x")
    assert refused.code == 2 and "kctl create namespace NAME" in refused.err
