"""A heartbeat's look at a host (kctl.runtime.hostprobe) and the pod-work tunnel it suspends, with a fake `ssh`."""

from __future__ import annotations

import os
import socket
import stat
import threading
import time

import pytest

from kctl.runtime import hostprobe
from kctl.runtime.hostprobe import HostUnreachable, check_host
from kctl.runtime.interface import RuntimeError_
from kctl.runtime.podman import PodmanRuntime

SOCKET = "/run/podman/podman.sock"
CHANGED = """@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!
Host key for 10.77.0.11 has changed and you have requested strict checking.
Host key verification failed."""
UNKNOWN = """No ED25519 host key is known for 10.77.0.11 and you have requested strict checking.
Host key verification failed."""

FAKE_SSH = """#!/bin/sh
printf '%s\\0' "$@" >> "$FAKE_SSH_LOG"; echo >> "$FAKE_SSH_LOG"
case "$FAKE_SSH_MODE" in
  hang) exec sleep 60 ;;
  missing) echo kctl-no-podman-socket; exit 0 ;;
  *) cat "$FAKE_SSH_STDERR" >&2; exit 255 ;;
esac
"""


@pytest.fixture
def sshd_port():
    """A loopback TCP port that takes connections (the check knocks before it runs ssh)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@pytest.fixture
def url(sshd_port):
    return f"ssh://root@127.0.0.1:{sshd_port}{SOCKET}"


@pytest.fixture
def fake_ssh(tmp_path, monkeypatch):
    """An `ssh` first on PATH that does what FAKE_SSH_MODE says and logs its argv; returns a setter."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "ssh"
    script.write_text(FAKE_SSH)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    log, stderr = tmp_path / "ssh.log", tmp_path / "stderr"
    log.write_text("")
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SSH_LOG", str(log))
    monkeypatch.setenv("FAKE_SSH_STDERR", str(stderr))

    def set_mode(mode: str, text: str = "") -> None:
        monkeypatch.setenv("FAKE_SSH_MODE", mode)
        stderr.write_text(text)

    set_mode.calls = lambda: len(log.read_text().splitlines())  # type: ignore[attr-defined]
    set_mode.argvs = lambda: [line.split("\0")[:-1] for line in log.read_text().splitlines()]  # type: ignore
    return set_mode


@pytest.mark.parametrize("stderr, reason, fix", [
    (CHANGED, "HostKeyChanged", "kctl node trust h1"),
    (UNKNOWN, "HostKeyUnknown", "kctl node trust h1"),
    ("root@10.77.0.11: Permission denied (publickey).", "AuthenticationRefused", "authorized_keys"),
    ("ssh: connect to host 10.77.0.11 port 22: Connection refused", "ConnectionRefused", "sshd running"),
], ids=["changed", "unknown", "auth", "refused"])
def test_check_names_cause_host_and_fix(fake_ssh, url, stderr, reason, fix):
    """A failed ssh: unreachable, with the cause, the host, ssh's verdict and the fix in one line."""
    fake_ssh("fail", stderr)
    found = check_host(url, timeout=2, node="h1", known_hosts="/kctl/known_hosts")
    assert (found.reachable, found.answering, found.reason) == (False, False, reason)
    assert found.message.startswith("node h1: ") and "127.0.0.1:" in found.message and fix in found.message
    assert "\n" not in found.message and "NASTY" not in found.message


@pytest.mark.parametrize("stderr, identity, message", [
    (CHANGED, "/k", "node h1: the SSH host key of 127.0.0.1:{port} has CHANGED since it was trusted; kctl refuses"
                    " to connect (Host key verification failed.). If the host was re-installed, check its new key and"
                    " run: kctl node trust h1"),
    (UNKNOWN, None, "node h1: the SSH host key of 127.0.0.1:{port} is not known (Host key verification failed.);"
                    " check it and run: kctl node trust h1"),
    ("root@127.0.0.1: Permission denied (publickey).", "/k",
     "node h1: 127.0.0.1:{port} refused the SSH login of root with key /k (root@127.0.0.1: Permission denied"
     " (publickey).); put its public key in ~root/.ssh/authorized_keys on the host"),
    ("kex_exchange_identification: read: Connection reset by peer", None,
     "node h1: ssh to 127.0.0.1:{port} failed (kex_exchange_identification: read: Connection reset by peer)"),
], ids=["changed", "unknown", "auth", "other"])
def test_check_failure_messages_are_unchanged(fake_ssh, url, sshd_port, stderr, identity, message):
    """The heartbeat's messages for a failed ssh, word for word as they were before SSH moved to kctl.ssh."""
    fake_ssh("fail", stderr)
    found = check_host(url, timeout=2, node="h1", identity=identity, known_hosts="/kctl/known_hosts")
    assert found.message == message.format(port=sshd_port)


def test_check_runs_kctl_ssh_with_a_private_forward(fake_ssh, url):
    """The check's ssh (kctl.ssh.forward_command): strict host keys, kctl's known_hosts, a forward to a private
    socket of its own, no GSSAPI, and `test -S` of the Podman socket on the host."""
    fake_ssh("missing")
    check_host(url, timeout=2, node="h1", identity="/k", known_hosts="/kctl/known_hosts")
    (argv,) = fake_ssh.argvs()
    assert "StrictHostKeyChecking=yes" in argv and "UserKnownHostsFile=/kctl/known_hosts" in argv
    assert "GSSAPIAuthentication=no" in argv and "ConnectTimeout=10" in argv and argv[argv.index("-i") + 1] == "/k"
    local, remote = argv[argv.index("-L") + 1].rsplit(":", 1)
    assert remote == SOCKET and os.path.basename(os.path.dirname(local)).startswith("kctl-beat-")
    assert not os.path.exists(os.path.dirname(local)), "the check's private folder was left behind"
    assert argv[-2] == "root@127.0.0.1" and argv[-1] == hostprobe.check_script(SOCKET)
    assert "test -S /run/podman/podman.sock" in argv[-1]


def test_hostprobe_leaves_ssh_to_kctl_ssh():
    """SSH in one place: hostprobe builds no ssh command line, runs no process and classifies no ssh output itself."""
    text = open(hostprobe.__file__, encoding="utf-8").read()
    for word in ('"ssh"', "Popen", "subprocess", "ssh_options", "StrictHostKeyChecking", "host key verification",
                 "def classify_ssh_failure", "def ssh_failure_message", "terminate()"):
        assert word not in text, word


def test_hung_ssh_ends_within_the_timeout(fake_ssh, url):
    """An ssh that never answers (a cut link) is ended at the timeout: unreachable, no process left behind."""
    fake_ssh("hang")
    started = time.monotonic()
    found = check_host(url, timeout=1.0, node="h1")
    assert time.monotonic() - started < 1.0 + 3  # generous: a loaded machine
    assert (found.reachable, found.reason) == (False, "HostUnreachable")
    assert "cannot be reached" in found.message


def test_missing_socket_is_reachable_not_answering(fake_ssh, url):
    """ssh logs in but the host has no Podman socket: reachable, PodmanSocketMissing naming the path."""
    fake_ssh("missing")
    found = check_host(url, timeout=2, node="h1")
    assert (found.reachable, found.answering, found.reason) == (True, False, "PodmanSocketMissing")
    assert "/run/podman/podman.sock" in found.message


def test_knock_sees_a_closed_port_quickly_and_a_silent_one_never():
    """The TCP knock: a refusing port counts as an answer (ssh names it); no answer at all is False at the deadline."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens: refused at once
    assert hostprobe.tcp_knock("127.0.0.1", port, deadline=time.monotonic() + 2)
    started = time.monotonic()
    assert not hostprobe.tcp_knock("127.0.0.1", port, deadline=time.monotonic()) and time.monotonic() - started < 1


def test_local_socket_missing_or_refusing(tmp_path):
    """Node mode: no socket -> PodmanSocketMissing; a socket nobody serves -> PodmanNotAnswering; both reachable."""
    missing = check_host(f"unix://{tmp_path}/none.sock", timeout=1, node="h1")
    assert (missing.reachable, missing.reason) == (True, "PodmanSocketMissing")
    path = str(tmp_path / "dead.sock")
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(path)  # bound, never listening: connections are refused
    try:
        refused = check_host(f"unix://{path}", timeout=1, node="h1")
    finally:
        dead.close()
    assert (refused.reachable, refused.answering, refused.reason) == (True, False, "PodmanNotAnswering")


def test_suspend_ends_a_hung_tunnel_and_fails_calls_at_once(fake_ssh, url):
    """Pod work stuck starting the shared tunnel is released by suspend(); calls then fail at once without ssh;
    after resume() the next call starts a fresh ssh."""
    fake_ssh("hang")
    runtime = PodmanRuntime(url, timeout=30)
    errors: list[BaseException] = []

    def pod_work() -> None:
        try:
            runtime.list_pods({})
        except RuntimeError_ as error:
            errors.append(error)

    worker = threading.Thread(target=pod_work, daemon=True)
    try:
        worker.start()
        deadline = time.monotonic() + 10
        while fake_ssh.calls() < 1:
            assert time.monotonic() < deadline, "the tunnel's ssh never started"
            time.sleep(0.02)
        runtime.suspend("node h1: 127.0.0.1 cannot be reached")
        worker.join(5)
        assert not worker.is_alive() and errors, "pod work still waits on the hung tunnel"
        started = time.monotonic()
        with pytest.raises(HostUnreachable, match="cannot be reached"):
            runtime.list_pods({})
        assert time.monotonic() - started < 1 and fake_ssh.calls() == 1
        runtime.resume()
        fake_ssh("fail", "ssh: connect to host 127.0.0.1 port 22: Connection refused")
        with pytest.raises(RuntimeError_, match="Connection refused"):
            runtime.list_pods({})
        assert fake_ssh.calls() == 2
    finally:
        runtime.suspend("done")
        worker.join(5)
        runtime.close()


SERVING_SSH = """#!{python}
import os, socket, sys, threading, time
with open(os.environ["FAKE_SSH_LOG"], "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
time.sleep(float(os.environ.get("FAKE_SSH_LOGIN", "0")))  # a slow login
local = sys.argv[sys.argv.index("-L") + 1].split(":")[0]
server = socket.socket(socket.AF_UNIX)
server.bind(local)
server.listen(8)
print("kctl-podman-socket", flush=True)

def serve(conn):
    data = b""
    while True:
        while b"\\r\\n\\r\\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                return
            data += chunk
        data = data.split(b"\\r\\n\\r\\n", 1)[1]
        conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: text/plain\\r\\nContent-Length: 2\\r\\n\\r\\nOK")

while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


@pytest.fixture
def serving_ssh(tmp_path, monkeypatch):
    """An `ssh` first on PATH that logs in (after FAKE_SSH_LOGIN s) and answers pings on its forward;
    returns the number of times it was run, as a function."""
    import sys

    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "ssh"
    script.write_text(SERVING_SSH.replace("{python}", sys.executable))
    script.chmod(0o755)
    log = tmp_path / "ssh.log"
    log.write_text("")
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SSH_LOG", str(log))
    return lambda: len(log.read_text().splitlines())


def test_slow_login_is_kept_across_checks(serving_ssh, monkeypatch, url):
    """A login slower than one check (a loaded machine) is waited for by the next check, not started again."""
    monkeypatch.setenv("FAKE_SSH_LOGIN", "1.5")
    checker = hostprobe.HostChecker(url, node="h1")
    try:
        first = checker.check(timeout=0.5, details=False)
        assert (first.reachable, first.definite) == (False, False)
        deadline = time.monotonic() + 20
        while not (found := checker.check(timeout=2, details=False)).answering:
            assert time.monotonic() < deadline, found
        assert serving_ssh() == 1
    finally:
        checker.close()


def test_checker_keeps_its_connection_and_starts_afresh_after_a_failure(serving_ssh, url):
    """Beats reuse the checker's own ssh while it answers; once it fails, the next beat makes a fresh one."""
    checker = hostprobe.HostChecker(url, node="h1")
    try:
        for _ in range(3):
            found = checker.check(timeout=5, details=False)
            assert (found.reachable, found.answering) == (True, True), found
        assert serving_ssh() == 1
        checker._ssh.process.kill()  # the connection breaks (as a cut would leave it)
        checker._ssh.process.wait()
        found = checker.check(timeout=5, details=False)
        assert (found.reachable, found.answering) == (True, True), found
        assert serving_ssh() == 2
    finally:
        checker.close()
    assert checker._ssh is None


def test_tunnel_failure_is_one_short_line(fake_ssh, url):
    """The pod work's tunnel failing on a changed key says ssh's verdict in one short line, not its 1 KB banner."""
    fake_ssh("fail", CHANGED)
    with PodmanRuntime(url, timeout=5) as runtime:
        with pytest.raises(RuntimeError_) as failed:
            runtime.list_pods({})
    message = str(failed.value)
    assert "Host key verification failed" in message and "NASTY" not in message and len(message) < 400
