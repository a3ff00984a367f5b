"""Run a command on a runtime's host: a local process for unix:// runtimes, `ssh` for ssh:// ones.

PodmanRuntime.run_on_host (kctl.runtime.podman.runtime) calls `run_on_host`; the network
plugin (kctl.agent.podnetwork) and kube-proxy use it to change the host itself (routes,
sysctls, nft tables), which Podman's API cannot. For `ssh://user@host:port/...` the command
goes through the system `ssh` with kctl's options (kctl.ssh.ssh_options: batch mode, host
keys checked against the runtime's known_hosts, its identity), the argv joined with
shlex.join so the remote shell sees exactly those words; stdin is passed through. Given the
`control_path` of the runtime's SSH tunnel (kctl.ssh.SSHTunnel, the connection's master), the
command goes over that connection without a login of its own (ssh logs in anew when the
master is gone). A host
that cannot be reached, a command that cannot be started or one that runs past its timeout
raises RuntimeError_ with one line; any other exit status is the caller's to judge (an
ExecResult). Errors name the command's first word and the host, never stdin.
"""

from __future__ import annotations

import shlex
import subprocess

from kctl.runtime.interface import ExecResult, RuntimeError_
from kctl.ssh import SSHTarget, classify_ssh_failure, ssh_failure_message, ssh_options

#: ssh's own exit status when it fails (the connection, the login, the host key)
SSH_FAILED = 255


def host_command(base_url: str, argv: list[str], *, identity: str | None = None, known_hosts: str | None = None,
                 connect_timeout: float = 10, control_path: str = "") -> list[str]:
    """The argv that runs `argv` on the host of `base_url` (itself for unix://; ssh ... for ssh://)."""
    if not argv:
        raise RuntimeError_("run on host: no command given")
    if base_url.startswith("unix://"):
        return list(argv)
    if base_url.startswith("ssh://"):
        target = _target(base_url)
        shared = ["-o", "ControlMaster=no", "-o", f"ControlPath={control_path}"] if control_path else []
        return ["ssh", "-T", *shared, *ssh_options(identity=identity, known_hosts=known_hosts,
                                                   connect_timeout=connect_timeout, port=target.port),
                target.destination, shlex.join(argv)]
    raise RuntimeError_(f"run on host: unsupported Podman URL {base_url!r} (use unix:// or ssh://)")


def _target(base_url: str) -> SSHTarget:
    try:
        return SSHTarget.parse(base_url)
    except ValueError as error:
        raise RuntimeError_(f"run on host: {error}") from None


def where(base_url: str) -> str:
    """The host as messages name it: `host:port` for ssh://, `this host` for unix://."""
    if base_url.startswith("ssh://"):
        target = _target(base_url)
        return f"{target.host}:{target.port}"
    return "this host"


def run_on_host(base_url: str, argv: list[str], *, stdin: bytes | None = None, timeout: float = 30.0,
                identity: str | None = None, known_hosts: str | None = None, node: str = "",
                control_path: str = "") -> ExecResult:
    """Run argv on the host of base_url; its exit status and output, or RuntimeError_ (see the module doc)."""
    command = host_command(base_url, argv, identity=identity, known_hosts=known_hosts,
                           connect_timeout=min(10.0, max(1.0, timeout)), control_path=control_path)
    name = argv[0]
    try:
        done = subprocess.run(command, input=stdin or b"", capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError_(f"{name} on {where(base_url)}: no answer within {timeout:g} s") from None
    except OSError as error:
        raise RuntimeError_(f"{name} on {where(base_url)}: cannot run {command[0]}: "
                            f"{error.strerror or error}") from None
    if base_url.startswith("ssh://") and done.returncode == SSH_FAILED:
        stderr = done.stderr.decode(errors="replace")
        reason = classify_ssh_failure(stderr)
        if reason != "SSHFailed" or stderr.lstrip().startswith("ssh:"):
            message = ssh_failure_message(reason, stderr, target=_target(base_url), node=node or "NODE")
            raise RuntimeError_(f"{name} on {where(base_url)}: {message}")
    return ExecResult(exit_code=done.returncode, stdout=done.stdout, stderr=done.stderr)


__all__ = ["SSH_FAILED", "host_command", "run_on_host", "where"]
