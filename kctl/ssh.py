"""SSH as kctl uses it: one way to build `ssh` command lines, host keys always checked.

Everything kctl does over SSH (the Podman tunnel `SSHTunnel`, used by kctl.runtime.podman, the control
plane reached by `--server ssh://...`, images copied between hosts) runs the system
`ssh` client with these options: batch mode (no prompts), a connect timeout,
keep-alives, the identity given, and host keys checked against a known_hosts file
(`StrictHostKeyChecking=yes`: an unknown or changed key is refused, never accepted).

kctl keeps its own known_hosts file next to the store (`known_hosts_for_store`);
`kctl node trust` records keys there.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass


@dataclass(frozen=True)
class SSHTarget:
    """Where an ssh:// URL points: ssh://user@host:port/path."""

    user: str
    host: str
    port: int
    path: str

    @classmethod
    def parse(cls, url: str) -> "SSHTarget":
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "ssh" or not parts.hostname:
            raise ValueError(f"not an ssh://user@host[:port]/path URL: {url!r}")
        return cls(user=parts.username or "root", host=parts.hostname, port=parts.port or 22,
                   path=parts.path)

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}"


def ssh_options(*, identity: str | None = None, known_hosts: str | None = None,
                connect_timeout: float = 10, port: int | None = None) -> list[str]:
    """The options kctl passes to every `ssh`: no prompts, host keys checked, keep-alives."""
    options = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
               "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
               "-o", f"ConnectTimeout={max(1, int(connect_timeout))}"]
    if identity:
        options += ["-i", identity, "-o", "IdentitiesOnly=yes"]
    if known_hosts:
        options += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null"]
    if port is not None:
        options += ["-p", str(port)]
    return options


class SSHError(Exception):
    """ssh could not be started or gave up (the message ends with ssh's own last word)."""


# -- a forwarded socket kept open -------------------------------------------------------------

class SSHTunnel:
    """`ssh -N -L local.sock:remote.sock` kept alive; host keys are checked, never skipped.

    Used for a remote host's Podman service (kctl.runtime.podman.connection): podman-py's own
    SSH transport passes `StrictHostKeyChecking no` and starts one ssh per connection; this
    tunnel is one ssh process per runtime, restarted when it dies. `address.path` is the
    remote socket; `ensure()` returns the local one (in a private folder of its own).
    """

    def __init__(self, address: SSHTarget, *, identity: str | None, known_hosts: str | None,
                 connect_timeout: float) -> None:
        self.address = address
        self._identity = identity
        self._known_hosts = known_hosts
        self._connect_timeout = connect_timeout
        self._folder = ""  # made at the first start, kept across restarts
        self._process: subprocess.Popen[bytes] | None = None
        self._starting: subprocess.Popen[bytes] | None = None  # an ssh being started (reset() ends it)
        self._resets = 0  # bumped by reset(): a start under way gives up
        self._lock = threading.Lock()

    @property
    def local_socket(self) -> str:
        """The forwarded socket on this machine."""
        return os.path.join(self._folder, "podman.sock")

    def command(self) -> list[str]:
        """argv of the forwarding ssh."""
        options = ssh_options(identity=self._identity, known_hosts=self._known_hosts,
                              connect_timeout=self._connect_timeout, port=self.address.port)
        return ["ssh", "-N", "-T", "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes",
                *options, "-L", f"{self.local_socket}:{self.address.path}", self.address.destination]

    def ensure(self) -> str:
        """The local socket path, (re)starting ssh when it is not running; SSHError when ssh fails."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
        return self.local_socket

    def _start(self) -> None:
        if not self._folder:
            self._folder = tempfile.mkdtemp(prefix="kctl-ssh-")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.local_socket)
        log = tempfile.TemporaryFile()
        resets = self._resets
        process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=log)
        self._starting = process
        try:
            deadline = time.monotonic() + self._connect_timeout + 5
            while not os.path.exists(self.local_socket):
                if process.poll() is not None or time.monotonic() > deadline or self._resets != resets:
                    stop_process(process)
                    log.seek(0)
                    reason = ssh_verdict(log.read().decode(errors="replace")) or "no socket forwarded"
                    raise SSHError(f"ssh to {self.address.host}:{self.address.port} failed: {reason}")
                time.sleep(0.05)
        finally:
            self._starting = None
        self._process = process

    def reset(self) -> None:
        """End the ssh (also one still starting) without waiting for the lock: the calls over it fail
        now, and the next call starts a fresh ssh (not one stuck in TCP retransmission)."""
        self._resets += 1
        for process in (self._starting, self._process):
            if process is not None and process.poll() is None:
                with contextlib.suppress(OSError):
                    process.kill()

    def close(self) -> None:
        """Stop the ssh and remove the local socket's folder."""
        with self._lock:
            if self._process is not None:
                stop_process(self._process)
                self._process = None
            if self._folder:
                shutil.rmtree(self._folder, ignore_errors=True)
                self._folder = ""


def ssh_verdict(stderr: str) -> str:
    """ssh's last word ("Host key verification failed."), not its 1 KB banner of @ lines and advice."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not set(line.strip()) <= {"@"}]
    return lines[-1][:300] if lines else ""


def stop_process(process: subprocess.Popen[bytes], *, grace: float = 5) -> None:
    """SIGTERM, then SIGKILL after `grace` s; reaped."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def known_hosts_for_store(store_path: str | os.PathLike) -> str:
    """The known_hosts file kctl keeps for a store: beside it, named known_hosts."""
    return os.path.join(os.path.dirname(os.path.abspath(os.fspath(store_path))), "known_hosts")


# -- host keys --------------------------------------------------------------------------------

@dataclass(frozen=True)
class HostKey:
    """One public host key: its type (ssh-ed25519...) and base64 blob."""

    type: str
    blob: str

    @property
    def fingerprint(self) -> str:
        """OpenSSH's SHA256 fingerprint, as `ssh-keygen -l` prints it."""
        digest = hashlib.sha256(base64.b64decode(self.blob)).digest()
        return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def host_pattern(host: str, port: int) -> str:
    """How known_hosts names a host: `host` on port 22, `[host]:port` otherwise."""
    return host if port == 22 else f"[{host}]:{port}"


def scan_host_keys(host: str, port: int = 22, *, timeout: float = 5) -> list[HostKey]:
    """The host keys a host's sshd offers (ssh-keyscan); [] when it does not answer."""
    try:
        out = subprocess.run(["ssh-keyscan", "-T", str(max(1, int(timeout))), "-p", str(port), host],
                             capture_output=True, text=True, timeout=timeout + 5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    keys = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 3 and not line.startswith("#"):
            keys.append(HostKey(fields[1], fields[2]))
    return sorted(set(keys), key=lambda k: k.type)


def recorded_host_keys(known_hosts: str, host: str, port: int = 22) -> list[HostKey]:
    """The keys a known_hosts file records for host:port (plain entries, as kctl writes them)."""
    pattern = host_pattern(host, port)
    try:
        with open(known_hosts, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    keys = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and not line.startswith(("#", "|")) and pattern in fields[0].split(","):
            keys.append(HostKey(fields[1], fields[2]))
    return keys


def record_host_keys(known_hosts: str, host: str, port: int, keys: list[HostKey]) -> None:
    """Make `keys` the only keys known_hosts records for host:port (file 0600, folder 0700)."""
    pattern = host_pattern(host, port)
    folder = os.path.dirname(os.path.abspath(known_hosts))
    os.makedirs(folder, mode=0o700, exist_ok=True)
    try:
        with open(known_hosts, encoding="utf-8") as f:
            kept = [line for line in f.read().splitlines()
                    if not (line.split() and pattern in line.split()[0].split(","))]
    except FileNotFoundError:
        kept = []
    lines = kept + [f"{pattern} {k.type} {k.blob}" for k in keys]
    tmp = f"{known_hosts}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    os.replace(tmp, known_hosts)


def trust_state(offered: list[HostKey], recorded: list[HostKey]) -> str:
    """"trusted" (an offered key is recorded), "changed" (others are recorded), or "unknown"."""
    if not recorded:
        return "unknown"
    return "trusted" if set(offered) & set(recorded) else "changed"


__all__ = ["HostKey", "SSHError", "SSHTarget", "SSHTunnel", "host_pattern", "known_hosts_for_store", "record_host_keys",
           "recorded_host_keys", "scan_host_keys", "ssh_options", "ssh_verdict", "stop_process", "trust_state"]
