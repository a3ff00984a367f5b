"""SSH as kctl uses it: one way to build `ssh` command lines, host keys always checked.

Everything kctl does over SSH (the Podman tunnel of kctl.runtime.podman, the control
plane reached by `--server ssh://...`, images copied between hosts) runs the system
`ssh` client with these options: batch mode (no prompts), a connect timeout,
keep-alives, the identity given, and host keys checked against a known_hosts file
(`StrictHostKeyChecking=yes`: an unknown or changed key is refused, never accepted).

kctl keeps its own known_hosts file next to the store (`known_hosts_for_store`);
`kctl node trust` records keys there.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
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


__all__ = ["HostKey", "SSHTarget", "host_pattern", "known_hosts_for_store", "record_host_keys",
           "recorded_host_keys", "scan_host_keys", "ssh_options", "trust_state"]
