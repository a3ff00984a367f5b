"""pods/portforward over the in-process HTTPS API: the real kubectl (SPDY in a WebSocket, and the plain SPDY
upgrade) and the official Python client (WebSocket channels), to a local TCP server standing in for the pod."""

from __future__ import annotations

import http.client
import http.server
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from kctl.kubeapi.pki import ADMIN_USER

DEADLINE = 30.0
PAGE = b"<h1>hello from the pod</h1>\n" * 200


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = PAGE + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def pod_port() -> Iterator[int]:
    """An HTTP server on 127.0.0.1 standing in for the pod's port (the pod's IP is 127.0.0.1)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def make_pod(kubeapi, *, name: str = "web", ip: str = "127.0.0.1") -> None:
    """A Running pod on Node n1 whose IP is `ip` (no Podman: the route goes straight to ip:port)."""
    api = kubeapi.api
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    pod = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                      "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}},
                     namespace="default")
    pod["status"] = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "127.0.0.1",
                     "conditions": [{"type": "Ready", "status": "True"}]}
    api.update_status(pod)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(port: int, path: str = "/") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


class PortForward:
    """`kubectl port-forward` running in the background, stopped (and waited for) at the end."""

    def __init__(self, kubeapi, *args: str, env: dict | None = None) -> None:
        from tests.unit.kubeapi.conftest import KUBECTL  # noqa: PLC0415 - the fixture module's kubectl

        full_env = {**os.environ, "HOME": str(kubeapi.kubeconfig.parent), **(env or {})}
        self.process = subprocess.Popen([KUBECTL, "--kubeconfig", str(kubeapi.kubeconfig), "port-forward", *args],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
        self.lines: list[str] = []

    def wait_forwarding(self) -> None:
        """Until kubectl printed its "Forwarding from" line (it listens then)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if line.startswith("Forwarding from"):
                return
        self.stop()
        raise AssertionError(f"kubectl did not forward: {self.lines} {self.process.stderr.read()}")

    def stop(self) -> str:
        """Stop kubectl; its stderr."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            _, err = self.process.communicate(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return err


@pytest.mark.parametrize("websockets", ["true", "false"], ids=["spdy-in-websocket", "spdy-upgrade"])
def test_kubectl_port_forward_serves_the_page(kubeapi, pod_port: int, websockets: str) -> None:
    """kubectl port-forward (1.31+'s SPDY-over-WebSocket, and the plain SPDY upgrade): GETs through it return
    the pod's page, also two at once."""
    make_pod(kubeapi)
    local = free_port()
    forward = PortForward(kubeapi, "pod/web", f"{local}:{pod_port}", "--address", "127.0.0.1",
                          env={"KUBECTL_PORT_FORWARD_WEBSOCKETS": websockets})
    try:
        forward.wait_forwarding()
        assert get(local, "/first") == (200, PAGE + b"/first")
        results: dict[str, tuple[int, bytes]] = {}
        threads = [threading.Thread(target=lambda p=p: results.__setitem__(p, get(local, p))) for p in ("/a", "/b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(DEADLINE)
        assert results == {"/a": (200, PAGE + b"/a"), "/b": (200, PAGE + b"/b")}
    finally:
        err = forward.stop()
    assert "error" not in err.lower(), err


def test_kubectl_port_forward_reports_a_refused_port(kubeapi) -> None:
    """A port nothing listens on: kubectl prints kubelet's error after its own words."""
    make_pod(kubeapi)
    local, closed = free_port(), free_port()
    forward = PortForward(kubeapi, "pod/web", f"{local}:{closed}", "--address", "127.0.0.1")
    try:
        forward.wait_forwarding()
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            get(local)
    finally:
        err = forward.stop()
    assert (f"an error occurred forwarding {local} -> {closed}: error forwarding port {closed} to pod web, uid "
            in err), err
    assert f"dial tcp 127.0.0.1:{closed}: connect: connection refused" in err


def test_kubectl_port_forward_to_a_missing_pod(kubeapi) -> None:
    """A pod that does not exist: kubectl's NotFound line, exit 1."""
    result = kubeapi.kubectl("port-forward", "pod/nothing", "8080:80")
    assert result.returncode == 1
    assert 'pods "nothing" not found' in result.stderr


def test_python_client_port_forward(kubeapi, pod_port: int) -> None:
    """The official Python client's portforward (WebSocket channels, v4.channel.k8s.io) reaches the page."""
    from kubernetes import client, config
    from kubernetes.stream import portforward

    api_client = config.new_client_from_config(str(kubeapi.kubeconfig))
    make_pod(kubeapi)
    core = client.CoreV1Api(api_client)
    forward = portforward(core.connect_get_namespaced_pod_portforward, "web", "default", ports=str(pod_port))
    try:
        sock = forward.socket(pod_port)
        sock.settimeout(DEADLINE)
        sock.sendall(b"GET /py HTTP/1.0\r\nHost: pod\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
        assert reply.startswith(b"HTTP/1.0 200")
        assert reply.endswith(PAGE + b"/py")
        assert forward.error(pod_port) is None
    finally:
        forward.close()
        api_client.close()


def test_python_client_port_forward_error_channel(kubeapi) -> None:
    """A refused port: the Python client finds kubelet's message on the port's error channel."""
    from kubernetes import client, config
    from kubernetes.stream import portforward

    api_client = config.new_client_from_config(str(kubeapi.kubeconfig))
    make_pod(kubeapi)
    closed = free_port()
    forward = portforward(client.CoreV1Api(api_client).connect_get_namespaced_pod_portforward, "web", "default",
                          ports=str(closed))
    try:
        sock = forward.socket(closed)
        sock.settimeout(DEADLINE)
        assert sock.recv(10) == b""
        deadline = time.monotonic() + DEADLINE
        while forward.error(closed) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        uid = kubeapi.api.get(kubeapi.api.resource("pods"), "web", namespace="default")["metadata"]["uid"]
        assert forward.error(closed) == (f"error forwarding port {closed} to pod web, uid {uid}: dial tcp "
                                         f"127.0.0.1:{closed}: connect: connection refused")
    finally:
        forward.close()
        api_client.close()


def test_plain_get_is_refused_without_an_upgrade(kubeapi) -> None:
    """A portforward request that upgrades to nothing is 400 `Upgrade request required`."""
    make_pod(kubeapi)
    reply = kubeapi.request("POST", "/api/v1/namespaces/default/pods/web/portforward", user=ADMIN_USER)
    assert reply.status == 400
    assert reply.json()["message"] == "Upgrade request required"


def test_pod_without_a_node_is_a_bad_request(kubeapi) -> None:
    """A pod not bound to a Node cannot be forwarded to: 400 with kube-apiserver's words."""
    kubeapi.api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pending", "namespace": "default"},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, namespace="default")
    reply = kubeapi.request("POST", "/api/v1/namespaces/default/pods/pending/portforward")
    assert reply.status == 400
    assert reply.json()["message"] == "pod pending does not have a host assigned"
