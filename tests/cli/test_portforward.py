"""`kctl port-forward` as a user runs it: kubectl's errors, then real forwarding in a subprocess.

The pods are fakes: objects whose status says Running at 127.0.0.1 on a Node reached through a
unix:// Podman URL (a local host), so each connection goes straight to a TCP server this test
runs on 127.0.0.1. tests/integration/agent/test_port_forward.py does the same against a real
Podman pod, and through `ssh -W` to a real sshd.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from typing import Iterator

import pytest

WAIT = 30.0  # seconds a line or a condition may take on a loaded machine

OBJECTS = """
apiVersion: v1
kind: Node
metadata: {name: n1, annotations: {kctl.io/podman-url: "unix:///run/podman/podman.sock"}}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, labels: {app: web}}
spec:
  nodeName: n1
  containers:
  - name: c
    image: busybox
    ports: [{name: http, containerPort: PORT}, {name: dns, containerPort: 53, protocol: UDP}]
---
apiVersion: v1
kind: Pod
metadata: {name: waiting, labels: {app: waiting}}
spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: web, port: 80, targetPort: http}, {name: dns, port: 53, targetPort: 53, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata: {name: external}
spec: {ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: none}
spec:
  selector: {matchLabels: {app: none}}
  template:
    metadata: {labels: {app: none}}
    spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
"""


class EchoServer:
    """A TCP server on 127.0.0.1: each connection is read to its end, then answered `echo:<what came>`."""

    def __init__(self, port: int = 0) -> None:
        self.sock = socket.create_server(("127.0.0.1", port))
        self.port = self.sock.getsockname()[1]
        self.sock.settimeout(0.2)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(WAIT)
            data = b""
            with contextlib.suppress(OSError):
                while chunk := conn.recv(65536):
                    data += chunk
                conn.sendall(b"echo:" + data)

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def objects(kctl, server, echo) -> dict:
    """The objects above, web-1 Running and Ready at 127.0.0.1 with its http port the echo server's."""
    result = kctl("apply", "-f", "-", input=OBJECTS.replace("PORT", str(echo.port)))
    assert result.code == 0, result.err
    pods = server.resource("pods")
    web = server.get(pods, "web-1", namespace="default")
    server.update_status({**web, "status": {"phase": "Running", "podIP": "127.0.0.1", "hostIP": "127.0.0.1",
                                            "conditions": [{"type": "Ready", "status": "True"}]}})
    return {"port": echo.port}


def ask(port: int, data: bytes, *, host: str = "127.0.0.1") -> bytes:
    """Send data, end sending (half-close), read the whole answer."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.settimeout(WAIT)
        sock.connect((host, port))
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


# -- errors (in-process) ----------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    ((), "error: TYPE/NAME and list of ports are required for port-forward. "
         "See 'kctl port-forward -h' for help and examples\n"),
    (("web-1",), "error: TYPE/NAME and list of ports are required for port-forward. "
                 "See 'kctl port-forward -h' for help and examples\n"),
    (("--pod-running-timeout=0", "svc/web", "80"),
     "error: --pod-running-timeout must be higher than zero. See 'kctl port-forward -h' for help and examples\n"),
    (("waiting", "80"), "error: unable to forward port because pod is not running. Current status=Pending\n"),
    (("svc/external", "80"),
     "error: cannot attach to *v1.Service: invalid service 'external': Service is defined without a selector\n"),
    (("configmap/cfg", "80"), "error: cannot attach to *v1.ConfigMap: selector for *v1.ConfigMap not implemented\n"),
    (("svc/web", "nope"), "error: Service 'web' does not have a named port 'nope'\n"),
    (("svc/web", "81"), "error: Service web does not have a service port 81\n"),
    (("svc/web", "dns"), "error: UDP protocol is not supported for dns\n"),
    (("pod/web-1", "53"), "error: UDP protocol is not supported for 53\n"),
    (("web-1", "nope"), "error: Pod 'web-1' does not have a named port 'nope'\n"),
    (("web-1", "8080:99999"),
     "error: error parsing remote port '99999': strconv.ParseUint: parsing \"99999\": value out of range\n"),
    (("web-1", ":0"), "error: remote port must be > 0\n"),
    (("--address", "example.com", "web-1", "80"), "error: example.com is not a valid IP\n"),
    (("deploy/none", "80", "--pod-running-timeout=1s"), "error: timed out waiting for the condition\n"),
], ids=["no-args", "no-port", "zero-timeout", "not-running", "service-without-selector", "configmap",
        "svc-unknown-name", "svc-unknown-port", "svc-udp", "pod-udp", "pod-unknown-name", "port-out-of-range",
        "zero-remote", "bad-address", "no-pod-in-time"])
def test_errors(kctl, objects, args, message):
    """Each refusal is kubectl's message on stderr, nothing on stdout; exit 1, 2 for a usage error."""
    result = kctl("port-forward", *args)
    assert (result.code, result.out, result.err) == (2 if "See 'kctl" in message else 1, "", message)


def test_unknown_pod_is_not_found(kctl, objects):
    """A pod that does not exist is the API's NotFound line."""
    result = kctl("port-forward", "pod/missing", "80")
    assert result.code != 0 and result.err == 'Error from server (NotFound): pods "missing" not found\n'


# -- forwarding (a subprocess) ----------------------------------------------------------------

class Forward:
    """`kctl port-forward ARGS` running; its stdout lines, as they come, on a queue."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "kctl", "port-forward", *args],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=os.environ.copy())
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def line(self) -> str:
        """The next stdout line (fails after WAIT seconds)."""
        try:
            line = self.lines.get(timeout=WAIT)
        except queue.Empty:
            pytest.fail(f"no line from port-forward in {WAIT:g} s; saw {self.seen}, stderr: {self.stop()[1]}")
        self.seen.append(line)
        return line

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, str]:
        """End it with `sig`; (exit status, stderr)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        assert self.process.stderr is not None
        if self.process.stderr.closed:  # stopped before
            return code, ""
        err = self.process.stderr.read()
        self.process.stderr.close()
        return code, err


@pytest.fixture
def forward() -> Iterator:
    """Start `kctl port-forward ...` processes; each is ended after the test, whatever happened."""
    started: list[Forward] = []

    def start(*args: str) -> Forward:
        started.append(Forward(*args))
        return started[-1]

    try:
        yield start
    finally:
        for process in started:
            process.stop(signal.SIGKILL)


def _port(line: str) -> int:
    return int(line.rsplit(" -> ", 1)[0].rsplit(":", 1)[1])


def test_random_local_port_on_both_loopbacks(objects, forward):
    """`pod/NAME :PORT`: one free port on 127.0.0.1 and [::1], each connection relayed and announced; Ctrl-C ends it."""
    remote = objects["port"]
    pf = forward("pod/web-1", f":{remote}")
    first, second = pf.line(), pf.line()
    local = _port(first)
    assert first == f"Forwarding from 127.0.0.1:{local} -> {remote}"
    assert second == f"Forwarding from [::1]:{local} -> {remote}"
    assert ask(local, b"hello") == b"echo:hello"
    assert pf.line() == f"Handling connection for {local}"
    assert ask(local, b"again", host="::1") == b"echo:again"
    assert pf.line() == f"Handling connection for {local}"
    assert pf.stop() == (0, "")


def test_service_port_leads_to_named_target_port(objects, forward):
    """`svc/NAME LOCAL:web`: the Service port's named targetPort on the pod its selector picks."""
    remote = objects["port"]
    pf = forward("svc/web", "0:web", "--address", "127.0.0.1")
    line = pf.line()
    assert line.startswith("Forwarding from 127.0.0.1:") and line.endswith(f" -> {remote}")
    payload = os.urandom(300_000)  # several chunks each way
    assert ask(_port(line), payload) == b"echo:" + payload
    assert pf.stop()[0] == 0


def test_deployment_picks_the_running_pod(kctl, server, objects, forward):
    """`deploy/NAME`: of a Pending and a Running pod, the Running one (kubectl's ordering) is forwarded to."""
    result = kctl("apply", "-f", "-", input="""
apiVersion: v1
kind: Pod
metadata: {name: web-2, labels: {app: web}}
spec: {nodeName: n1, containers: [{name: c, image: busybox}]}
""")
    assert result.code == 0, result.err
    pf = forward("deploy/web", f":{objects['port']}", "--address=127.0.0.1")
    assert ask(_port(pf.line()), b"x") == b"echo:x"
    assert pf.stop()[0] == 0


def test_refused_connection_is_reported_and_forwarding_goes_on(objects, forward):
    """A connection the pod refuses is one error line and is closed; once the pod listens, it is forwarded."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # nothing listens there once the probe is closed
    pf = forward("web-1", f":{closed}", "--address", "127.0.0.1")
    local = _port(pf.line())
    try:  # closed by kctl: an empty answer, or the reset seen first (on send, shutdown or receive)
        assert ask(local, b"x") == b""
    except OSError as exc:
        assert isinstance(exc, ConnectionError) or exc.errno == errno.ENOTCONN, exc
    assert pf.line() == f"Handling connection for {local}"
    late = EchoServer(closed)
    try:
        assert ask(local, b"now") == b"echo:now"
    finally:
        late.close()
    code, err = pf.stop()
    assert code == 0
    assert err.splitlines() == [f"error: an error occurred forwarding {local} -> {closed}: dial tcp "
                                f"127.0.0.1:{closed}: connect: connection refused"]


def test_pod_deleted_ends_it(server, objects, forward):
    """When the pod is deleted the forwarding ends: `error: lost connection to pod`, exit 1."""
    pf = forward("web-1", f":{objects['port']}", "--address=127.0.0.1")
    pf.line()
    server.delete(server.resource("pods"), "web-1", namespace="default", grace_period=0)
    try:
        code = pf.process.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        pytest.fail("port-forward still runs after its pod was deleted")
    assert code == 1 and pf.stop()[1].endswith("error: lost connection to pod\n")


def test_port_in_use_is_kubectls_listen_error(objects, forward):
    """A local port already taken: kubectl's `Unable to listen` line, then `unable to listen on any`, exit 1."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        local = taken.getsockname()[1]
        pf = forward("web-1", f"{local}:{objects['port']}", "--address", "127.0.0.1")
        code = pf.process.wait(timeout=WAIT)
        _, err = pf.stop()
    assert code == 1
    assert err.splitlines() == [
        f"Unable to listen on port {local}: Listeners failed to create with the following errors: [unable to "
        f"create listener: Error listen tcp4 127.0.0.1:{local}: bind: address already in use]",
        f"error: unable to listen on any of the requested ports: [{{{local} {objects['port']}}}]"]


def test_sigterm_ends_it_cleanly(objects, forward):
    """SIGTERM ends it like Ctrl-C: exit 0, no traceback, the port closed."""
    pf = forward("web-1", f":{objects['port']}", "--address", "127.0.0.1")
    local = _port(pf.line())
    assert pf.stop(signal.SIGTERM) == (0, "")
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", local), timeout=5):
        pass
