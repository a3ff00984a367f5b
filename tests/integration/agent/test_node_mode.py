"""`kctl --server ssh://...` and node mode, over the session's private sshd (the control host).

The control plane is a store file on this machine; clients reach it only through
`ssh ... kctl serve --stdio` (the remote kctl is this venv's, by absolute path). A
node-mode daemon (`kctl daemon --server ... --node nm-node`) runs the pods of its Node on
the private Podman while a control daemon, on the store, runs controllers and scheduler
and leaves that Node's agent to its own host.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kctl.machinery.errors import NotFound
from kctl.runtime.interface import LABEL_MANAGED

from .conftest import Daemon, wait_for
from .test_daemon_pods import IMAGE

pytestmark = pytest.mark.integration
NODE_MODE = "nm-node"
KCTL = Path(sys.executable).with_name("kctl")


@dataclass
class Remote:
    """How to reach the test's store as a control plane: the URL and the ssh settings (env)."""

    url: str
    env: dict

    def kctl(self, *args: str, input: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kctl", "--server", self.url, *args], input=input,
                              capture_output=True, timeout=timeout, env=self.env)

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "kctl", "--server", self.url, *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)


@pytest.fixture
def remote(sshd, store_file: Path, api) -> Remote:
    """The store (created by the `api` fixture) as ssh://user@127.0.0.1:PORT/path/kctl.db."""
    env = {k: v for k, v in os.environ.items() if k not in ("KCTL_STORE", "KCTL_SERVER")}
    env.update({"KCTL_SSH_IDENTITY": sshd.identity, "KCTL_KNOWN_HOSTS": sshd.known_hosts,
                "KCTL_REMOTE_COMMAND": f"env PYTHONDONTWRITEBYTECODE=1 {shlex.quote(str(KCTL))}"})
    return Remote(url=f"ssh://{sshd.user}@{sshd.host}:{sshd.port}{store_file}", env=env)


@dataclass
class NodeModeDaemon(Daemon):
    """`kctl daemon --server URL --node nm-node` on the private Podman (no --store: node mode).

    `prefix` runs it through another command (tests/e2e: nsenter into a test-bed host's network).
    """

    server: str = ""
    env: dict = field(default_factory=dict)
    node: str = NODE_MODE
    prefix: tuple[str, ...] = ()

    def start(self) -> None:
        argv = [*self.prefix, sys.executable, "-m", "kctl", "daemon", "--server", self.server, "--node", self.node,
                "--podman-url", self.url, "--resync", "1", "--heartbeat", "1", "--backoff-initial", "0.5",
                "--backoff-max", "2", "--log-level", "debug"]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.env)


def configmap(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"greeting": f"hello from {name}"}}


def deployment(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "app", "image": IMAGE, "imagePullPolicy": "Never",
                                         "command": ["sh", "-c", "exec sleep 3600"]}]}}}}


class Lines:
    """The stdout lines of a running process, collected by a thread."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen) -> None:
        for raw in process.stdout:
            self.lines.append(raw.decode(errors="replace"))

    def text(self) -> str:
        return "".join(self.lines)


@contextlib.contextmanager
def running(process: subprocess.Popen):
    """Stop the process (by its PID) when the block ends, whatever happened."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_cli_commands_through_ssh(api, remote: Remote, sshd, tmp_path: Path) -> None:
    """apply, get (-o json, -w), describe, scale, wait, delete: the store on the control host changes."""
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": [configmap("page"), deployment(1)]})
    applied = remote.kctl("apply", "-f", "-", input=manifest.encode())
    assert applied.returncode == 0, applied.stderr.decode()
    assert b"configmap/page created" in applied.stdout and b"deployment.apps/web created" in applied.stdout
    assert api.get(api.resource("configmaps"), "page", namespace="default")["data"]["greeting"] == "hello from page"
    got = remote.kctl("get", "configmap", "page", "-o", "json")
    assert got.returncode == 0 and json.loads(got.stdout)["data"] == {"greeting": "hello from page"}
    listed = remote.kctl("get", "deployments")
    assert listed.returncode == 0 and b"web" in listed.stdout
    described = remote.kctl("describe", "deployment", "web")
    assert described.returncode == 0 and b"Name:" in described.stdout and b"web" in described.stdout
    scaled = remote.kctl("scale", "deployment", "web", "--replicas", "3")
    assert scaled.returncode == 0, scaled.stderr.decode()
    assert api.get(api.resource("deployments"), "web", namespace="default")["spec"]["replicas"] == 3

    missing = remote.kctl("get", "pod", "nosuch")
    assert missing.returncode == 3
    assert missing.stderr.decode().strip() == 'Error from server (NotFound): pods "nosuch" not found'

    with running(remote.popen("get", "configmaps", "-w")) as watcher:
        lines = Lines(watcher)
        wait_for(lambda: "page" in lines.text(), what="the watch listing page")
        api.create(configmap("later"))
        wait_for(lambda: "later" in lines.text(), what="the watch showing a ConfigMap created after it started")

    with running(remote.popen("wait", "--for=delete", "configmap/page", "--timeout", "60s")) as waiter:
        api.delete(api.resource("configmaps"), "page", namespace="default")
        assert waiter.wait(timeout=60) == 0, waiter.stderr.read().decode()

    deleted = remote.kctl("delete", "deployment", "web")
    assert deleted.returncode == 0 and b'deployment.apps "web" deleted' in deleted.stdout
    with pytest.raises(NotFound):
        api.get(api.resource("deployments"), "web", namespace="default")


def test_host_key_is_checked(remote: Remote, sshd, tmp_path: Path) -> None:
    """A control host whose key is not the recorded one is refused, in one clear line."""
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    wrong = tmp_path / "known_hosts"
    key = (tmp_path / "other_key.pub").read_text().split()
    wrong.write_text(f"[{sshd.host}]:{sshd.port} {key[0]} {key[1]}\n")
    refused = Remote(remote.url, {**remote.env, "KCTL_KNOWN_HOSTS": str(wrong)}).kctl("get", "pods")
    err = refused.stderr.decode()
    assert refused.returncode == 1
    assert "cannot reach the control plane at ssh://" in err and "Host key verification failed" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_node_mode_runs_its_pods_with_the_control_plane_over_ssh(api, runtime, podman_service, remote: Remote,
                                                                 store_file: Path, tmp_path: Path, kctl) -> None:
    """A Deployment applied on the control side runs on the node-mode host; it survives a lost connection."""
    node_daemon = NodeModeDaemon(store=store_file, url=podman_service.url, log=tmp_path / "node.log",
                                 server=remote.url, env=remote.env)
    control = Daemon(store=store_file, url=podman_service.url, log=tmp_path / "control.log")
    node_daemon.start()
    try:
        wait_for(lambda: _ready(api, NODE_MODE), what="node nm-node Ready (heartbeats over ssh)", daemon=node_daemon)
        node = api.get(api.resource("nodes"), NODE_MODE)
        assert node["metadata"]["annotations"]["kctl.io/agent"] == "node"
        assert node["metadata"]["annotations"]["kctl.io/podman-url"] == podman_service.url
        # The control daemon (agents on) finds a Node already and must not run an agent for it.
        control.start()
        wait_for(lambda: "daemon running" in control.log_text(), what="the control daemon running", daemon=control)
        assert kctl("apply", "-f", "-", input=json.dumps(deployment(2)).encode()).returncode == 0
        status = remote.kctl("rollout", "status", "deployment/web", "--timeout", "90s", timeout=120)
        assert status.returncode == 0, status.stderr.decode() + node_daemon.log_text()[-3000:]
        wait_for(lambda: len(_running(runtime)) == 2, what="2 containers running on the node's Podman",
                 daemon=node_daemon)
        pods, _ = api.list(api.resource("pods"), namespace="default")
        assert {p["spec"]["nodeName"] for p in pods} == {NODE_MODE}
        assert all(p["status"]["phase"] == "Running" for p in pods)
        # exec and logs with --server run on the control host (where the nodes' keys are).
        name = pods[0]["metadata"]["name"]
        echoed = remote.kctl("exec", name, "-i", "--", "sh", "-c", "cat; exit 3", input=b"through ssh\n")
        assert (echoed.returncode, echoed.stdout) == (3, b"through ssh\n"), echoed.stderr.decode()
        assert remote.kctl("logs", name, "--tail", "5").returncode == 0
        assert f"node {NODE_MODE}: agent started" in node_daemon.log_text()
        assert f"node {NODE_MODE}: agent started" not in control.log_text()

        # The control host's end of the ssh connection dies: the agent reconnects and goes on.
        serving = _serve_processes(store_file)
        assert serving, "no `kctl serve` process found for the node-mode daemon"
        for pid in serving:
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: "lost the connection to the control plane" in node_daemon.log_text(),
                 what="the node-mode daemon noticing the lost connection", daemon=node_daemon)
        scaled = remote.kctl("scale", "deployment", "web", "--replicas", "3")
        assert scaled.returncode == 0, scaled.stderr.decode()
        wait_for(lambda: len(_running(runtime)) == 3, what="3 containers after the connection was lost",
                 daemon=node_daemon)
        wait_for(lambda: _ready(api, NODE_MODE), what="node still Ready", daemon=node_daemon)
        assert node_daemon.kill(signal.SIGTERM) == 0
        assert "daemon stopped" in node_daemon.log_text()
    finally:
        control.stop()
        node_daemon.stop()


def test_control_daemon_without_agents_registers_no_node(api, podman_service, store_file: Path,
                                                         tmp_path: Path) -> None:
    """`kctl daemon --no-agents` on an empty store runs controllers only: no Node is registered."""
    control = Daemon(store=store_file, url=podman_service.url, log=tmp_path / "control.log", extra=("--no-agents",))
    control.start()
    try:
        wait_for(lambda: "daemon running" in control.log_text(), what="the daemon running", daemon=control)
        assert api.list(api.resource("nodes"))[0] == []
        assert "agent started" not in control.log_text()
    finally:
        control.stop()


def _ready(api, name: str) -> bool:
    try:
        node = api.get(api.resource("nodes"), name)
    except NotFound:
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _running(runtime) -> list[str]:
    return [c.labels.get("io.kctl.pod.name", "") for c in runtime.list_containers({LABEL_MANAGED: "true"})
            if c.state == "running" and c.labels.get("io.kctl.container.name") == "app"]


def _serve_processes(store_file: Path) -> list[int]:
    """PIDs of the `kctl serve --stdio --store STORE` processes this test's ssh sessions started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"serve" in argv and b"--stdio" in argv and str(store_file).encode() in argv:
                found.append(int(entry.name))
    return found

