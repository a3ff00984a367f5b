"""Pod streams against a real `kctl daemon --listen` on Podman: kubectl logs (-f, --tail, --previous), exec
(-i with stdin and an exit code), attach (output, -i), and the official Python client's exec stream (stdin,
v5 close, TTY).

The module's pods are made once (`pods` fixture) on the `kube_daemon` of tests/integration/kubeapi/conftest.py,
which removes everything it made on Podman when the module ends.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from .conftest import WAIT, KubeDaemon, wait_for

IMAGE = "localhost/busybox:demo"


def pod(name: str, script: str, *, restart: str = "Always", **fields: object) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"terminationGracePeriodSeconds": 1, "restartPolicy": restart,
                     "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", script], **fields}]}}


PODS = [
    pod("talker", "i=0; while true; do echo line$i; i=$((i+1)); sleep 0.3; done"),
    pod("crasher", "echo run-$(cat /proc/uptime); sleep 1; exit 1"),
    pod("reader", "while read l; do echo got:$l; done; echo eof", restart="Never", stdin=True, stdinOnce=True),
    pod("shell", "sleep 3600"),
]


def pod_field(daemon: KubeDaemon, name: str, path: str) -> str:
    result = daemon.kubectl("get", "pod", name, "-o", f"jsonpath={path}", timeout=30)
    return result.stdout.strip() if result.returncode == 0 else ""


@pytest.fixture(scope="module")
def pods(kube_daemon: KubeDaemon) -> KubeDaemon:
    """The module's pods applied with kubectl and Running (talker with a few lines logged)."""
    applied = kube_daemon.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                                "items": PODS}))
    assert applied.returncode == 0, applied.stderr
    for item in PODS:
        name = item["metadata"]["name"]
        wait_for(lambda name=name: pod_field(kube_daemon, name, "{.status.containerStatuses[0].state.running}")
                 or pod_field(kube_daemon, name, "{.status.containerStatuses[0].restartCount}") not in ("", "0"),
                 what=f"pod {name} running", daemon=kube_daemon)
    wait_for(lambda: kube_daemon.kubectl("logs", "talker").stdout.count("\n") >= 3, what="talker logs 3 lines",
             daemon=kube_daemon)
    return kube_daemon


def read_lines(process: subprocess.Popen, count: int, *, timeout: float = WAIT) -> list[str]:
    """`count` lines of a running process's stdout, read on a thread with a deadline."""
    lines: list[str] = []

    def work() -> None:
        while len(lines) < count:
            line = process.stdout.readline()  # type: ignore[union-attr]
            if not line:
                return
            lines.append(line)

    reader = threading.Thread(target=work, daemon=True)
    reader.start()
    reader.join(timeout)
    return lines


def popen_kubectl(daemon: KubeDaemon, *args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.Popen:
    from .conftest import KUBECTL

    return subprocess.Popen([KUBECTL, "--kubeconfig", str(daemon.kubeconfig), *args], stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=daemon.env)


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=20)


def test_kubectl_logs_and_tail(pods: KubeDaemon) -> None:
    """kubectl logs prints the container's lines; --tail=2 the last two of them."""
    everything = pods.kubectl("logs", "talker")
    assert everything.returncode == 0, everything.stderr
    assert everything.stdout.startswith("line0\nline1\nline2\n")
    tail = pods.kubectl("logs", "talker", "--tail=2")
    assert tail.returncode == 0 and len(tail.stdout.splitlines()) == 2
    assert all(line.startswith("line") for line in tail.stdout.splitlines())


def test_kubectl_logs_follow_streams_new_lines(pods: KubeDaemon) -> None:
    """kubectl logs -f --tail=1 prints lines as the container writes them, until it is stopped."""
    process = popen_kubectl(pods, "logs", "-f", "--tail=1", "talker")
    try:
        lines = read_lines(process, 3)
    finally:
        stop(process)
    numbers = [int(line.strip()[4:]) for line in lines]
    assert len(numbers) == 3 and numbers == sorted(numbers) and numbers[2] - numbers[0] == 2, lines


def test_kubectl_logs_previous_after_a_restart(pods: KubeDaemon) -> None:
    """After the container restarted, --previous prints the instance before the current one."""
    wait_for(lambda: pod_field(pods, "crasher", "{.status.containerStatuses[0].restartCount}") not in ("", "0"),
             what="crasher restarted", daemon=pods)
    previous = pods.kubectl("logs", "crasher", "--previous")
    assert previous.returncode == 0, previous.stderr
    assert previous.stdout.startswith("run-")


def test_kubectl_exec_output_stdin_and_exit_code(pods: KubeDaemon) -> None:
    """kubectl exec prints the command's output; exec -i feeds piped stdin and exits with the command's status."""
    echo = pods.kubectl("exec", "shell", "--", "echo", "hi")
    assert (echo.returncode, echo.stdout) == (0, "hi\n"), echo.stderr
    piped = pods.kubectl("exec", "-i", "shell", "--", "sh", "-c", "cat; echo err >&2; exit 3", input="one\ntwo\n")
    assert (piped.returncode, piped.stdout) == (3, "one\ntwo\n"), piped.stderr
    assert "err\n" in piped.stderr
    wrong = pods.kubectl("exec", "shell", "-c", "nope", "--", "true")
    assert wrong.returncode == 1 and "container nope is not valid for pod shell" in wrong.stderr


def test_kubectl_attach_streams_output(pods: KubeDaemon) -> None:
    """kubectl attach prints the main process's output from now on."""
    process = popen_kubectl(pods, "attach", "talker")
    try:
        lines = read_lines(process, 2)
    finally:
        stop(process)
    assert len(lines) == 2 and all(line.startswith("line") for line in lines), lines


def test_kubectl_attach_stdin_once(pods: KubeDaemon) -> None:
    """kubectl attach -i hands stdin to the main process; with stdinOnce its end ends the process."""
    attached = pods.kubectl("attach", "-i", "reader", input="hello\n")
    assert attached.returncode == 0, attached.stderr
    assert "got:hello\n" in attached.stdout
    wait_for(lambda: pod_field(pods, "reader", "{.status.phase}") == "Succeeded", what="reader succeeded",
             daemon=pods)


def test_python_client_exec_stream_stdin_close_and_tty(pods: KubeDaemon) -> None:
    """The official client: stdin written as it goes, v5's close ends it, the return code; a TTY exec."""
    from kubernetes import client, config
    from kubernetes.stream import stream

    api_client = config.new_client_from_config(config_file=str(pods.kubeconfig))
    try:
        core = client.CoreV1Api(api_client)
        resp = stream(core.connect_get_namespaced_pod_exec, "shell", "default", command=["sh", "-c", "cat; exit 7"],
                      stdin=True, stdout=True, stderr=True, tty=False, _preload_content=False)
        try:
            resp.write_stdin("first\n")
            out = ""
            deadline = time.monotonic() + WAIT
            while "first\n" not in out and time.monotonic() < deadline:
                resp.update(timeout=1)
                out += resp.read_stdout(timeout=0) or ""
            assert out == "first\n"  # echoed while stdin is still open: a streamed session
            resp.close_channel(0)
            resp.run_forever(timeout=WAIT)
            assert resp.returncode == 7
        finally:
            resp.close()
        tty = stream(core.connect_get_namespaced_pod_exec, "shell", "default",
                     command=["sh", "-c", "echo out; echo err >&2"], stdin=False, stdout=True, stderr=True, tty=True)
        assert tty.replace("\r\n", "\n") == "out\nerr\n"
    finally:
        api_client.close()


def test_kubectl_exec_with_a_terminal(pods: KubeDaemon) -> None:
    """kubectl exec -it on a pseudo-terminal: an interactive shell with a TTY of the terminal's size (the resize
    channel), its exit code."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    from .conftest import KUBECTL

    main, side = pty.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 37, 111, 0, 0))  # kubectl sends this size
    process = subprocess.Popen([KUBECTL, "--kubeconfig", str(pods.kubeconfig), "exec", "-it", "shell", "--", "sh"],
                               stdin=side, stdout=side, stderr=side, env=pods.env, close_fds=True)
    os.close(side)
    seen = bytearray()
    finished = threading.Event()

    def read() -> None:
        while True:
            try:
                data = os.read(main, 4096)
            except OSError:
                break
            if not data:
                break
            seen.extend(data)
        finished.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + WAIT
        while b"#" not in seen and time.monotonic() < deadline:  # the shell's prompt (root: "# ")
            time.sleep(0.1)
        os.write(main, b"stty size; echo tty-$((20+1)); exit 5\r")
        assert process.wait(timeout=WAIT) == 5, bytes(seen)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=20)
        finished.wait(5)
        os.close(main)
    assert b"tty-21" in seen, bytes(seen)
    assert b"37 111" in seen, bytes(seen)  # `stty size` in the container: the resize reached its TTY
