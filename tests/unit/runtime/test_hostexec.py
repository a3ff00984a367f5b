"""Commands run on a runtime's host (kctl.runtime.hostexec): the argv built, quoting, stdin, timeouts, ssh failures."""

from __future__ import annotations

import shlex
import stat
import sys

import pytest

from kctl.runtime.hostexec import host_command, run_on_host
from kctl.runtime.interface import RuntimeError_


def test_unix_runtime_runs_argv_as_is():
    """A unix:// runtime's host is this machine: the argv itself, no shell between."""
    assert host_command("unix:///run/kctl/podman.sock", ["ip", "route", "show"]) == ["ip", "route", "show"]


def test_ssh_runtime_argv_has_kctls_options_and_one_quoted_command():
    """ssh:// : kctl's ssh options (identity, known_hosts, port) and the argv joined with shlex.join."""
    argv = ["sh", "-c", "echo 'a b'; echo $HOME", "x;y"]
    command = host_command("ssh://root@10.77.0.11:2200/run/podman/podman.sock", argv, identity="/k/id",
                           known_hosts="/k/known_hosts", connect_timeout=7)
    assert command[:2] == ["ssh", "-T"]
    assert command[-2:] == ["root@10.77.0.11", shlex.join(argv)]
    assert shlex.split(command[-1]) == argv  # the remote shell sees exactly these words
    options = command[2:-2]
    for pair in (["-i", "/k/id"], ["-p", "2200"], ["-o", "StrictHostKeyChecking=yes"],
                 ["-o", "UserKnownHostsFile=/k/known_hosts"], ["-o", "BatchMode=yes"], ["-o", "ConnectTimeout=7"]):
        assert any(options[i:i + 2] == pair for i in range(len(options))), pair


def test_ssh_runtime_shares_the_tunnels_connection_when_given_its_control_path():
    """With the tunnel's control socket, the command goes over that SSH connection (no login of its own)."""
    command = host_command("ssh://root@10.77.0.11/run/podman/podman.sock", ["nft", "-f", "-"],
                           control_path="/tmp/kctl-ssh-x/control")
    assert command[2:6] == ["-o", "ControlMaster=no", "-o", "ControlPath=/tmp/kctl-ssh-x/control"]
    assert "ControlMaster=no" not in host_command("ssh://root@10.77.0.11/run/podman/podman.sock", ["true"])


@pytest.mark.parametrize(("url", "message"), [
    ("tcp://10.0.0.1:8080", "unsupported Podman URL"),
    ("ssh:///no-host", "not an ssh://"),
], ids=["scheme", "no-host"])
def test_bad_url_is_one_line(url, message):
    """A URL kctl cannot run commands through: RuntimeError_ with one line."""
    with pytest.raises(RuntimeError_, match=message) as caught:
        host_command(url, ["true"])
    assert "\n" not in str(caught.value)


def test_local_run_passes_stdin_and_returns_status_and_output():
    """Locally: stdin reaches the command; exit status, stdout and stderr come back as they are."""
    script = "import sys; data = sys.stdin.read(); print(data.upper()); sys.stderr.write('warn'); sys.exit(3)"
    result = run_on_host("unix:///x.sock", [sys.executable, "-c", script], stdin=b"hello")
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"HELLO\n", b"warn")


def test_local_timeout_is_one_line():
    """A command running past its timeout: RuntimeError_ naming it and the host."""
    with pytest.raises(RuntimeError_, match=r"^sleep on this host: no answer within 0.2 s$"):
        run_on_host("unix:///x.sock", ["sleep", "5"], timeout=0.2)


def test_missing_command_is_one_line():
    """A command that does not exist: RuntimeError_, no traceback text."""
    with pytest.raises(RuntimeError_, match="no-such-command-kctl on this host: cannot run"):
        run_on_host("unix:///x.sock", ["no-such-command-kctl"])


@pytest.mark.parametrize(("stderr", "expected"), [
    ("ssh: connect to host 10.77.0.11 port 22: No route to host", "cannot be reached"),
    ("root@10.77.0.11: Permission denied (publickey).", "refused the SSH login"),
    ("Host key verification failed.", "host key of 10.77.0.11:22 is not known"),
], ids=["unreachable", "login", "host-key"])
def test_ssh_failure_is_one_clear_line(tmp_path, monkeypatch, stderr, expected):
    """ssh itself failing (exit 255): one line saying why, never what went on stdin."""
    fake = tmp_path / "ssh"
    fake.write_text(f"#!/bin/sh\ncat >/dev/null\necho '{stderr}' >&2\nexit 255\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    with pytest.raises(RuntimeError_, match=expected) as caught:
        run_on_host("ssh://root@10.77.0.11/run/podman.sock", ["nft", "-f", "-"], stdin=b"secret-rules")
    message = str(caught.value)
    assert message.startswith("nft on 10.77.0.11:22: ") and "\n" not in message and "secret" not in message


def test_remote_command_status_is_returned(tmp_path, monkeypatch):
    """The remote command's own failure (not ssh's) is an ExecResult, with the argv arriving as one word."""
    fake = tmp_path / "ssh"
    fake.write_text('#!/bin/sh\nfor last; do :; done\necho "$last"\necho "Error: nope" >&2\nexit 2\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    result = run_on_host("ssh://root@10.77.0.11/run/podman.sock", ["ip", "route", "del", "10.244.2.0/24"])
    assert result.exit_code == 2 and result.stderr == b"Error: nope\n"
    assert result.stdout == b"ip route del 10.244.2.0/24\n"
