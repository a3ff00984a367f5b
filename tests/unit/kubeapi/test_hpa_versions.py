"""autoscaling/v1 HorizontalPodAutoscalers over the HTTPS API: kubectl autoscale (1.32), reads and writes at v1.

The HPA is stored as autoscaling/v2 (kctl.machinery.hpaconversion); a client asking at
/apis/autoscaling/v1 gets v1 objects, lists, watch events and Tables, as kube-apiserver serves them.
"""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
V2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
V1_HPA = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
          "metadata": {"name": "web", "namespace": "default"},
          "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                   "minReplicas": 2, "maxReplicas": 5, "targetCPUUtilizationPercentage": 80}}
CPU_80 = [{"type": "Resource",
           "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]


def _ok(result) -> str:
    assert result.returncode == 0, f"kubectl exited {result.returncode}: {result.stderr}"
    return result.stdout


def _stored(kubeapi) -> dict:
    return kubeapi.api.get(kubeapi.api.resource("hpa"), "web", namespace="default")


def _set_cpu_status(kubeapi, utilization: int) -> None:
    """Write the status the HPA controller would: 3 replicas, cpu at `utilization` percent."""
    hpa = _stored(kubeapi)
    hpa["status"] = {"currentReplicas": 3, "desiredReplicas": 3, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": utilization,
                                                                     "averageValue": "120m"}}}],
        "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    kubeapi.api.update_status(hpa)


def test_kubectl_autoscale_creates_a_v2_hpa(kubeapi):
    """kubectl 1.32's autoscale (an autoscaling/v1 protobuf POST) creates the HPA, stored as v2 with the cpu metric."""
    kubeapi.api.create(DEPLOYMENT)
    out = _ok(kubeapi.kubectl("autoscale", "deploy", "web", "--min=2", "--max=5", "--cpu-percent=80"))
    assert "horizontalpodautoscaler.autoscaling/web autoscaled" in out
    hpa = _stored(kubeapi)
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["minReplicas"] == 2 and hpa["spec"]["maxReplicas"] == 5
    assert hpa["spec"]["metrics"] == CPU_80
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def test_kubectl_get_hpa_prints_targets(kubeapi):
    """kubectl get hpa prints TARGETS `cpu: <unknown>/80%` before a status and `cpu: 45%/80%` after it."""
    kubeapi.api.create(DEPLOYMENT)
    _ok(kubeapi.kubectl("autoscale", "deploy", "web", "--min=2", "--max=5", "--cpu-percent=80"))
    before = _ok(kubeapi.kubectl("get", "hpa"))
    assert "TARGETS" in before.splitlines()[0]
    assert "cpu: <unknown>/80%" in before
    _set_cpu_status(kubeapi, 45)
    after = _ok(kubeapi.kubectl("get", "hpa", "web"))
    row = after.splitlines()[1].split()
    assert row[:2] == ["web", "Deployment/web"]
    assert "cpu: 45%/80%" in after


def test_get_and_list_at_v1_answer_v1(kubeapi):
    """GET and list at /apis/autoscaling/v1 answer v1 objects; the v2 path still answers the stored v2 object."""
    kubeapi.api.create(V1_HPA)
    _set_cpu_status(kubeapi, 45)
    one = kubeapi.request("GET", f"{V1}/web")
    assert one.status == 200, one.body
    obj = one.json()
    assert obj["apiVersion"] == "autoscaling/v1"
    assert obj["spec"] == V1_HPA["spec"]
    assert obj["status"] == {"currentReplicas": 3, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 45}
    annotations = obj["metadata"]["annotations"]
    assert json.loads(annotations["autoscaling.alpha.kubernetes.io/current-metrics"]) == [
        {"type": "Resource", "resource": {"name": "cpu", "currentAverageUtilization": 45,
                                          "currentAverageValue": "120m"}}]
    assert "autoscaling.alpha.kubernetes.io/conditions" in annotations
    listed = kubeapi.request("GET", V1).json()
    assert (listed["kind"], listed["apiVersion"]) == ("HorizontalPodAutoscalerList", "autoscaling/v1")
    assert [item["apiVersion"] for item in listed["items"]] == ["autoscaling/v1"]
    assert listed["items"][0]["spec"]["targetCPUUtilizationPercentage"] == 80
    v2 = kubeapi.request("GET", f"{V2}/web").json()
    assert v2["apiVersion"] == "autoscaling/v2" and v2["spec"]["metrics"] == CPU_80
    assert "annotations" not in v2["metadata"]


def test_table_at_v1_embeds_v1_objects(kubeapi):
    """A Table asked at v1 with includeObject=Object embeds the v1 object and keeps the v2-computed TARGETS."""
    kubeapi.api.create(V1_HPA)
    reply = kubeapi.request("GET", f"{V1}?includeObject=Object",
                            headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert reply.status == 200, reply.body
    table = reply.json()
    assert table["kind"] == "Table"
    names = [c["name"] for c in table["columnDefinitions"]]
    row = table["rows"][0]
    assert row["cells"][names.index("Targets")] == "cpu: <unknown>/80%"
    assert row["object"]["apiVersion"] == "autoscaling/v1"
    assert row["object"]["spec"]["targetCPUUtilizationPercentage"] == 80


@pytest.mark.parametrize("method, path, body, content_type, expect", [
    ("POST", V1, V1_HPA, "application/json", 80),
    ("PUT", f"{V1}/web", {**V1_HPA, "spec": {**V1_HPA["spec"], "targetCPUUtilizationPercentage": 60}},
     "application/json", 60),
    ("PATCH", f"{V1}/web", {"spec": {"targetCPUUtilizationPercentage": 50}}, "application/merge-patch+json", 50),
    ("PATCH", f"{V1}/web", {"spec": {"targetCPUUtilizationPercentage": 55}},
     "application/strategic-merge-patch+json", 55),
    ("PATCH", f"{V1}/web", [{"op": "replace", "path": "/spec/targetCPUUtilizationPercentage", "value": 65}],
     "application/json-patch+json", 65),
])
def test_writes_at_v1_store_v2(kubeapi, method, path, body, content_type, expect):
    """Create, update and json/merge/strategic patches at v1 answer v1 and store the v2 cpu metric."""
    if method != "POST":
        kubeapi.api.create(V1_HPA)
    reply = kubeapi.request(method, path, body=body, content_type=content_type)
    assert reply.status in (200, 201), reply.body
    answered = reply.json()
    assert answered["apiVersion"] == "autoscaling/v1"
    assert answered["spec"]["targetCPUUtilizationPercentage"] == expect
    stored = _stored(kubeapi)
    assert stored["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == expect
    assert "targetCPUUtilizationPercentage" not in stored["spec"]


@pytest.mark.parametrize("body, content_type, message", [
    ({**V1_HPA, "apiVersion": "autoscaling/v2"}, "application/json",
     "the API version in the data (autoscaling/v2) does not match the expected API version (autoscaling/v1)"),
    ({**V1_HPA, "spec": {**V1_HPA["spec"], "maxReplicas": None}}, "application/json", "spec.maxReplicas"),
])
def test_bad_v1_writes_are_refused(kubeapi, body, content_type, message):
    """A body at another version, or a v1 HPA without maxReplicas, is refused with a Status naming the problem."""
    reply = kubeapi.request("POST", V1, body=body, content_type=content_type)
    assert reply.status in (400, 422)
    assert message in reply.json()["message"]


def test_watch_at_v1_sends_v1_events(kubeapi):
    """A watch at v1 sends its ADDED event with the v1 object."""
    kubeapi.api.create(V1_HPA)
    conn, response = kubeapi.stream(f"{V1}?watch=true&timeoutSeconds=5")
    try:
        assert response.status == 200
        event = json.loads(response.readline())
    finally:
        conn.close()
    assert event["type"] == "ADDED"
    assert event["object"]["apiVersion"] == "autoscaling/v1"
    assert event["object"]["spec"]["targetCPUUtilizationPercentage"] == 80


def test_discovery_lists_v1_with_v2_preferred(kubeapi):
    """/apis/autoscaling lists v2 (preferred) and v1; /apis/autoscaling/v1 serves horizontalpodautoscalers."""
    group = kubeapi.request("GET", "/apis/autoscaling").json()
    assert [v["version"] for v in group["versions"]] == ["v2", "v1"]
    assert group["preferredVersion"]["version"] == "v2"
    resources = kubeapi.request("GET", "/apis/autoscaling/v1").json()["resources"]
    hpa = next(r for r in resources if r["name"] == "horizontalpodautoscalers")
    assert hpa["kind"] == "HorizontalPodAutoscaler" and "create" in hpa["verbs"]
    assert "horizontalpodautoscalers/status" in [r["name"] for r in resources]


def test_kubectl_apply_v1_manifest_twice(kubeapi, tmp_path):
    """kubectl apply of a v1 manifest creates the HPA, a second apply leaves it unchanged, a change configures it."""
    manifest = tmp_path / "hpa.yaml"
    text = textwrap.dedent("""\
        apiVersion: autoscaling/v1
        kind: HorizontalPodAutoscaler
        metadata: {name: web}
        spec:
          scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
          minReplicas: 2
          maxReplicas: 5
          targetCPUUtilizationPercentage: 80
        """)
    manifest.write_text(text)
    assert "horizontalpodautoscaler.autoscaling/web created" in _ok(kubeapi.kubectl("apply", "-f", str(manifest)))
    assert "unchanged" in _ok(kubeapi.kubectl("apply", "-f", str(manifest)))
    manifest.write_text(text.replace("targetCPUUtilizationPercentage: 80", "targetCPUUtilizationPercentage: 70"))
    assert "configured" in _ok(kubeapi.kubectl("apply", "-f", str(manifest)))
    assert _stored(kubeapi)["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 70


def test_python_client_autoscaling_v1(kubeapi):
    """The official Python client's AutoscalingV1Api reads the HPA at v1 (target_cpu_utilization_percentage)."""
    import kubernetes

    kubeapi.api.create(V1_HPA)
    api_client = kubernetes.config.new_client_from_config(config_file=str(kubeapi.kubeconfig))
    try:
        hpa = kubernetes.client.AutoscalingV1Api(api_client).read_namespaced_horizontal_pod_autoscaler(
            "web", "default")
    finally:
        api_client.close()
    assert hpa.api_version == "autoscaling/v1"
    assert hpa.spec.target_cpu_utilization_percentage == 80
    assert hpa.spec.max_replicas == 5


def test_kubectl_explain_at_v1(kubeapi):
    """OpenAPI serves the v1 schema: kubectl explain at autoscaling/v1 shows targetCPUUtilizationPercentage."""
    out = _ok(kubeapi.kubectl("explain", "hpa.spec", "--api-version=autoscaling/v1"))
    assert "targetCPUUtilizationPercentage" in out
    assert "metrics" not in out.split("FIELDS:")[-1]


def test_kubectl_create_v1_with_unknown_field_is_strict_error(kubeapi):
    """kubectl create of a v1 HPA with an unknown spec field is refused by strict field validation, naming it."""
    body = {**V1_HPA, "spec": {**V1_HPA["spec"], "bogus": 1}}
    result = kubeapi.kubectl("create", "-f", "-", input=json.dumps(body))
    assert result.returncode == 1
    assert 'strict decoding error: unknown field "spec.bogus"' in result.stderr
    assert kubeapi.api.find(kubeapi.api.resource("hpa"), "web", namespace="default") is None
