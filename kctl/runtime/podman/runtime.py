"""PodmanRuntime: kctl.runtime.interface.Runtime on one Podman service, through its REST API.

A node agent (kctl.agent) gets one per Node from kctl.runtime.connect.runtime_for_node and
only calls the Runtime methods. The runtime is its parts, one per idea, over one
connection (kctl.runtime.podman.connection: unix socket or SSH tunnel): pods, containers,
images, volumes, networks, exec/logs/events, usage (stats); here are the host (info, reachability for the
node heartbeat, kctl.runtime.hostprobe; commands run on it, kctl.runtime.hostexec) and the
life of the connection.
"""

from __future__ import annotations

from typing import Any

from kctl.runtime.hostprobe import HostCheck
from kctl.runtime.interface import ExecResult, HostInfo
from kctl.runtime.podman.connection import ServiceConnection
from kctl.runtime.podman.containers import Containers
from kctl.runtime.podman.errors import calling
from kctl.runtime.podman.exec_logs import ExecAndLogs
from kctl.runtime.podman.images import Images
from kctl.runtime.podman.networks import Networks
from kctl.runtime.podman.pods import PodSandboxes
from kctl.runtime.podman.stats import Stats
from kctl.runtime.podman.volumes import Volumes


class PodmanRuntime(PodSandboxes, Containers, Images, Volumes, Networks, ExecAndLogs, Stats):
    """kctl.runtime.interface.Runtime on one Podman service (unix socket or ssh://)."""

    def __init__(self, base_url: str, *, identity: str | None = None,
                 known_hosts: str | None = None, timeout: float = 30) -> None:
        """`identity` is an SSH key file and `known_hosts` a known_hosts file (ssh:// only)."""
        self.base_url = base_url
        self._timeout = timeout
        self._identity, self._known_hosts = identity, known_hosts
        self._checker: Any = None  # the heartbeat's HostChecker, made at its first check
        self._connection = ServiceConnection(base_url, identity=identity, known_hosts=known_hosts,
                                              timeout=timeout)

    def __enter__(self) -> "PodmanRuntime":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the clients of every thread (and the SSH tunnel, and the heartbeat's connection)."""
        self._connection.close()
        if self._checker is not None:
            self._checker.close()

    def __repr__(self) -> str:
        return f"PodmanRuntime({self.base_url!r})"

    # -- reachability (the node heartbeat's)

    def check_host(self, *, timeout: float, details: bool = True, node: str = "") -> HostCheck:
        """One look at the host over a connection of its own (kctl.runtime.hostprobe); never raises."""
        from kctl.runtime.hostprobe import HostChecker

        if self._checker is None:
            self._checker = HostChecker(self.base_url, node=node, identity=self._identity,
                                        known_hosts=self._known_hosts)
        return self._checker.check(timeout=timeout, details=details)

    def suspend(self, reason: str) -> None:
        """The host cannot be reached: end the tunnel; calls raise HostUnreachable(reason) until resume()."""
        self._connection.suspend(reason)

    def resume(self) -> None:
        """The host answers again: calls go through (a fresh tunnel)."""
        self._connection.resume()

    def ping(self, *, timeout: float | None = None) -> None:
        """GET /_ping: returns once the Podman service answers; raises what the request raised."""
        response = self._api().get("/_ping", timeout=timeout)
        response.raise_for_status()

    # -- host

    def run_on_host(self, argv: list[str], *, stdin: bytes | None = None, timeout: float = 30.0) -> ExecResult:
        """Run argv on the service's host: locally (unix://) or over ssh (ssh://), see kctl.runtime.hostexec."""
        from kctl.runtime.hostexec import run_on_host

        return run_on_host(self.base_url, argv, stdin=stdin, timeout=timeout, identity=self._identity,
                           known_hosts=self._known_hosts, control_path=self._connection.control_path())

    def info(self) -> HostInfo:
        with calling("podman info"):
            info = self._get("/info")
        host = info.get("host", {})
        version = info.get("version", {}).get("Version", "")
        distribution = host.get("distribution", {}) or {}
        return HostInfo(cpus=int(host.get("cpus", 0)), memory_bytes=int(host.get("memTotal", 0)),
                        os=host.get("os", "") or distribution.get("distribution", ""),
                        kernel=host.get("kernel", ""), arch=host.get("arch", ""),
                        runtime_version=f"podman://{version}", hostname=host.get("hostname", ""))


__all__ = ["PodmanRuntime"]
