"""`kctl autoscale`: the HPA kubectl's generator makes, dry runs, output forms and kubectl's errors.

kubectl's autoscale reads the target from an API server even with --dry-run=client, so the
comparison test serves it (and the discovery documents kubectl asks for, with the workloads'
scale subresources) from a tiny HTTP server on a free loopback port, in a thread it stops
afterwards; skipped when kubectl is not installed. kubectl 1.33+ prints the autoscaling/v2
object kctl prints; kubectl 1.32 and older print the same HPA as autoscaling/v1, which the
test converts to v2 (the conversion Kubernetes' API server does) before comparing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kctl.manifests.yamlio import load_documents

KUBECTL = shutil.which("kubectl")


def load_all(text: str) -> list:
    return [doc for _, _, doc in load_documents(text, source="<stdout>")]


def _workload(kind: str, name: str) -> dict:
    spec: dict = {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                  "template": {"metadata": {"labels": {"app": name}},
                               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    if kind == "DaemonSet":
        del spec["replicas"]
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"}, "spec": spec}


OBJECTS = [_workload("Deployment", "web"), _workload("ReplicaSet", "rs"), _workload("StatefulSet", "db"),
           _workload("DaemonSet", "agent")]


def _resources(group_version: str, rows: list[tuple[str, str]], scalable: tuple[str, ...] = ()) -> dict:
    resources = []
    for plural, kind in rows:
        resources.append({"name": plural, "singularName": kind.lower(), "namespaced": True, "kind": kind,
                          "verbs": ["get", "list", "create"]})
        if plural in scalable:
            resources.append({"name": f"{plural}/scale", "singularName": "", "namespaced": True, "group": "autoscaling",
                              "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


DOCUMENTS = {
    "/api": {"kind": "APIVersions", "versions": ["v1"],
             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}},
        {"name": "autoscaling", "versions": [{"groupVersion": "autoscaling/v2", "version": "v2"},
                                             {"groupVersion": "autoscaling/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "autoscaling/v2", "version": "v2"}}]},
    "/api/v1": _resources("v1", [("pods", "Pod")]),
    "/apis/apps/v1": _resources("apps/v1", [("deployments", "Deployment"), ("replicasets", "ReplicaSet"),
                                            ("statefulsets", "StatefulSet"), ("daemonsets", "DaemonSet")],
                                scalable=("deployments", "replicasets", "statefulsets")),
    "/apis/autoscaling/v2": _resources("autoscaling/v2", [("horizontalpodautoscalers", "HorizontalPodAutoscaler")]),
    "/apis/autoscaling/v1": _resources("autoscaling/v1", [("horizontalpodautoscalers", "HorizontalPodAutoscaler")]),
    **{f"/apis/apps/v1/namespaces/default/{o['kind'].lower()}s/{o['metadata']['name']}": o for o in OBJECTS},
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = DOCUMENTS.get(self.path.split("?")[0])
        data = json.dumps(body if body is not None else {"kind": "Status", "apiVersion": "v1", "code": 404,
                                                         "status": "Failure", "reason": "NotFound"}).encode()
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def fake_api():
    """The URL of a fake API server answering kubectl's discovery and GETs of the workloads."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def workloads(kctl):
    """The four workloads stored for kctl."""
    applied = kctl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": OBJECTS}))
    assert applied.code == 0, applied.err


def _as_v2(hpa: dict) -> dict:
    """An autoscaling/v1 HPA as autoscaling/v2 (Kubernetes' conversion), as a dry run prints it."""
    if hpa["apiVersion"] == "autoscaling/v2":
        return hpa
    spec = dict(hpa["spec"])
    percent = spec.pop("targetCPUUtilizationPercentage", None)
    if percent is not None:
        spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": percent}}}]
    return dict(hpa, apiVersion="autoscaling/v2", spec=spec, status={"currentMetrics": None, "desiredReplicas": 0})


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
@pytest.mark.parametrize("args", [
    ["deployment", "web", "--min=2", "--max=5", "--cpu-percent=70"],
    ["deployment", "web", "--max=5"],
    ["deployment/web", "--min=0", "--max=3"],
    ["replicaset", "rs", "--max=4", "--name", "other"],
    ["statefulset", "db", "--min=1", "--max=3", "--cpu-percent=50"],
], ids=["min-max-cpu", "max-only", "zero-min-omitted", "replicaset-named", "statefulset"])
def test_same_object_as_kubectl(kctl, workloads, fake_api, tmp_path, args):
    """For each set of flags, kctl prints the object kubectl's generator makes (as autoscaling/v2)."""
    expected = subprocess.run([KUBECTL, "--server", fake_api, "--cache-dir", str(tmp_path / "cache"), "autoscale",
                               *args, "--dry-run=client", "-o", "yaml"], capture_output=True, text=True, timeout=60)
    assert expected.returncode == 0, expected.stderr
    got = kctl("autoscale", *args, "--dry-run=client", "-o", "yaml")
    assert got.code == 0, got.err
    assert load_all(got.out) == [_as_v2(d) for d in load_all(expected.stdout)]


def test_dry_run_yaml_exact(kctl, workloads):
    """The client-side dry run prints kubectl 1.33+'s autoscaling/v2 YAML, byte for byte."""
    got = kctl("autoscale", "deployment", "web", "--min=2", "--max=5", "--cpu-percent=70", "--dry-run=client",
               "-o", "yaml")
    assert got.code == 0, got.err
    assert got.out == """apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  creationTimestamp: null
  name: web
spec:
  maxReplicas: 5
  metrics:
  - resource:
      name: cpu
      target:
        averageUtilization: 70
        type: Utilization
    type: Resource
  minReplicas: 2
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: web
status:
  currentMetrics: null
  desiredReplicas: 0
"""
    zero = load_all(kctl("autoscale", "deployment", "web", "--max=5", "--cpu-percent=0", "--dry-run=client",
                         "-o", "yaml").out)[0]
    assert "metrics" not in zero["spec"], "--cpu-percent 0 means the server's default, as kubectl 1.33+"
    as_json = json.loads(kctl("autoscale", "deployment", "web", "--max=5", "--dry-run=client", "-o", "json").out)
    assert list(as_json) == ["kind", "apiVersion", "metadata", "spec", "status"]
    assert list(as_json["spec"]) == ["scaleTargetRef", "maxReplicas"]


def test_create_then_get_and_apply_the_dry_run(kctl, workloads):
    """autoscale stores the HPA (defaulted as the API does); a dry run's YAML applies unchanged."""
    made = kctl("autoscale", "deployment", "web", "--max=3")
    assert (made.code, made.out) == (0, "horizontalpodautoscaler.autoscaling/web autoscaled\n")
    shown = kctl("get", "hpa")
    assert shown.out.splitlines()[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS",
                                                 "AGE"]
    assert shown.out.splitlines()[1].split()[:7] == ["web", "Deployment/web", "cpu:", "<unknown>/80%", "1", "3",
                                                     "0"]
    printed = kctl("autoscale", "statefulset", "db", "--max=4", "--cpu-percent=60", "--dry-run=client", "-o", "yaml")
    applied = kctl("apply", "-f", "-", input=printed.out)
    assert applied.code == 0, applied.err
    again = kctl("autoscale", "deployment", "web", "--max=3")
    assert again.code != 0 and 'horizontalpodautoscalers.autoscaling "web" already exists' in again.err


@pytest.mark.parametrize("args,out", [
    (["--dry-run=client"], "horizontalpodautoscaler.autoscaling/web created (dry run)\n"),
    (["--dry-run=server"], "horizontalpodautoscaler.autoscaling/web autoscaled (server dry run)\n"),
    (["--dry-run=client", "-o", "name"], "horizontalpodautoscaler.autoscaling/web\n"),
], ids=["client", "server", "name"])
def test_dry_runs_store_nothing(kctl, workloads, args, out):
    """Dry runs print kubectl's line and store no HPA."""
    got = kctl("autoscale", "deployment", "web", "--max=3", *args)
    assert (got.code, got.out) == (0, out)
    assert "No resources found" in kctl("get", "hpa").err


@pytest.mark.parametrize("args,message", [
    (["deployment", "web"], 'error: required flag(s) "max" not set'),
    (["deployment", "web", "--max=0"], "error: --max=MAXPODS is required and must be at least 1, max: 0"),
    (["deployment", "web", "--min=3", "--max=2"],
     "error: --max=MAXPODS must be larger or equal to --min=MINPODS, max: 2, min: 3"),
    (["daemonset", "agent", "--max=2"],
     "error: cannot autoscale a DaemonSet: could not find scale subresource for apps/v1, Resource=daemonsets in "
     "discovery information"),
    (["deployment", "nope", "--max=2"], 'Error from server (NotFound): deployments.apps "nope" not found'),
    (["deployment", "web", "--max=2", "--dry-run=maybe"],
     'error: Invalid dry-run value (maybe). Must be "none", "server", or "client".'),
    (["deployment", "web", "--max=2", "-o", "wide"],
     'error: unable to match a printer suitable for the output format "wide", allowed formats are: json, name, yaml'),
    (["--max=2"], "error: You must provide the resource to autoscale as TYPE NAME or TYPE/NAME, e.g. deployment web"),
], ids=["no-max", "max-zero", "max-below-min", "unscalable", "not-found", "bad-dry-run", "bad-output", "no-target"])
def test_errors_are_one_line(kctl, workloads, args, message):
    """Bad flags and targets give kubectl's one line and a non-zero exit, and store nothing."""
    got = kctl("autoscale", *args)
    assert got.code != 0
    assert got.err.strip() == message
    assert "Traceback" not in got.err


def test_file_and_namespace(kctl, tmp_path):
    """-f names the target by its manifest; -n puts the HPA (and the dry run's metadata) in that namespace."""
    namespace = kctl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace",
                                                           "metadata": {"name": "team"}}))
    assert namespace.code == 0, namespace.err
    manifest = tmp_path / "web.json"
    manifest.write_text(json.dumps(dict(_workload("Deployment", "web"), metadata={"name": "web",
                                                                                    "namespace": "team"})))
    assert kctl("apply", "-f", str(manifest)).code == 0
    printed = load_all(kctl("autoscale", "-f", str(manifest), "-n", "team", "--max=2", "--dry-run=client",
                            "-o", "yaml").out)[0]
    assert printed["metadata"] == {"creationTimestamp": None, "name": "web", "namespace": "team"}
    made = kctl("autoscale", "-f", str(manifest), "--max=2")
    assert (made.code, made.out) == (0, "horizontalpodautoscaler.autoscaling/web autoscaled\n"), made.err
    shown = kctl("get", "hpa", "-n", "team", "-o", "name")
    assert shown.out == "horizontalpodautoscaler.autoscaling/web\n"
