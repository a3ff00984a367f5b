"""pods/portforward over the HTTPS API to a pod on an ssh:// Node: each connection is `ssh -W podIP:port` there.

The API is served in-process over a store of its own (no Podman): Node `remote` names the session's
sshd (tests/integration/conftest.py) with its key and known_hosts, pod `far` runs "at" 127.0.0.1 on it,
and a listener of the test's own on 127.0.0.1 is the pod's port. The real kubectl forwards to it through
kctl's HTTPS API; a refused port is ssh's own words on kubectl's error line; no ssh is left after.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.apiserver.server import APIServer
from kctl.kubeapi import serving
from kctl.kubeapi.app import ServerContext
from kctl.kubeapi.pki import PKI
from kctl.store.sqlite import Store

pytestmark = pytest.mark.integration
KUBECTL = "/usr/bin/kubectl"
WAIT = 60.0
BODY = b"answered over ssh -W through the HTTPS API\n"


@pytest.fixture
def answering() -> Iterator[int]:
    """A listener on 127.0.0.1 answering each connection with a fixed HTTP response: its port."""
    sock = socket.create_server(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stopped = threading.Event()

    def serve() -> None:
        while not stopped.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn, contextlib.suppress(OSError):
                conn.settimeout(WAIT)
                conn.recv(65536)
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stopped.set()
        thread.join(5)
        sock.close()


@pytest.fixture
def https_api(tmp_path: Path, sshd) -> Iterator[tuple[APIServer, Path]]:
    """kctl's HTTPS API in-process over a new store holding Node `remote` (the sshd) and pod `far` on it:
    (the API, the kubeconfig)."""
    store_path = tmp_path / "kctl.db"
    store = Store(store_path)
    api = APIServer(store, user="it", audit_log=None)
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "remote", "annotations": {
        "kctl.io/podman-url": sshd.podman_url("/run/podman/podman.sock"), "kctl.io/ssh-identity": sshd.identity,
        "kctl.io/ssh-known-hosts": sshd.known_hosts}}})
    pod = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "far", "namespace": "default"},
                      "spec": {"nodeName": "remote", "containers": [{"name": "c", "image": "busybox"}]}})
    api.update_status({**pod, "status": {"phase": "Running", "podIP": "127.0.0.1", "hostIP": "127.0.0.1"}})
    pki = PKI.for_store(store_path)
    pki.ensure(sans=["127.0.0.1"])
    from kctl.kubeapi.authn import Authenticator
    from kctl.kubeapi.authz import Authorizer

    handle = serving.start(ServerContext(api=api, pki=pki, authenticator=Authenticator(pki=pki, api=api),
                                         authorizer=Authorizer(api)), host="127.0.0.1", port=0)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(pki.kubeconfig(server_url=handle.url))
    kubeconfig.chmod(0o600)
    try:
        yield api, kubeconfig
    finally:
        handle.stop()
        api.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _fetch(port: int) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request("GET", "/")
        return conn.getresponse().read()
    finally:
        conn.close()


def _ssh_processes_to(port: int) -> list[str]:
    """Command lines of `ssh ... -W 127.0.0.1:PORT` processes, after up to WAIT s for them to end."""
    deadline = time.monotonic() + WAIT
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):
                line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if line.startswith("ssh ") and f"127.0.0.1:{port}" in line:
                    found.append(line)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_kubectl_port_forward_through_ssh_node(https_api, answering: int, sshd) -> None:
    """Connections reach the pod's port through `ssh -W`; a refused port is ssh's words on kubectl's error line;
    no ssh is left after kubectl ends."""
    _, kubeconfig = https_api
    local, local_closed, closed = _free_port(), _free_port(), _free_port()
    process = subprocess.Popen([KUBECTL, "--kubeconfig", str(kubeconfig), "port-forward", "pod/far",
                                f"{local}:{answering}", f"{local_closed}:{closed}", "--address", "127.0.0.1"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "HOME": str(kubeconfig.parent)})
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline(), process.stdout.readline()]
        assert [line.split(" -> ")[1].strip() for line in lines] == [str(answering), str(closed)], lines
        assert _fetch(local) == BODY
        assert _fetch(local) == BODY
        with socket.create_connection(("127.0.0.1", local_closed), timeout=WAIT) as refused:
            refused.settimeout(WAIT)
            with contextlib.suppress(ConnectionResetError):
                assert refused.recv(1) == b""
    finally:
        if process.poll() is None:
            time.sleep(0.5)  # kubectl prints the error line once the error stream ended
            process.terminate()
        try:
            _, err = process.communicate(timeout=WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
    assert (f"an error occurred forwarding {local_closed} -> {closed}: error forwarding port {closed} to pod far, "
            f"uid ") in err, err
    assert f"ssh 127.0.0.1:{sshd.port}: channel 0: open failed: connect failed: Connection refused" in err, err
    assert _ssh_processes_to(answering) == [] and _ssh_processes_to(closed) == []
