"""SSH in one place (kctl.ssh): the command lines, the heartbeat's ssh session, why an ssh failed, stopping it."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from kctl.ssh import (SSH_FAILURE_REASONS, SSHError, SSHSession, SSHTarget, SSHTunnel, classify_ssh_failure,
                      forward_command, ssh_failure_message, ssh_verdict, stop_process)

TARGET = SSHTarget.parse("ssh://core@10.0.0.5:2222/run/podman/podman.sock")
OPTIONS = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "ServerAliveInterval=5",
           "-o", "ServerAliveCountMax=3", "-o", "ConnectTimeout=10", "-i", "/k", "-o", "IdentitiesOnly=yes",
           "-o", "UserKnownHostsFile=/kh", "-o", "GlobalKnownHostsFile=/dev/null", "-p", "2222"]
CHANGED = """@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!
Host key for 10.77.0.11 has changed and you have requested strict checking.
Host key verification failed."""
UNKNOWN = """No ED25519 host key is known for 10.0.0.5 and you have requested strict checking.
Host key verification failed."""
DENIED = "core@10.0.0.5: Permission denied (publickey)."
REFUSED = "ssh: connect to host 10.0.0.5 port 2222: Connection refused"


@pytest.mark.parametrize("command, gssapi, argv", [
    (None, True, ["ssh", "-N", "-T", "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes", *OPTIONS,
                  "-L", "/tmp/x/podman.sock:/run/podman/podman.sock", "core@10.0.0.5"]),
    ("test -S /s", False, ["ssh", "-T", "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes",
                           "-o", "GSSAPIAuthentication=no", *OPTIONS,
                           "-L", "/tmp/x/podman.sock:/run/podman/podman.sock", "core@10.0.0.5", "test -S /s"]),
], ids=["tunnel", "session"])
def test_forward_command(command, gssapi, argv):
    """A forward alone (-N) or a forward with a remote command: kctl's options, host keys checked."""
    assert forward_command(TARGET, "/tmp/x/podman.sock", identity="/k", known_hosts="/kh", connect_timeout=10,
                           remote_command=command, gssapi=gssapi) == argv


def test_tunnel_runs_the_forward_command_as_the_connections_master():
    """SSHTunnel's ssh is forward_command's forward to its own local socket, and the SSH master (ControlMaster)
    whose control socket host commands share; no control path while no tunnel runs."""
    tunnel = SSHTunnel(TARGET, identity="/k", known_hosts="/kh", connect_timeout=10)
    argv = tunnel.command()
    control = tunnel.local_socket[:-len("podman.sock")] + "control"
    assert argv[1:5] == ["-o", "ControlMaster=yes", "-o", f"ControlPath={control}"]
    assert [argv[0], *argv[5:]] == forward_command(TARGET, tunnel.local_socket, identity="/k", known_hosts="/kh",
                                                   connect_timeout=10)
    assert tunnel.control_path == ""


@pytest.mark.parametrize("stderr, reason", [
    (CHANGED, "HostKeyChanged"),
    (UNKNOWN, "HostKeyUnknown"),
    (DENIED, "AuthenticationRefused"),
    ("Received disconnect from 10.0.0.5: Too many authentication failures", "AuthenticationRefused"),
    (REFUSED, "ConnectionRefused"),
    ("ssh: connect to host 10.0.0.5 port 22: Connection timed out", "HostUnreachable"),
    ("ssh: connect to host 10.0.0.5 port 22: No route to host", "HostUnreachable"),
    ("ssh: Could not resolve hostname nowhere: Name or service not known", "HostUnreachable"),
    ("kex_exchange_identification: read: Connection reset by peer", "SSHFailed"),
    ("", "SSHFailed"),
], ids=["changed", "unknown", "auth", "too-many", "refused", "timeout", "no-route", "no-name", "other", "silent"])
def test_classify_ssh_failure(stderr, reason):
    """ssh's own words name the cause, always one of SSH_FAILURE_REASONS."""
    assert classify_ssh_failure(stderr) == reason and reason in SSH_FAILURE_REASONS


@pytest.mark.parametrize("reason, stderr, identity, message", [
    ("HostKeyChanged", CHANGED, "/k",
     "the SSH host key of 10.0.0.5:2222 has CHANGED since it was trusted; kctl refuses to connect"
     " (Host key verification failed.). If the host was re-installed, check its new key and run: kctl node trust h1"),
    ("HostKeyUnknown", UNKNOWN, "/k",
     "the SSH host key of 10.0.0.5:2222 is not known (Host key verification failed.); check it and run:"
     " kctl node trust h1"),
    ("AuthenticationRefused", DENIED, "/k",
     "10.0.0.5:2222 refused the SSH login of core with key /k (core@10.0.0.5: Permission denied (publickey).);"
     " put its public key in ~core/.ssh/authorized_keys on the host"),
    ("AuthenticationRefused", DENIED, None,
     "10.0.0.5:2222 refused the SSH login of core (core@10.0.0.5: Permission denied (publickey).);"
     " put its public key in ~core/.ssh/authorized_keys on the host"),
    ("ConnectionRefused", REFUSED, None,
     "10.0.0.5:2222 refused the connection (ssh: connect to host 10.0.0.5 port 2222: Connection refused);"
     " is sshd running on the host?"),
    ("HostUnreachable", "ssh: connect to host 10.0.0.5 port 2222: Connection timed out", None,
     "10.0.0.5:2222 cannot be reached: the host is down, cut off or behind a firewall"),
    ("SSHFailed", "kex_exchange_identification: read: Connection reset by peer", None,
     "ssh to 10.0.0.5:2222 failed (kex_exchange_identification: read: Connection reset by peer)"),
    ("SSHFailed", "", None, "ssh to 10.0.0.5:2222 failed (no reason given)"),
], ids=["changed", "unknown", "auth-key", "auth", "refused", "unreachable", "other", "silent"])
def test_ssh_failure_message(reason, stderr, identity, message):
    """One line per cause: where, ssh's last word (not its banner), and the fix naming the node to trust."""
    assert ssh_failure_message(reason, stderr, target=TARGET, node="h1", identity=identity) == message


@pytest.mark.parametrize("stderr, verdict", [
    (CHANGED, "Host key verification failed."),
    ("one\n\n  two  \n", "two"),
    ("@@@@\n", ""),
    ("x" * 500, "x" * 300),
], ids=["banner", "last-line", "only-at", "long"])
def test_ssh_verdict(stderr, verdict):
    """ssh's last word: the last line that is not the @ banner, at most 300 characters."""
    assert ssh_verdict(stderr) == verdict


@pytest.mark.parametrize("script, grace", [
    ("exec sleep 60", 5.0),
    ("trap '' TERM; echo ready; while :; do sleep 0.1; done", 0.3),
], ids=["ends-on-term", "ignores-term"])
def test_stop_process_reaps_and_closes_pipes(script, grace):
    """stop_process ends a process (SIGKILL after the grace when SIGTERM is ignored), reaps it, closes its pipes."""
    process = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               start_new_session=True)
    try:
        if "ready" in script:
            assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        stop_process(process, grace=grace)
        assert process.returncode in (-signal.SIGTERM, -signal.SIGKILL)
        assert process.stdin is not None and process.stdin.closed
        assert process.stdout is not None and process.stdout.closed
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


FAKE_SSH = """#!{python}
import os, sys
with open(os.environ["FAKE_SSH_LOG"], "a") as log:
    log.write("\\0".join(sys.argv[1:]) + "\\n")
sys.stderr.write("Warning: something said on stderr\\n")
sys.stderr.flush()
if os.environ.get("FAKE_SSH_MODE") == "silent":
    sys.stdin.read()
else:
    print("hello from " + sys.argv[-1], flush=True)
    sys.stdin.read()  # the session stays open until it is ended
"""


@pytest.fixture
def fake_ssh(tmp_path, monkeypatch):
    """An `ssh` first on PATH that logs its argv, writes a line on stderr and one on stdout, then waits;
    temporary folders are made under tmp_path (so none is left behind unseen). Returns the logged argvs."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "ssh"
    script.write_text(FAKE_SSH.replace("{python}", sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "ssh.log"
    log.write_text("")
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SSH_LOG", str(log))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return lambda: [line.split("\0") for line in log.read_text().splitlines()]


def test_session_runs_its_command_with_a_forward(fake_ssh, tmp_path):
    """SSHSession runs forward_command (no GSSAPI) with its remote command, reads the first line, and stop()
    ends ssh, returns its stderr and removes its private folder."""
    session = SSHSession.start(TARGET, "say-it", identity="/k", known_hosts="/kh", connect_timeout=10,
                               folder_prefix="kctl-test-")
    try:
        assert session.read_line(time.monotonic() + 30) == "hello from say-it"
        assert session.alive() and os.path.dirname(session.local).startswith(str(tmp_path / "tmp" / "kctl-test-"))
    finally:
        stderr = session.stop()
    assert "something said on stderr" in stderr
    assert session.process.returncode is not None and not os.listdir(tmp_path / "tmp")
    assert fake_ssh() == [forward_command(TARGET, session.local, identity="/k", known_hosts="/kh", connect_timeout=10,
                                          remote_command="say-it", gssapi=False)[1:]]


def test_session_read_line_gives_up_at_the_deadline(fake_ssh, monkeypatch):
    """No line by the deadline: None (the session is left running for a later read)."""
    monkeypatch.setenv("FAKE_SSH_MODE", "silent")
    session = SSHSession.start(TARGET, "quiet", identity=None, known_hosts=None, connect_timeout=10)
    try:
        started = time.monotonic()
        assert session.read_line(started + 0.3) is None
        assert time.monotonic() - started < 10 and session.alive() and not session.ended
    finally:
        session.stop()


def test_session_without_ssh_is_an_ssh_error(tmp_path, monkeypatch):
    """No `ssh` to run: SSHError saying why, and no folder left behind."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with pytest.raises(SSHError, match="ssh"):
        SSHSession.start(TARGET, "true", identity=None, known_hosts=None, connect_timeout=10)
    assert not os.listdir(temp)
