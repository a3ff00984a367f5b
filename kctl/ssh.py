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

import os
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


__all__ = ["SSHTarget", "known_hosts_for_store", "ssh_options"]
