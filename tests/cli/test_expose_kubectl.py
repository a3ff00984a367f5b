"""`kctl expose --dry-run=client -o yaml` prints what the real `kubectl expose` prints for the same object.

kubectl's expose reads the object from an API server even with --dry-run=client, so the test
serves the object (and the legacy discovery documents kubectl asks for first) from a tiny
HTTP server on a free loopback port, in a thread it stops afterwards. Skipped when kubectl
is not installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web", "tier": "fe"}},
              "spec": {"selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [
                                        {"containerPort": 8080, "name": "http", "protocol": "TCP"},
                                        {"containerPort": 9090, "protocol": "UDP"}]}]}}}}
POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "solo", "namespace": "default", "labels": {"run": "solo"}},
       "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 53, "protocol": "UDP"},
                                                                      {"containerPort": 53, "protocol": "TCP"}]}]}}


def _resources(group_version: str, *rows: tuple[str, str, str]) -> dict:
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{"name": plural, "singularName": plural[:-1], "namespaced": True, "kind": kind,
                           "verbs": ["get", "list", "create"], "shortNames": [short]} for plural, kind, short in rows]}


DOCUMENTS = {
    "/api": {"kind": "APIVersions", "versions": ["v1"],
             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}}]},
    "/api/v1": _resources("v1", ("pods", "Pod", "po"), ("services", "Service", "svc")),
    "/apis/apps/v1": _resources("apps/v1", ("deployments", "Deployment", "deploy")),
    "/apis/apps/v1/namespaces/default/deployments/web": DEPLOYMENT,
    "/api/v1/namespaces/default/pods/solo": POD,
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
    """The URL of a fake API server answering kubectl's discovery and GETs of the two objects."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.parametrize("args", [
    ["deployment", "web", "--port", "80", "--target-port", "8080"],
    ["deployment", "web"],
    ["deployment/web", "--port", "80", "--type", "NodePort", "--name", "web-np", "--protocol", "UDP"],
    ["deployment", "web", "--port", "80,443", "--selector", "a=b", "--labels", "x=y", "--cluster-ip", "None"],
    ["pod", "solo"],
    ["pod", "solo", "--port", "53", "--target-port", "dns", "--session-affinity", "ClientIP"],
], ids=["port-and-target", "ports-found", "nodeport-named-udp", "ports-selector-labels-headless", "multi-protocol",
        "named-target-affinity"])
def test_same_object_as_kubectl(kctl, fake_api, tmp_path, args):
    """For each set of flags, kctl and kubectl print the same YAML."""
    applied = kctl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                         "items": [DEPLOYMENT, POD]}))
    assert applied.code == 0, applied.err
    expected = subprocess.run([KUBECTL, "--server", fake_api, "--cache-dir", str(tmp_path / "cache"), "expose", *args,
                               "--dry-run=client", "-o", "yaml"], capture_output=True, text=True, timeout=60)
    assert expected.returncode == 0, expected.stderr
    got = kctl("expose", *args, "--dry-run=client", "-o", "yaml")
    assert got.code == 0, got.err
    assert got.out == expected.stdout
