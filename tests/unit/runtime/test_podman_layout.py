"""kctl.runtime.podman split by idea, with SSH in one place (kctl.ssh), and its connection errors kept as they were."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kctl.runtime.interface import RuntimeError_

PODMAN = Path(__file__).resolve().parents[3] / "kctl" / "runtime" / "podman"
MODULES = sorted(PODMAN.glob("*.py"))


def test_podman_runtime_is_a_package_of_parts():
    """The runtime is a package of one module per idea (no single podman.py of a thousand lines)."""
    assert not (PODMAN.parent / "podman.py").exists()
    assert {p.stem for p in MODULES} >= {"connection", "errors", "specgen", "pods", "containers", "images",
                                         "volumes", "exec_logs", "execstream", "files", "events", "runtime"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_each_part_is_small(path):
    """No module of the Podman runtime holds more than one idea's worth of lines (~300)."""
    assert len(path.read_text().splitlines()) <= 300


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_ssh_outside_kctl_ssh(path):
    """No module of the Podman runtime runs ssh or parses ssh:// URLs itself: kctl.ssh does (SSHTunnel, SSHTarget)."""
    text = path.read_text()
    assert '"ssh"' not in text and "urlsplit" not in text and "Popen" not in text


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_tunnel_failure_is_one_runtime_error(tmp_path):
    """An ssh:// runtime whose ssh cannot connect fails its call with RuntimeError_ naming the host and ssh's reason."""
    from kctl.runtime.podman import PodmanRuntime

    port = _closed_port()
    runtime = PodmanRuntime(f"ssh://root@127.0.0.1:{port}/run/podman/podman.sock",
                            known_hosts=str(tmp_path / "known_hosts"), timeout=2)
    try:
        with pytest.raises(RuntimeError_) as error:
            runtime.info()
    finally:
        runtime.close()
    message = str(error.value)
    assert f"ssh to 127.0.0.1:{port} failed" in message
    assert "refused" in message.lower()
    assert "\n" not in message


@pytest.mark.parametrize("url", ["ssh://root@host", "ssh://", "tcp://host:8080"], ids=["no-path", "empty", "tcp"])
def test_bad_urls(url):
    """A Podman URL that is not unix:// or ssh://user@host[:port]/path is refused when the runtime is made."""
    from kctl.runtime.podman import PodmanRuntime

    with pytest.raises(RuntimeError_):
        PodmanRuntime(url)


def test_tunnel_command_checks_host_keys(tmp_path):
    """The tunnel's ssh forwards a private local socket to the remote one with kctl's options (host keys checked)."""
    from kctl.ssh import SSHTarget, SSHTunnel

    tunnel = SSHTunnel(SSHTarget.parse("ssh://core@10.0.0.5:2222/run/podman/podman.sock"), identity="/keys/id",
                       known_hosts=str(tmp_path / "kh"), connect_timeout=5)
    argv = tunnel.command()
    assert argv[0] == "ssh" and argv[-1] == "core@10.0.0.5"
    assert "StrictHostKeyChecking=yes" in argv and f"UserKnownHostsFile={tmp_path / 'kh'}" in argv
    assert argv[argv.index("-L") + 1].endswith(":/run/podman/podman.sock")
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-i") + 1] == "/keys/id"
