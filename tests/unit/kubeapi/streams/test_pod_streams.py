"""pods/log, pods/exec and pods/attach of the in-process HTTPS API, on a MemoryRuntime (no Podman).

The `kubeapi` fixture (tests/unit/kubeapi/conftest.py) serves the API with real TLS, authentication
and RBAC; kctl.kubeapi.streams.runtime_for is replaced so the pod's node is a MemoryRuntime. Clients:
raw HTTPS, a WebSocket (websocket-client, as the Python client uses), the real kubectl and the official
Python client's `stream()`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from urllib.parse import quote

import pytest
import websocket

from kctl.kubeapi import streams
from kctl.runtime.interface import (LABEL_CONTAINER, LABEL_POD_UID, LABEL_RESTART, ContainerSpec, PodSandboxSpec)
from kctl.runtime.memory import MemoryRuntime

IMAGE = "localhost/busybox:latest"
POD_PATH = "/api/v1/namespaces/default/pods/web"
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")


@dataclass
class Pods:
    """The pod `web` (containers a, b) bound to node n1, whose runtime is `runtime`."""

    runtime: MemoryRuntime
    uid: str
    sandbox: str

    def start(self, container: str, command: list[str], *, restart: int = 0) -> str:
        """Run an instance of one of the pod's containers in the runtime."""
        labels = {LABEL_POD_UID: self.uid, LABEL_CONTAINER: container, LABEL_RESTART: str(restart)}
        cid = self.runtime.create_container(self.sandbox, ContainerSpec(name=f"web-{container}-{restart}",
                                                                        image=IMAGE, labels=labels,
                                                                        command=command))
        self.runtime.start_container(cid)
        return cid


@pytest.fixture
def pods(kubeapi, monkeypatch) -> Pods:
    """Node n1 (a MemoryRuntime) and pod web with containers a (stdin: true) and b, nothing running yet."""
    runtime = MemoryRuntime(images={IMAGE})
    monkeypatch.setattr(streams, "runtime_for", lambda node: runtime)
    kubeapi.api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    pod = kubeapi.api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                              "spec": {"nodeName": "n1", "containers": [{"name": "a", "image": IMAGE, "stdin": True},
                                                                        {"name": "b", "image": IMAGE}]}})
    uid = pod["metadata"]["uid"]
    sandbox = runtime.create_pod(PodSandboxSpec(name="web", labels={LABEL_POD_UID: uid}))
    return Pods(runtime=runtime, uid=uid, sandbox=sandbox.id)


# -- pods/log


@pytest.mark.parametrize(("query", "expected"), [
    ("container=a", b"one\ntwo\nthree\n"),
    ("container=a&tailLines=2", b"two\nthree\n"),
    ("container=a&limitBytes=6", b"one\ntw"),
    ("container=a&previous=true", b"old\n"),
    ("container=a&follow=true", b"one\ntwo\nthree\n"),
], ids=["all", "tail", "limit-bytes", "previous", "follow-of-an-ended-log"])
def test_log_options(kubeapi, pods: Pods, query: str, expected: bytes) -> None:
    """The log of the current (or previous) instance, cut by tailLines and limitBytes, as text/plain."""
    pods.start("a", ["sh", "-c", "echo old"], restart=0)
    pods.start("a", ["sh", "-c", "echo one; echo two; echo three"], restart=1)
    reply = kubeapi.request("GET", f"{POD_PATH}/log?{query}")
    assert (reply.status, reply.body) == (200, expected)
    assert reply.headers["Content-Type"].startswith("text/plain")


def test_log_timestamps_prefix_each_line(kubeapi, pods: Pods) -> None:
    """timestamps=true puts an RFC 3339 time before each line."""
    pods.start("a", ["sh", "-c", "echo one"])
    line = kubeapi.request("GET", f"{POD_PATH}/log?container=a&timestamps=true").body.decode()
    stamp, _, text = line.partition(" ")
    assert text == "one\n" and stamp[:2] == "20" and "T" in stamp


@pytest.mark.parametrize(("query", "code", "reason", "message"), [
    ("container=b", 400, "BadRequest", 'container "b" in pod "web" is waiting to start: ContainerCreating'),
    ("", 400, "BadRequest", "a container name must be specified for pod web, choose one of: [a b]"),
    ("container=zz", 400, "BadRequest", "container zz is not valid for pod web"),
    ("container=a&previous=true", 400, "BadRequest",
     'previous terminated container "a" in pod "web" not found'),
    ("container=a&tailLines=-1", 422, "Invalid",
     'PodLogOptions "web" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0'),
    ("container=a&sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z", 422, "Invalid",
     'PodLogOptions "web" is invalid: at most one of `sinceTime` or `sinceSeconds` may be specified'),
    ("container=a&tailLines=x", 400, "BadRequest", 'tailLines: invalid integer "x"'),
], ids=["waiting", "which-container", "no-such-container", "no-previous", "negative-tail", "two-sinces",
        "not-a-number"])
def test_log_errors_are_kubernetes_statuses(kubeapi, pods: Pods, query: str, code: int, reason: str,
                                            message: str) -> None:
    """What cannot be logged is a Status with Kubernetes' code, reason and words."""
    pods.start("a", ["sleep", "1000"])
    reply = kubeapi.request("GET", f"{POD_PATH}/log?{query}")
    assert reply.status == code
    assert (reply.json()["reason"], reply.json()["message"]) == (reason, message)


def test_log_of_a_missing_pod_is_not_found(kubeapi, pods: Pods) -> None:
    """A pod that does not exist: 404 NotFound."""
    reply = kubeapi.request("GET", "/api/v1/namespaces/default/pods/nope/log")
    assert (reply.status, reply.json()["reason"]) == (404, "NotFound")


def test_kubectl_logs(kubeapi, pods: Pods) -> None:
    """The real kubectl prints the log, --tail and --previous included, and the waiting error as it shows it."""
    pods.start("a", ["sh", "-c", "echo old"], restart=0)
    pods.start("a", ["sh", "-c", "echo one; echo two"], restart=1)
    assert kubeapi.kubectl("logs", "web", "-c", "a").stdout == "one\ntwo\n"
    assert kubeapi.kubectl("logs", "web", "-c", "a", "--tail=1").stdout == "two\n"
    assert kubeapi.kubectl("logs", "web", "-c", "a", "--previous").stdout == "old\n"
    waiting = kubeapi.kubectl("logs", "web", "-c", "b")
    assert waiting.returncode == 1
    assert 'container "b" in pod "web" is waiting to start: ContainerCreating' in waiting.stderr


# -- pods/exec over a WebSocket


def exec_path(command: list[str], *, container: str = "a", stdin: bool = False, tty: bool = False) -> str:
    query = "&".join(f"command={quote(word)}" for word in command)
    return (f"{POD_PATH}/exec?{query}&container={container}&stdin={str(stdin).lower()}&stdout=true&stderr=true"
            f"&tty={str(tty).lower()}")


def connect(kubeapi, path: str, *, protocols: tuple[str, ...] = PROTOCOLS) -> websocket.WebSocket:
    """A WebSocket to the API as the admin."""
    return websocket.create_connection(kubeapi.url.replace("https://", "wss://") + path,
                                       subprotocols=list(protocols), sslopt={"context": kubeapi.ssl_context()},
                                       timeout=30)


def read_until_closed(ws: websocket.WebSocket) -> dict[int, bytes]:
    """Every channel's data until the server closes the socket."""
    got: dict[int, bytes] = {}
    while True:
        try:
            opcode, data = ws.recv_data()
        except websocket.WebSocketConnectionClosedException:
            return got
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return got
        if data:
            got[data[0]] = got.get(data[0], b"") + data[1:]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_exec_streams_and_reports_success(kubeapi, pods: Pods, protocol: str) -> None:
    """Output comes back on stdout/stderr channels; the error channel says Success; the server closes."""
    pods.start("a", ["sleep", "1000"])
    ws = connect(kubeapi, exec_path(["sh", "-c", "echo out; echo err >&2"]), protocols=(protocol,))
    try:
        assert ws.subprotocol == protocol
        got = read_until_closed(ws)
    finally:
        ws.close()
    assert got[1] == b"out\n" and got[2] == b"err\n"
    assert json.loads(got[3])["status"] == "Success"


@pytest.mark.parametrize("text_frames", [False, True], ids=["binary", "text"])
def test_exec_stdin_close_and_exit_code(kubeapi, pods: Pods, text_frames: bool) -> None:
    """stdin reaches the command until v5's close; a non-zero exit is NonZeroExitCode with the code."""
    pods.start("a", ["sleep", "1000"])
    ws = connect(kubeapi, exec_path(["sh", "-c", "cat; exit 3"], stdin=True))
    try:
        if text_frames:  # the Python client sends str data as text messages
            ws.send("\x00line one\n")
        else:
            ws.send_binary(b"\x00line one\n")
        ws.send_binary(b"\x00line two\n")
        ws.send_binary(b"\xff\x00")
        got = read_until_closed(ws)
    finally:
        ws.close()
    assert got[1] == b"line one\nline two\n"
    status = json.loads(got[3])
    assert (status["status"], status["reason"]) == ("Failure", "NonZeroExitCode")
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]


@pytest.mark.parametrize(("path", "headers", "code", "needle"), [
    (exec_path(["true"]), {}, 400, "Upgrade request required"),
    (exec_path(["true"], container="b"), {}, 400, 'container not found ("b")'),
    (f"{POD_PATH}/exec?container=a&stdout=true", {}, 400, "you must specify at least 1 command"),
    (f"{POD_PATH}/exec?command=true&container=a&stdout=false&stderr=false", {}, 400,
     "you must specify at least 1 of stdin, stdout, stderr"),
    (f"{POD_PATH}/attach?container=a&stdout=true", {}, 400, "Upgrade request required"),
    (f"{POD_PATH}/exec?command=true&stdout=true", {}, 400,
     "a container name must be specified for pod web, choose one of: [a b]"),
], ids=["no-upgrade", "not-running", "no-command", "no-streams", "attach-no-upgrade", "which-container"])
def test_exec_refusals_before_the_upgrade(kubeapi, pods: Pods, path: str, headers: dict, code: int,
                                          needle: str) -> None:
    """Problems found before the upgrade are HTTP Statuses (what kubectl's SPDY fallback then shows)."""
    pods.start("a", ["sleep", "1000"])
    reply = kubeapi.request("POST", path, headers=headers)
    assert reply.status == code and needle in reply.json()["message"]


def test_exec_unsupported_protocol_fails_the_handshake(kubeapi, pods: Pods) -> None:
    """A client offering no protocol the server speaks gets 400, not a socket."""
    pods.start("a", ["sleep", "1000"])
    with pytest.raises(websocket.WebSocketBadStatusException) as raised:
        connect(kubeapi, exec_path(["true"]), protocols=("base64.channel.k8s.io",))
    assert raised.value.status_code == 400


def test_exec_needs_create_on_pods_exec(kubeapi, pods: Pods) -> None:
    """A user who may only `get` pods/exec is refused the WebSocket with 403 for `create` (Kubernetes 1.35)."""
    pods.start("a", ["sleep", "1000"])
    api = kubeapi.api
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "peek", "namespace": "default"},
                "rules": [{"apiGroups": [""], "resources": ["pods", "pods/exec"], "verbs": ["get"]}]})
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "peek", "namespace": "default"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "peek"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
    context = kubeapi.ssl_context(user="alice", groups=())
    url = kubeapi.url.replace("https://", "wss://") + exec_path(["true"])
    with pytest.raises(websocket.WebSocketBadStatusException) as raised:
        websocket.create_connection(url, subprotocols=list(PROTOCOLS), sslopt={"context": context}, timeout=30)
    assert raised.value.status_code == 403
    assert b'cannot create resource \\"pods/exec\\"' in raised.value.resp_body


def test_attach_passes_stdin_and_ends_with_the_container(kubeapi, pods: Pods) -> None:
    """attach hands stdin to the main process (the spec has stdin: true); when the container stops: Success."""
    container_id = pods.start("a", ["sleep", "1000"])
    ws = connect(kubeapi, f"{POD_PATH}/attach?container=a&stdin=true&stdout=true&stderr=true",
                 protocols=PROTOCOLS[1:])
    try:
        ws.send_binary(b"\x00hello\n")
        deadline = time.monotonic() + 30
        while not pods.runtime.attached_input.get(container_id) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pods.runtime.attached_input[container_id] == b"hello\n"
        pods.runtime.stop_container(container_id, timeout=1)
        got = read_until_closed(ws)
    finally:
        ws.close()
    assert json.loads(got[3])["status"] == "Success"


def test_attach_to_a_container_without_stdin_drops_it(kubeapi, pods: Pods) -> None:
    """stdin asked of a container whose spec has none is not attached (as the kubelet does)."""
    container_id = pods.start("b", ["sleep", "1000"])
    ws = connect(kubeapi, f"{POD_PATH}/attach?container=b&stdin=true&stdout=true", protocols=PROTOCOLS[1:])
    try:
        ws.send_binary(b"\x00dropped\n")
        ws.send_binary(b"\x04{\"Width\":80,\"Height\":24}")
        deadline = time.monotonic() + 30  # the server attaches after the upgrade: stop the container after that
        while ("attach_session", container_id) not in pods.runtime.calls and time.monotonic() < deadline:
            time.sleep(0.05)
        pods.runtime.stop_container(container_id, timeout=1)
        got = read_until_closed(ws)
    finally:
        ws.close()
    assert json.loads(got[3])["status"] == "Success"
    assert container_id not in pods.runtime.attached_input


def test_kubectl_exec_stdin_and_exit_code(kubeapi, pods: Pods) -> None:
    """The real kubectl: `exec -i POD -- sh -c 'cat; exit 3'` echoes piped stdin and exits 3."""
    pods.start("a", ["sleep", "1000"])
    result = kubeapi.kubectl("exec", "-i", "web", "-c", "a", "--", "sh", "-c", "cat; exit 3", input="piped\n")
    assert (result.returncode, result.stdout) == (3, "piped\n"), result.stderr
    echo = kubeapi.kubectl("exec", "web", "-c", "a", "--", "echo", "hi")
    assert (echo.returncode, echo.stdout) == (0, "hi\n"), echo.stderr


def test_python_client_stream_exec(kubeapi, pods: Pods) -> None:
    """The official Python client's stream(connect_get_namespaced_pod_exec) gets the output and return code."""
    from kubernetes import client, config
    from kubernetes.stream import stream

    pods.start("a", ["sleep", "1000"])
    api_client = config.new_client_from_config(config_file=str(kubeapi.kubeconfig))
    try:
        core = client.CoreV1Api(api_client)
        out = stream(core.connect_get_namespaced_pod_exec, "web", "default", container="a",
                     command=["sh", "-c", "echo from python"], stderr=True, stdin=False, stdout=True, tty=False)
        assert out == "from python\n"
        resp = stream(core.connect_get_namespaced_pod_exec, "web", "default", container="a",
                      command=["sh", "-c", "exit 5"], stderr=True, stdin=False, stdout=True, tty=False,
                      _preload_content=False)
        resp.run_forever(timeout=30)
        assert resp.returncode == 5
        resp.close()
    finally:
        api_client.close()

