"""port-forward through kctl's HTTPS API to a real Podman pod: the real kubectl and the official Python client.

A busybox httpd pod (its page from a ConfigMap) runs on the `kube_daemon` fixture's daemon; `kubectl
port-forward pod/web LOCAL:80` (SPDY tunnelled in a WebSocket, kubectl 1.31+'s default) serves the page
to one GET and to two at once; the Python client's `portforward` (WebSocket channels) gets it too.
"""

from __future__ import annotations

import http.client
import subprocess
import threading
import time

import pytest

from .conftest import KUBECTL, free_port

pytestmark = pytest.mark.integration
WAIT = 60.0
PAGE = "hello through the HTTPS API's port-forward\n"
POD = f"""\
apiVersion: v1
kind: ConfigMap
metadata: {{name: pf-page}}
data:
  index.html: "{PAGE.strip()}\\n"
---
apiVersion: v1
kind: Pod
metadata: {{name: pf-web, labels: {{app: pf-web}}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: localhost/busybox:demo
    command: ["httpd", "-f", "-p", "80", "-h", "/www"]
    ports: [{{containerPort: 80}}]
    readinessProbe: {{tcpSocket: {{port: 80}}, periodSeconds: 1}}
    volumeMounts: [{{name: page, mountPath: /www}}]
  volumes: [{{name: page, configMap: {{name: pf-page}}}}]
"""


def _get(port: int, path: str = "/") -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def web(kube_daemon):
    """The httpd pod, Ready; deleted after the module's tests."""
    applied = kube_daemon.kubectl("apply", "-f", "-", input=POD)
    assert applied.returncode == 0, applied.stderr
    waited = kube_daemon.kubectl("wait", "--for=condition=Ready", "pod/pf-web", "--timeout=60s", timeout=90)
    assert waited.returncode == 0, waited.stderr + kube_daemon.log_text()[-3000:]
    try:
        yield kube_daemon
    finally:
        kube_daemon.kubectl("delete", "pod/pf-web", "configmap/pf-page", "--wait=false")


def test_kubectl_port_forward_to_a_podman_pod(web) -> None:
    """`kubectl port-forward pod/pf-web LOCAL:80`: a GET returns the page; two GETs at once both do."""
    local = free_port()
    process = subprocess.Popen([KUBECTL, "--kubeconfig", str(web.kubeconfig), "port-forward", "pod/pf-web",
                                f"{local}:80", "--address", "127.0.0.1"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=web.env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line == f"Forwarding from 127.0.0.1:{local} -> 80\n", line + (process.stderr.read()
                                                                            if process.poll() is not None else "")
        assert _get(local) == (200, PAGE)
        results: list[tuple[int, str]] = []
        threads = [threading.Thread(target=lambda: results.append(_get(local))) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        assert results == [(200, PAGE), (200, PAGE)]
    finally:
        if process.poll() is None:
            process.terminate()
        try:
            _, err = process.communicate(timeout=WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
    assert "error" not in err.lower(), err


def test_python_client_port_forward_to_a_podman_pod(web) -> None:
    """The official Python client's portforward reaches the pod's httpd."""
    from kubernetes import client, config
    from kubernetes.stream import portforward

    api_client = config.new_client_from_config(str(web.kubeconfig))
    try:
        forward = portforward(client.CoreV1Api(api_client).connect_get_namespaced_pod_portforward, "pf-web",
                              "default", ports="80")
        try:
            sock = forward.socket(80)
            sock.settimeout(WAIT)
            sock.sendall(b"GET / HTTP/1.0\r\nHost: pf-web\r\n\r\n")
            reply, deadline = b"", time.monotonic() + WAIT
            while (chunk := sock.recv(65536)) and time.monotonic() < deadline:
                reply += chunk
            assert reply.startswith(b"HTTP/1.") and b" 200 " in reply.split(b"\r\n", 1)[0]
            assert reply.endswith(PAGE.encode())
            assert forward.error(80) is None
        finally:
            forward.close()
    finally:
        api_client.close()


def test_port_forward_to_a_pod_that_is_not_there(web) -> None:
    """kubectl port-forward to a missing pod: kubectl's NotFound line, exit 1."""
    result = web.kubectl("port-forward", "pod/nothing", f"{free_port()}:80")
    assert result.returncode == 1
    assert 'pods "nothing" not found' in result.stderr
