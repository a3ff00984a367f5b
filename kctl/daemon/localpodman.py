"""The local Podman a daemon registers its host with, and the services it starts itself.

kctl.daemon.server registers this host, when the store has no Node yet, with the Podman
socket `choose_local_url` picks: `--podman-url`, else the system socket if it answers,
else kctl's own socket with a `podman system service` that `LocalServices` starts (and
stops on exit). `make_runtime_factory` gives the node agents their runtimes, starting
kctl's own service first when a Node names its socket, and, given a leader term, fencing an
ssh:// Node's host for it first (kctl.runtime.fencing). `local_sockets` is also where
`kctl image push` looks for the control host's images (kctl.cli.image).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable
from urllib.parse import urlparse

log = logging.getLogger("kctl.daemon")

SYSTEM_SOCKET = "/run/podman/podman.sock"
KCTL_SOCKET = "/run/kctl/podman.sock"  # kctl.runtime.connect.DEFAULT_SOCKET


class NoLocalPodman(Exception):
    """No Podman service answers on this host and none could be started (the message says why)."""


def podman_answers(socket_path: str) -> bool:
    """Whether a Podman API service answers on the unix socket."""
    from kctl.runtime.service import ping

    return ping(socket_path)


def local_sockets() -> tuple[str, str]:
    """(the system Podman socket to try, the socket kctl starts its own service on)."""
    if os.geteuid() == 0:
        return SYSTEM_SOCKET, KCTL_SOCKET
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/kctl-{os.geteuid()}"
    return os.path.join(runtime_dir, "podman", "podman.sock"), os.path.join(runtime_dir, "kctl", "podman.sock")


class LocalServices:
    """The Podman services this daemon started (on kctl's own socket); stopped on exit."""

    def __init__(self) -> None:
        self._services: dict[str, object] = {}
        self._lock = threading.Lock()

    def ensure(self, socket_path: str) -> None:
        """A Podman service answers on socket_path: an existing one, or one started now."""
        with self._lock:
            if socket_path in self._services or podman_answers(socket_path):
                return
            from kctl.runtime.service import LocalPodmanService, default_conf

            conf = default_conf()
            log.info("starting podman system service on %s%s", socket_path,
                     f" (CONTAINERS_CONF={conf})" if conf else "")
            service = LocalPodmanService.ensure(socket_path, conf=conf)
            if service.owned:
                self._services[socket_path] = service

    def stop_all(self) -> None:
        """Stop every service this daemon started."""
        with self._lock:
            services, self._services = self._services, {}
        for path, service in services.items():
            try:
                service.stop()
                log.info("stopped podman system service on %s", path)
            except Exception as exc:
                log.warning("cannot stop podman system service on %s: %s", path, exc)


def _unix_path(url: str) -> str | None:
    parsed = urlparse(url)
    return parsed.path if parsed.scheme == "unix" else None


def choose_local_url(podman_url: str | None, services: LocalServices) -> str:
    """The Podman URL this host registers with (see the module docstring)."""
    if podman_url:
        return podman_url
    system, own = local_sockets()
    if podman_answers(system):
        return f"unix://{system}"
    services.ensure(own)
    return f"unix://{own}"


def make_runtime_factory(services: LocalServices) -> Callable[..., object]:
    """runtime_for_node(node, term=None), first starting kctl's own local service when a Node names its socket;
    with a term (the leader's, for an ssh:// Node) the host is fenced for it and the runtime goes through it."""
    own = local_sockets()[1]

    def runtime_for(node: dict, *, term: int | None = None) -> object:
        from kctl.agent.supervisor import node_connection
        from kctl.runtime.connect import runtime_for_node

        if term is not None:
            from kctl.runtime.fencing import fenced_runtime_for_node

            return fenced_runtime_for_node(node, term=term)
        path = _unix_path(node_connection(node)[0])
        if path == own:
            services.ensure(own)
        return runtime_for_node(node)

    return runtime_for


__all__ = ["KCTL_SOCKET", "LocalServices", "NoLocalPodman", "SYSTEM_SOCKET", "choose_local_url", "local_sockets",
           "make_runtime_factory", "podman_answers"]
