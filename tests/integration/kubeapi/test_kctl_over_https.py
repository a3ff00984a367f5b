"""kctl's own CLI as a client of a real `kctl daemon --listen` over HTTPS, with Podman: apply, get, logs (-f),
exec (-i, exit code), delete, and node mode (`kctl --kubeconfig K daemon --node N`) running pods on the REST API.

Uses the module-scoped `kube_daemon` of tests/integration/kubeapi/conftest.py (which removes what kctl made on
Podman when the module ends). Every kctl runs as a subprocess with --kubeconfig, never on the daemon's store.
"""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import subprocess
import sys
import threading

import pytest

from .conftest import WAIT, KubeDaemon, wait_for

IMAGE = "localhost/busybox:demo"
NODE_MODE_NODE = "https-node"


def kctl(daemon: KubeDaemon, *args: str, input: str | None = None,
         timeout: float = WAIT) -> subprocess.CompletedProcess:
    """`kctl --kubeconfig K ARGS` (no store in its environment: HTTPS only)."""
    env = {k: v for k, v in daemon.env.items() if k not in ("KCTL_STORE", "KUBECONFIG")}
    return subprocess.run([sys.executable, "-m", "kctl", "--kubeconfig", str(daemon.kubeconfig), *args],
                          input=input, capture_output=True, text=True, timeout=timeout, env=env)


def pod(name: str, script: str, *, node: str | None = None) -> dict:
    spec: dict = {"terminationGracePeriodSeconds": 1,
                  "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                                  "command": ["sh", "-c", script]}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def phase(daemon: KubeDaemon, name: str) -> str:
    result = kctl(daemon, "get", "pod", name, "-o", "jsonpath={.status.phase}")
    return result.stdout.strip() if result.returncode == 0 else ""


@pytest.fixture(scope="module")
def talker(kube_daemon: KubeDaemon) -> KubeDaemon:
    """A pod applied with `kctl --kubeconfig` that prints a numbered line every 0.3 s, Running."""
    applied = kctl(kube_daemon, "apply", "-f", "-",
                   input=json.dumps(pod("talker", "i=0; while true; do echo line$i; i=$((i+1)); sleep 0.3; done")))
    assert applied.returncode == 0 and applied.stdout == "pod/talker created\n", applied.stderr
    wait_for(lambda: phase(kube_daemon, "talker") == "Running", what="talker Running", daemon=kube_daemon)
    wait_for(lambda: kctl(kube_daemon, "logs", "talker").stdout.count("\n") >= 3, what="talker logs",
             daemon=kube_daemon)
    return kube_daemon


def test_get_all_namespaces_lists_the_pod_as_a_table(talker):
    """`kctl --kubeconfig K get pods -A` prints kubectl's columns with the running pod."""
    out = kctl(talker, "get", "pods", "-A")
    assert out.returncode == 0, out.stderr
    header, *rows = out.stdout.splitlines()
    assert header.split() == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert any(row.split()[:4] == ["default", "talker", "1/1", "Running"] for row in rows), out.stdout


def test_logs_tail_and_follow(talker):
    """logs --tail 2 prints two lines; logs -f keeps printing new ones until stopped."""
    tail = kctl(talker, "logs", "talker", "--tail", "2")
    assert tail.returncode == 0 and len(tail.stdout.splitlines()) == 2, tail.stderr
    env = {k: v for k, v in talker.env.items() if k not in ("KCTL_STORE", "KUBECONFIG")}
    follow = subprocess.Popen([sys.executable, "-m", "kctl", "--kubeconfig", str(talker.kubeconfig), "logs", "-f",
                               "talker", "--tail", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in follow.stdout], daemon=True)
    reader.start()
    try:
        numbers = []
        while len(numbers) < 3:
            try:
                numbers.append(int(lines.get(timeout=WAIT).strip().removeprefix("line")))
            except queue.Empty:
                pytest.fail(f"logs -f printed {numbers} and then nothing for {WAIT:g} s")
        assert numbers == sorted(numbers) and numbers[-1] > numbers[0]
    finally:
        follow.send_signal(signal.SIGINT)
        try:
            follow.wait(WAIT)
        except subprocess.TimeoutExpired:
            follow.kill()
            follow.wait()
        reader.join(WAIT)
        follow.stdout.close()
        follow.stderr.close()


def test_exec_passes_stdin_and_returns_the_exit_code(talker):
    """exec -i: stdin reaches the command, stdout/stderr come back, the exit status is the command's."""
    out = kctl(talker, "exec", "-i", "talker", "--", "sh", "-c", "cat; echo to-err >&2; exit 7", input="hello\n")
    assert (out.returncode, out.stdout, out.stderr) == (7, "hello\n", "to-err\n")
    bad = kctl(talker, "exec", "talker", "-c", "nope", "--", "true")
    assert (bad.returncode, bad.stderr) == (1, "Error from server (BadRequest): container nope is not valid for "
                                               "pod talker\n")


def test_node_mode_agent_runs_pods_through_the_https_api(kube_daemon: KubeDaemon, podman_service):
    """`kctl --kubeconfig K daemon --node N` registers N, runs a pod bound to it, and deletes it."""
    env = {k: v for k, v in kube_daemon.env.items() if k not in ("KCTL_STORE", "KUBECONFIG")}
    log = kube_daemon.folder / "node-mode.log"
    with open(log, "ab") as sink:
        agent = subprocess.Popen([sys.executable, "-m", "kctl", "--kubeconfig", str(kube_daemon.kubeconfig), "daemon",
                                  "--node", NODE_MODE_NODE, "--podman-url", podman_service.url, "--heartbeat", "1",
                                  "--resync", "1", "--log-level", "debug"], stdout=sink, stderr=sink, env=env)
    try:
        wait_for(lambda: kctl(kube_daemon, "get", "node", NODE_MODE_NODE, "-o",
                              "jsonpath={.metadata.annotations.kctl\\.io/agent}").stdout.strip() == "node",
                 what=f"node {NODE_MODE_NODE} registered in node mode", daemon=kube_daemon)
        made = kctl(kube_daemon, "apply", "-f", "-", input=json.dumps(pod("remote", "echo from-node-mode; sleep 600",
                                                                            node=NODE_MODE_NODE)))
        assert made.returncode == 0, made.stderr
        wait_for(lambda: phase(kube_daemon, "remote") == "Running", what="the node-mode pod Running",
                 daemon=kube_daemon)
        wait_for(lambda: "from-node-mode" in kctl(kube_daemon, "logs", "remote").stdout,
                 what="the node-mode pod's log", daemon=kube_daemon)
        gone = kctl(kube_daemon, "delete", "pod", "remote")
        assert gone.returncode == 0, gone.stderr
        assert kctl(kube_daemon, "get", "pod", "remote").returncode == 3
        assert agent.poll() is None, log.read_text()[-2000:]
    finally:
        with contextlib.suppress(ProcessLookupError):
            agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(WAIT)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
        kctl(kube_daemon, "delete", "node", NODE_MODE_NODE)
