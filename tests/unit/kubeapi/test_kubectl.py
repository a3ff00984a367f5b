"""The real kubectl against the in-process HTTPS API (no Podman): get, watch, apply, patch, edit, diff, scale..."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
DEPLOYMENT = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: web
      labels: {app: web}
    spec:
      replicas: 2
      selector:
        matchLabels: {app: web}
      template:
        metadata:
          labels: {app: web}
        spec:
          containers:
          - name: c
            image: busybox
    """)


def _ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"kubectl exited {result.returncode}: {result.stderr}"
    return result.stdout


@pytest.fixture
def deployment(kubeapi, tmp_path) -> Path:
    """A Deployment manifest, applied."""
    path = tmp_path / "deploy.yaml"
    path.write_text(DEPLOYMENT)
    assert "deployment.apps/web created" in _ok(kubeapi.kubectl("apply", "-f", str(path)))
    return path


def test_get_namespaces_and_pods_across_namespaces(kubeapi):
    """`kubectl get ns` lists the namespaces in kubectl's columns; `get pods -A` says there are none."""
    out = _ok(kubeapi.kubectl("get", "ns"))
    assert out.splitlines()[0].split() == ["NAME", "STATUS", "AGE"] or out.splitlines()[0].split() == ["NAME", "AGE"]
    assert "default" in out
    result = kubeapi.kubectl("get", "pods", "-A")
    assert result.returncode == 0 and "No resources found" in result.stderr


def test_apply_examples_then_get_everything(kubeapi):
    """`kubectl apply -f examples/web` creates every object (namespace first); a second apply changes nothing."""
    out = _ok(kubeapi.kubectl("apply", "-f", str(EXAMPLES / "web")))
    assert "namespace/demo created" in out and "deployment.apps/web created" in out
    again = _ok(kubeapi.kubectl("apply", "-f", str(EXAMPLES / "web")))
    assert "deployment.apps/web unchanged" in again and "namespace/demo unchanged" in again
    listing = _ok(kubeapi.kubectl("get", "deploy,svc,cm", "-n", "demo", "-o", "name"))
    assert {"deployment.apps/web", "service/web", "configmap/web-content"} <= set(listing.split())


def test_create_from_a_file(kubeapi, tmp_path):
    """`kubectl create -f` posts the object; creating it again is AlreadyExists from the server."""
    path = tmp_path / "cm.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n")
    assert "configmap/c created" in _ok(kubeapi.kubectl("create", "-f", str(path)))
    again = kubeapi.kubectl("create", "-f", str(path))
    assert again.returncode == 1 and 'Error from server (AlreadyExists): error when creating' in again.stderr


@pytest.mark.parametrize("patch_type,patch,label", [
    ("merge", '{"metadata":{"labels":{"m":"1"}}}', "m=1"),
    ("strategic", '{"metadata":{"labels":{"s":"2"}}}', "s=2"),
    ("json", '[{"op":"add","path":"/metadata/labels/j","value":"3"}]', "j=3"),
], ids=["merge", "strategic", "json"])
def test_patch_three_types(kubeapi, deployment, patch_type, patch, label):
    """`kubectl patch --type=merge|strategic|json` each change the object."""
    assert "deployment.apps/web patched" in _ok(kubeapi.kubectl("patch", "deploy", "web", "--type", patch_type,
                                                                "-p", patch))
    assert label in _ok(kubeapi.kubectl("get", "deploy", "web", "--show-labels"))


def test_scale_deployment(kubeapi, deployment):
    """`kubectl scale deploy` goes through the scale subresource."""
    assert "deployment.apps/web scaled" in _ok(kubeapi.kubectl("scale", "deploy", "web", "--replicas=5"))
    assert _ok(kubeapi.kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}")) == "5"


def test_edit_with_a_scripted_editor(kubeapi, deployment, tmp_path):
    """`kubectl edit` with KUBE_EDITOR a script that adds a label: the edit is saved."""
    editor = tmp_path / "editor.py"
    editor.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import sys
        path = sys.argv[-1]
        text = open(path).read()
        text = text.replace("\\n  labels:\\n", "\\n  labels:\\n    edited: \\"yes\\"\\n", 1)
        open(path, "w").write(text)
        """))
    editor.chmod(0o755)
    out = _ok(kubeapi.kubectl("edit", "deploy", "web", env={"KUBE_EDITOR": str(editor), "EDITOR": str(editor)}))
    assert "deployment.apps/web edited" in out
    assert "edited=yes" in _ok(kubeapi.kubectl("get", "deploy", "web", "--show-labels"))


def test_diff_is_a_server_side_dry_run(kubeapi, deployment, tmp_path):
    """`kubectl diff`: nothing to show for the applied manifest (exit 0); a change shows (exit 1), unsaved."""
    assert kubeapi.kubectl("diff", "-f", str(deployment)).returncode == 0
    changed = tmp_path / "changed.yaml"
    changed.write_text(DEPLOYMENT.replace("replicas: 2", "replicas: 7"))
    result = kubeapi.kubectl("diff", "-f", str(changed))
    assert result.returncode == 1, result.stderr
    assert "-  replicas: 2" in result.stdout and "+  replicas: 7" in result.stdout
    assert _ok(kubeapi.kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}")) == "2"


def test_delete_with_foreground_cascade(kubeapi, deployment):
    """`kubectl delete --cascade=foreground` deletes the Deployment."""
    out = _ok(kubeapi.kubectl("delete", "deploy", "web", "--cascade=foreground", "--timeout=60s"))
    assert 'deployment.apps "web" deleted' in out
    missing = kubeapi.kubectl("get", "deploy", "web")
    assert missing.returncode == 1 and 'deployments.apps "web" not found' in missing.stderr


def test_get_watch_prints_changes(kubeapi, deployment):
    """`kubectl get -w` prints the current rows, then a row per change (read the first lines, then stop it)."""
    proc = subprocess.Popen([KUBECTL, "--kubeconfig", str(kubeapi.kubeconfig), "get", "deploy", "-w",
                             "--output-watch-events"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    guard = threading.Timer(90, proc.kill)  # a line that never comes fails the test instead of hanging it
    guard.start()
    try:
        header = proc.stdout.readline()
        first = proc.stdout.readline()
        assert header.split()[:2] == ["EVENT", "NAME"], header
        assert first.split()[:2] == ["ADDED", "web"], first
        _ok(kubeapi.kubectl("scale", "deploy", "web", "--replicas=4"))
        change = proc.stdout.readline()
        assert change.split()[:2] == ["MODIFIED", "web"], change
    finally:
        guard.cancel()
        proc.kill()
        proc.communicate(timeout=30)


def test_server_errors_are_printed_as_kubectl_prints_them(kubeapi):
    """A NotFound comes back as `Error from server (NotFound): ...` (the Status reached kubectl)."""
    result = kubeapi.kubectl("get", "configmap", "nope")
    assert result.returncode == 1
    assert result.stderr.strip() == 'Error from server (NotFound): configmaps "nope" not found'


def test_dry_run_server(kubeapi, tmp_path):
    """`kubectl apply --dry-run=server` reports and stores nothing."""
    path = tmp_path / "cm.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dry\n")
    assert "configmap/dry created (server dry run)" in _ok(kubeapi.kubectl("apply", "--dry-run=server", "-f",
                                                                           str(path)))
    assert kubeapi.kubectl("get", "cm", "dry").returncode == 1


def test_strict_field_validation_of_kubectl(kubeapi, tmp_path):
    """kubectl sends fieldValidation=Strict: an unknown field is refused with the server's strict decoding error."""
    path = tmp_path / "bad.yaml"
    path.write_text(DEPLOYMENT.replace("replicas: 2", "replicas: 2\n  replicaz: 3"))
    result = kubeapi.kubectl("create", "-f", str(path))
    assert result.returncode == 1
    assert 'strict decoding error: unknown field "spec.replicaz"' in result.stderr


def test_get_output_json_is_the_stored_object(kubeapi, deployment):
    """`kubectl get -o json` prints the object as stored (uid, resourceVersion)."""
    obj = json.loads(_ok(kubeapi.kubectl("get", "deploy", "web", "-o", "json")))
    stored = kubeapi.api.get(kubeapi.api.resource("deployments"), "web", namespace="default")
    assert obj["metadata"]["uid"] == stored["metadata"]["uid"]
    assert obj["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


def test_typed_client_creates_in_protobuf(kubeapi):
    """`kubectl create namespace|configmap|secret|serviceaccount` post protobuf bodies: each object is stored as
    kubectl built it."""
    _ok(kubeapi.kubectl("create", "namespace", "team"))
    _ok(kubeapi.kubectl("create", "configmap", "c", "-n", "team", "--from-literal=a=b", "--from-literal=c=d"))
    _ok(kubeapi.kubectl("create", "secret", "generic", "s", "-n", "team", "--from-literal=pw=hunter2"))
    _ok(kubeapi.kubectl("create", "serviceaccount", "robot", "-n", "team"))
    api = kubeapi.api
    assert api.get(api.resource("namespaces"), "team")["metadata"]["name"] == "team"
    assert api.get(api.resource("configmaps"), "c", namespace="team")["data"] == {"a": "b", "c": "d"}
    secret = api.get(api.resource("secrets"), "s", namespace="team")
    assert secret["data"] == {"pw": "aHVudGVyMg=="} and secret["type"] == "Opaque"
    assert api.get(api.resource("serviceaccounts"), "robot", namespace="team")["metadata"]["namespace"] == "team"


def test_typed_client_kinds_kctl_cannot_read_in_protobuf_are_415(kubeapi):
    """A protobuf body of a kind kctl does not read in protobuf (every `kubectl create` kind is read now): 415 with
    one clear message."""
    body = b"k8s\x00" + b"\x0a\x1b\x0a\x02v1\x12\x15ReplicationController" + b"\x12\x00"
    reply = kubeapi.request("POST", "/api/v1/namespaces/default/configmaps", body=body,
                            content_type="application/vnd.kubernetes.protobuf")
    assert reply.status == 415
    assert "kctl's API does not read ReplicationController in protobuf: send it as JSON" in reply.json()["message"]


def test_typed_create_of_quota_is_read(kubeapi):
    """`kubectl create quota` posts a protobuf ResourceQuota: it is stored as kubectl built it."""
    _ok(kubeapi.kubectl("create", "quota", "q", "--hard=pods=1,requests.cpu=2"))
    quota = kubeapi.api.get(kubeapi.api.resource("resourcequotas"), "q", namespace="default")
    assert quota["spec"]["hard"] == {"pods": "1", "requests.cpu": "2"}


def _subset_differences(sent, stored, path: str = "") -> list[str]:
    """Where `stored` lacks or changes something `sent` has (empty values aside: the server may drop them)."""
    if isinstance(sent, dict):
        return [d for key, value in sent.items() if value not in ({}, [], None)
                for d in (_subset_differences(value, stored.get(key), f"{path}.{key}")
                          if isinstance(stored, dict) and key in stored else [f"{path}.{key} missing"])]
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(stored) != len(sent):
            return [f"{path}: {sent!r} != {stored!r}"]
        return [d for i, (a, b) in enumerate(zip(sent, stored)) for d in _subset_differences(a, b, f"{path}[{i}]")]
    return [] if sent == stored else [f"{path}: {sent!r} != {stored!r}"]


@pytest.mark.parametrize("args", [
    ("deployment", "web", "--image=busybox", "--replicas=0", "--port=8080", "--", "sleep", "10"),
    ("job", "once", "--image=busybox", "--", "echo", "hi"),
    ("cronjob", "tick", "--image=busybox", "--schedule=*/5 * * * *", "--", "date"),
    ("service", "clusterip", "web", "--tcp=80:8080", "--tcp=443:https"),
    ("service", "nodeport", "np", "--tcp=80:8080", "--node-port=30111"),
], ids=["deployment", "job", "cronjob", "service-clusterip", "service-nodeport"])
def test_typed_client_workloads_arrive_as_kubectl_built_them(kubeapi, args):
    """`kubectl create deployment|job|cronjob|service` (protobuf bodies): what the server stores holds every field
    kubectl's own client-side rendering has, with the same values (replicas 0, a named targetPort, a command)."""
    split = args.index("--") if "--" in args else len(args)
    head, tail = list(args[:split]), list(args[split:])
    sent = json.loads(_ok(kubeapi.kubectl("create", *head, "--dry-run=client", "-o", "json", *tail)))
    stored = json.loads(_ok(kubeapi.kubectl("create", *head, "-o", "json", *tail)))
    for key in ("status", "metadata"):
        sent.pop(key, None)
    assert _subset_differences(sent, stored) == []


def test_drain_evicts_through_protobuf_evictions(kubeapi):
    """`kubectl drain` cordons the node and evicts its pods (policy/v1 Eviction bodies in protobuf)."""
    _ok(kubeapi.kubectl("apply", "-f", "-", input='{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}'))
    _ok(kubeapi.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}})))
    out = _ok(kubeapi.kubectl("drain", "n1", "--force", "--grace-period=0", "--timeout=60s", timeout=90))
    assert "pod/p1 evicted" in out and "node/n1 drained" in out
    assert kubeapi.api.find(kubeapi.api.resource("pods"), "p1", namespace="default") is None
    assert kubeapi.api.get(kubeapi.api.resource("nodes"), "n1")["spec"]["unschedulable"] is True
