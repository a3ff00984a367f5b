"""The `kube_daemon` fixture: a real `kctl daemon --listen` on the session's private Podman, for kubectl.

One daemon per test module (module scope: starting one takes seconds): a subprocess with its own
store in a temporary folder, its Node `kube-node` on the private Podman service
(tests/integration/conftest.py's `podman_service`), serving the HTTPS API on a free port of
127.0.0.1, with its PKI beside the store and an admin kubeconfig written by `kctl config
kubeconfig`. Tests run the real kubectl with `kube_daemon.kubectl(...)` (never through a shell).
Teardown stops the daemon (SIGTERM, then SIGKILL) and removes every pod, container and volume
kctl made on the service, also when a test failed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pytest

from kctl.runtime.interface import LABEL_MANAGED, RuntimeError_
from kctl.runtime.podman import PodmanRuntime

NODE = "kube-node"
#: seconds the daemon may take to serve and have its node Ready; any one condition of a test
START_WAIT = 60.0
WAIT = 60.0
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def free_port() -> int:
    """A TCP port of 127.0.0.1 nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class KubeDaemon:
    """A `kctl daemon --listen` subprocess and how to reach it (see the module docstring)."""

    store: Path
    podman_url: str
    port: int
    folder: Path
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.folder / "kubeconfig"

    @property
    def log(self) -> Path:
        return self.folder / "daemon.log"

    @property
    def env(self) -> dict[str, str]:
        """The environment kubectl runs with: this kubeconfig, a HOME of its own (kubectl's cache)."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.folder),
                "KCTL_STORE": str(self.store)}

    def start(self) -> None:
        argv = [sys.executable, "-m", "kctl", "daemon", "--store", str(self.store), "--node", NODE,
                "--podman-url", self.podman_url, "--resync", "1", "--heartbeat", "1", "--backoff-initial", "0.5",
                "--backoff-max", "2", "--cluster-dns-port", "0", "--listen", f"127.0.0.1:{self.port}",
                "--log-level", "debug"]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                            env={**os.environ, "KCTL_STORE": str(self.store)})

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 90) -> subprocess.CompletedProcess:
        """Run the real kubectl against this daemon (text; never raises on a non-zero exit)."""
        return subprocess.run([KUBECTL, "--kubeconfig", str(self.kubeconfig), *args], input=input,
                              capture_output=True, text=True, timeout=timeout, env=self.env)

    def kctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run `kctl ARGS` on the daemon's store (text)."""
        return subprocess.run([sys.executable, "-m", "kctl", "--store", str(self.store), *args],
                              capture_output=True, text=True, timeout=timeout, env=self.env)


def wait_for(check: Callable[[], object], *, what: str, daemon: KubeDaemon, timeout: float = WAIT) -> object:
    """Poll check until it returns something truthy; fail naming what, with the daemon's log tail."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if daemon.process is not None and daemon.process.poll() is not None:
            pytest.fail(f"the daemon exited ({daemon.process.returncode}) waiting for {what}\n"
                        + "\n".join(daemon.log_text().splitlines()[-30:]))
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}\n"
                        + "\n".join(daemon.log_text().splitlines()[-30:]))
        time.sleep(0.3)


def _serving(daemon: KubeDaemon) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"{daemon.url}/healthz", context=context, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def _node_ready(daemon: KubeDaemon) -> bool:
    result = daemon.kubectl("get", "node", NODE, "-o",
                            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}", timeout=30)
    return result.returncode == 0 and result.stdout.strip() == "True"


def remove_kctl_objects(podman_url: str) -> None:
    """Remove every pod (in parallel), container and volume kctl made on the service."""
    runtime = PodmanRuntime(podman_url)
    labels = {LABEL_MANAGED: "true"}
    try:
        with contextlib.suppress(RuntimeError_):
            pods = runtime.list_pods(labels)
            with ThreadPoolExecutor(max_workers=8) as pool:
                list(pool.map(lambda pod: _quietly(runtime.remove_pod, pod.id), pods))
        with contextlib.suppress(RuntimeError_):
            for container in runtime.list_containers(labels):
                _quietly(runtime.remove_container, container.id)
        with contextlib.suppress(RuntimeError_):
            for volume in runtime.list_volumes(labels):
                _quietly(runtime.remove_volume, volume)
    finally:
        runtime.close()


def _quietly(call: Callable[[str], object], arg: str) -> None:
    with contextlib.suppress(RuntimeError_):
        call(arg)


@pytest.fixture(scope="module")
def kube_daemon(podman_service, tmp_path_factory) -> Iterator[KubeDaemon]:
    """`kctl daemon --listen 127.0.0.1:<free port>` on the private Podman, serving, its node Ready."""
    if not Path(KUBECTL).exists():
        pytest.fail(f"kubectl is needed at {KUBECTL}: the real client these tests run (this machine kind has it)")
    folder = tmp_path_factory.mktemp("kube-daemon")
    daemon = KubeDaemon(store=folder / "kctl.db", podman_url=podman_service.url, port=free_port(), folder=folder)
    daemon.start()
    try:
        wait_for(lambda: _serving(daemon), what=f"the HTTPS API on {daemon.url}", daemon=daemon, timeout=START_WAIT)
        config = daemon.kctl("config", "kubeconfig", "--server", daemon.url)
        assert config.returncode == 0, config.stderr
        daemon.kubeconfig.write_text(config.stdout)
        daemon.kubeconfig.chmod(0o600)
        wait_for(lambda: _node_ready(daemon), what=f"node {NODE} Ready", daemon=daemon, timeout=START_WAIT)
        yield daemon
    finally:
        daemon.stop()
        remove_kctl_objects(podman_service.url)
