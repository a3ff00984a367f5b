"""`kctl port-forward` for real: to a Podman pod's IP on this host, and through `ssh -W` to a host over SSH.

The first test starts `kctl daemon` on the session's private Podman (conftest.py), runs a
busybox httpd pod and a Service for it, and fetches the page through `kctl port-forward`
subprocesses (pod/NAME and svc/NAME). The second reaches a listener of its own on 127.0.0.1
through the session's sshd (tests/integration/conftest.py): the Node names that sshd, so every
connection is an `ssh -W 127.0.0.1:PORT` with the Node's key and known_hosts; no pod network is
needed. Both end the forwarding with Ctrl-C and check that no process of it is left.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from kctl.apiserver.server import APIServer
from kctl.store.sqlite import Store

from .conftest import NODE, wait_for

pytestmark = pytest.mark.integration
IMAGE = "localhost/busybox:demo"
WAIT = 60.0


class Forward:
    """`kctl port-forward ARGS` on a store; its stdout lines on a queue."""

    def __init__(self, store: Path, *args: str, server: tuple[str, ...] = (), env: dict | None = None) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "kctl", *server, "port-forward", *args],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=env or {**os.environ, "KCTL_STORE": str(store)})
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def line(self) -> str:
        try:
            return self.lines.get(timeout=WAIT)
        except queue.Empty:
            self.stop(signal.SIGKILL)
            pytest.fail(f"no line from kctl port-forward in {WAIT:g} s")

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, str]:
        """End it with `sig`: (exit status, stderr)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        err = ""
        if self.process.stderr is not None and not self.process.stderr.closed:
            err = self.process.stderr.read()
            self.process.stderr.close()
        return code, err


@pytest.fixture
def forward() -> Iterator:
    """Start `kctl port-forward` processes (store, args...); each is killed after the test if still running."""
    started: list[Forward] = []

    def start(store: Path, *args: str, **options) -> Forward:
        started.append(Forward(store, *args, **options))
        return started[-1]

    try:
        yield start
    finally:
        for process in started:
            process.stop(signal.SIGKILL)


def _local_port(line: str) -> int:
    return int(line.rsplit(" -> ", 1)[0].rsplit(":", 1)[1])


def _fetch(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=WAIT) as response:
        return response.read().decode()


def _ready(api, name: str) -> bool:
    pod = api.find(api.resource("pods"), name, namespace="default")
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in ((pod or {}).get("status") or {}).get("conditions") or ())


def _none_left(text: str) -> list[str]:
    """The processes naming `text` still there after WAIT s (an ssh on the far side may take a moment to end)."""
    deadline = time.monotonic() + WAIT
    while (left := _processes_naming(text)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _processes_naming(text: str) -> list[str]:
    """Command lines of the processes that name `text` (this test's own marker)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if text in line:
                found.append(line)
    return found


def test_forward_to_a_podman_pod_and_its_service(api, daemon, store_file, forward) -> None:
    """pod/NAME :8080 and svc/NAME :80 reach busybox httpd in a real pod; each connection announced; Ctrl-C ends it."""
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "page", "namespace": "default"},
                "data": {"index.html": "hello through port-forward\n"}})
    api.create({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "pf-web", "namespace": "default", "labels": {"app": "pf-web"}},
                "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 2, "containers": [{
                    "name": "httpd", "image": IMAGE, "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "exec httpd -f -p 8080 -h /www"],
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                    "volumeMounts": [{"name": "page", "mountPath": "/www"}]}],
                    "volumes": [{"name": "page", "configMap": {"name": "page"}}]}})
    api.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "pf-web", "namespace": "default"},
                "spec": {"selector": {"app": "pf-web"}, "ports": [{"port": 80, "targetPort": "http"}]}})
    wait_for(lambda: _ready(api, "pf-web"), what="pod pf-web Ready", daemon=daemon)

    pf = forward(store_file, "pod/pf-web", ":8080")
    first, second = pf.line(), pf.line()
    port = _local_port(first)
    assert (first, second) == (f"Forwarding from 127.0.0.1:{port} -> 8080", f"Forwarding from [::1]:{port} -> 8080")
    assert _fetch(port) == "hello through port-forward\n"
    assert pf.line() == f"Handling connection for {port}"
    assert pf.stop() == (0, "")
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass

    svc = forward(store_file, "svc/pf-web", ":80", "--address", "127.0.0.1")
    line = svc.line()
    assert line.endswith(" -> 8080")
    assert _fetch(_local_port(line)) == "hello through port-forward\n"
    assert svc.line() == f"Handling connection for {_local_port(line)}"
    assert svc.stop() == (0, "")


class Answering:
    """A TCP listener on 127.0.0.1 that answers each connection with a fixed HTTP response."""

    BODY = b"answered over ssh -W\n"

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn, contextlib.suppress(OSError):
                conn.settimeout(WAIT)
                conn.recv(65536)
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(self.BODY), self.BODY))

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def answering() -> Iterator[Answering]:
    server = Answering()
    try:
        yield server
    finally:
        server.close()


def _fake_pods(store_path: Path, sshd) -> None:
    """Pod `far` Running at 127.0.0.1 on Node `remote` (ssh:// the session's sshd), `near` on a unix:// Node."""
    store = Store(store_path)
    try:
        api = APIServer(store, user="it")
        url = sshd.podman_url("/run/podman/podman.sock")
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "remote", "annotations": {
            "kctl.io/podman-url": url, "kctl.io/ssh-identity": sshd.identity,
            "kctl.io/ssh-known-hosts": sshd.known_hosts}}})
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "local", "annotations": {
            "kctl.io/podman-url": "unix:///run/podman/podman.sock"}}})
        for name, node in (("far", "remote"), ("near", "local")):
            created = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                                  "spec": {"nodeName": node, "containers": [{"name": "c", "image": IMAGE}]}})
            api.update_status({**created, "status": {"phase": "Running", "podIP": "127.0.0.1",
                                                     "hostIP": "127.0.0.1"}})
    finally:
        store.close()


def test_forward_through_ssh_w_to_a_remote_host(sshd, tmp_path, answering, forward) -> None:
    """A pod on an ssh:// Node: each connection is `ssh -W podIP:port` there (the Node's key, known_hosts checked);
    a refused port is ssh's own words; nothing of it runs after Ctrl-C."""
    store_path = tmp_path / "kctl.db"
    _fake_pods(store_path, sshd)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]

    pf = forward(store_path, "far", f":{answering.port}", f":{closed}", "--address", "127.0.0.1")
    lines = [pf.line(), pf.line()]
    to_server, to_closed = (_local_port(line) for line in lines)
    assert lines == [f"Forwarding from 127.0.0.1:{to_server} -> {answering.port}",
                     f"Forwarding from 127.0.0.1:{to_closed} -> {closed}"]
    assert _fetch(to_server) == Answering.BODY.decode()
    assert pf.line() == f"Handling connection for {to_server}"
    with socket.create_connection(("127.0.0.1", to_closed), timeout=WAIT) as refused:
        refused.settimeout(WAIT)
        with contextlib.suppress(ConnectionResetError):
            assert refused.recv(1) == b""
    assert pf.line() == f"Handling connection for {to_closed}"
    assert _fetch(to_server) == Answering.BODY.decode()  # still forwarding
    code, err = pf.stop()
    assert code == 0
    assert err.splitlines() == [f"error: an error occurred forwarding {to_closed} -> {closed}: ssh "
                                f"127.0.0.1:{sshd.port}: channel 0: open failed: connect failed: Connection refused"]
    assert _none_left(f"127.0.0.1:{answering.port}") == []


@pytest.mark.parametrize("pod", ["near", "far"], ids=["control-hosts-own-pod", "pod-on-an-ssh-node"])
def test_forward_with_server_goes_through_the_control_host(sshd, tmp_path, answering, forward, pod) -> None:
    """With --server (the CLI away from the daemon's host): through the control host, with the client's key;
    a pod on an ssh:// Node is reached by the control host's own `ssh -W` to that Node."""
    store_path = tmp_path / "kctl.db"
    _fake_pods(store_path, sshd)
    env = {k: v for k, v in os.environ.items() if k not in ("KCTL_STORE", "KCTL_SERVER")}
    env.update({"KCTL_SSH_IDENTITY": sshd.identity, "KCTL_KNOWN_HOSTS": sshd.known_hosts,
                "KCTL_REMOTE_COMMAND": f"{sys.executable} -m kctl"})
    server = ("--server", f"ssh://{sshd.user}@{sshd.host}:{sshd.port}{store_path}")
    pf = forward(store_path, pod, f":{answering.port}", "--address", "127.0.0.1", server=server, env=env)
    port = _local_port(pf.line())
    assert _fetch(port) == Answering.BODY.decode()
    assert pf.line() == f"Handling connection for {port}"
    assert pf.stop() == (0, "")
    assert _none_left(f"127.0.0.1:{answering.port}") == []
