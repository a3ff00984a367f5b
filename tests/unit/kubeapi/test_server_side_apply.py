"""Server-side apply through the HTTPS API with the real kubectl: create, re-apply, conflicts, --force-conflicts.

`kubectl apply --server-side` sends PATCH application/apply-patch+yaml with fieldManager=kubectl;
kctl.kubeapi routes it to APIServer.apply_server_side (kctl.apiserver.fieldmanager).
"""

from __future__ import annotations

import json

import pytest
import yaml

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: %s
"""


def _get(kubeapi, *args: str) -> dict:
    done = kubeapi.kubectl("get", *args, "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _managers(obj: dict) -> list[tuple[str, str]]:
    return [(e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields") or ()]


def test_kubectl_server_side_apply_creates_then_reapplies_a_change(kubeapi, tmp_path):
    """apply --server-side creates (manager kubectl, Apply), a re-apply with a new image configures it."""
    path = tmp_path / "web.yaml"
    path.write_text(DEPLOYMENT % "nginx:1")
    done = kubeapi.kubectl("apply", "--server-side", "-f", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "deployment.apps/web serverside-applied"
    path.write_text(DEPLOYMENT % "nginx:2")
    done = kubeapi.kubectl("apply", "--server-side", "-f", str(path))
    assert done.returncode == 0, done.stderr
    obj = _get(kubeapi, "deployment", "web", "--show-managed-fields")
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert _managers(obj) == [("kubectl", "Apply")]
    fields = obj["metadata"]["managedFields"][0]["fieldsV1"]
    assert fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"nginx"}']["f:image"] == {}


def test_managed_fields_hidden_unless_asked(kubeapi, tmp_path):
    """kubectl get -o yaml leaves managedFields out; --show-managed-fields shows the entries."""
    path = tmp_path / "web.yaml"
    path.write_text(DEPLOYMENT % "nginx:1")
    assert kubeapi.kubectl("apply", "--server-side", "-f", str(path)).returncode == 0
    plain = yaml.safe_load(kubeapi.kubectl("get", "deployment", "web", "-o", "yaml").stdout)
    assert "managedFields" not in plain["metadata"]
    shown = yaml.safe_load(kubeapi.kubectl("get", "deployment", "web", "-o", "yaml", "--show-managed-fields").stdout)
    assert shown["metadata"]["managedFields"][0]["manager"] == "kubectl"
    assert shown["metadata"]["managedFields"][0]["fieldsType"] == "FieldsV1"


def test_conflict_after_scale_then_force_conflicts_wins(kubeapi, tmp_path):
    """After kubectl scale, apply --server-side fails with kubectl's conflict text; --force-conflicts takes it."""
    path = tmp_path / "web.yaml"
    path.write_text(DEPLOYMENT % "nginx:1")
    assert kubeapi.kubectl("apply", "--server-side", "-f", str(path)).returncode == 0
    scaled = kubeapi.kubectl("scale", "deployment", "web", "--replicas=5")
    assert scaled.returncode == 0, scaled.stderr
    obj = _get(kubeapi, "deployment", "web", "--show-managed-fields")
    scaler = [m for m, op in _managers(obj) if op == "Update"]
    assert len(scaler) == 1
    done = kubeapi.kubectl("apply", "--server-side", "-f", str(path))
    assert done.returncode != 0
    assert "Apply failed with 1 conflict: conflict with" in done.stderr
    assert ".spec.replicas" in done.stderr and "Please review the fields above" in done.stderr
    assert _get(kubeapi, "deployment", "web")["spec"]["replicas"] == 5
    done = kubeapi.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    assert done.returncode == 0, done.stderr
    obj = _get(kubeapi, "deployment", "web", "--show-managed-fields")
    assert obj["spec"]["replicas"] == 2
    assert _managers(obj) == [("kubectl", "Apply")]  # the scaler owned only replicas: its entry is gone


def test_server_side_apply_over_client_side_apply_migrates(kubeapi, tmp_path):
    """An object made by kubectl apply (client side) takes a changed server-side apply without a conflict."""
    path = tmp_path / "web.yaml"
    path.write_text(DEPLOYMENT % "nginx:1")
    done = kubeapi.kubectl("apply", "-f", str(path))
    assert done.returncode == 0, done.stderr
    obj = _get(kubeapi, "deployment", "web", "--show-managed-fields")
    assert ("kubectl-client-side-apply", "Update") in _managers(obj)
    path.write_text(DEPLOYMENT % "nginx:2")
    done = kubeapi.kubectl("apply", "--server-side", "-f", str(path))
    assert done.returncode == 0, done.stderr
    obj = _get(kubeapi, "deployment", "web", "--show-managed-fields")
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    # kubectl applied the annotation as kubectl-last-applied, then moved client-side apply's fields to its entry
    assert sorted(_managers(obj)) == [("kubectl", "Apply"), ("kubectl-last-applied", "Apply")]
    annotation = obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    assert "nginx:2" in annotation


@pytest.mark.parametrize("dry_run", ["server"])
def test_server_side_apply_dry_run_writes_nothing(kubeapi, tmp_path, dry_run):
    """apply --server-side --dry-run=server answers the object and stores nothing."""
    path = tmp_path / "web.yaml"
    path.write_text(DEPLOYMENT % "nginx:1")
    done = kubeapi.kubectl("apply", "--server-side", f"--dry-run={dry_run}", "-f", str(path))
    assert done.returncode == 0, done.stderr
    assert kubeapi.kubectl("get", "deployment", "web").returncode != 0


def test_conflict_status_over_http(kubeapi):
    """A conflicting apply-patch answers 409 with a Status whose causes are FieldManagerConflict."""
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    body = yaml.safe_load(DEPLOYMENT % "nginx:1")
    first = kubeapi.request("PATCH", path + "?fieldManager=one", body=json.dumps(body),
                            content_type="application/apply-patch+yaml")
    assert first.status == 201, first.body
    body["spec"]["replicas"] = 3
    second = kubeapi.request("PATCH", path + "?fieldManager=two", body=json.dumps(body),
                             content_type="application/apply-patch+yaml")
    assert second.status == 409
    status = second.json()
    assert status["reason"] == "Conflict"
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "one": .spec.replicas'
    assert status["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "one"',
                                            "field": ".spec.replicas"}]
    forced = kubeapi.request("PATCH", path + "?fieldManager=two&force=true", body=json.dumps(body),
                             content_type="application/apply-patch+yaml")
    assert forced.status == 200 and forced.json()["spec"]["replicas"] == 3
