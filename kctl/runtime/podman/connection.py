"""The connection to one Podman service, and the plain HTTP calls every part of the runtime makes.

`ServiceConnection` reaches the service on a unix socket (`unix:///run/kctl/podman.sock`)
or, for a remote host, through an SSH tunnel (kctl.ssh.SSHTunnel: ssh forwards a local
unix socket to the remote one, host keys verified); every call, exec and events included,
then goes over that local socket, with one podman-py client per thread (a podman-py
client is a requests.Session). With keep_alive=False (kctl.runtime.fencing's runtimes) no
HTTP connection is kept between calls: every call opens a fresh one. `revoke()` ends the
connection for good: every later call raises the error it was given. `ServiceCalls` is
the base of the runtime's parts (kctl.runtime.podman.pods, containers, images, volumes,
exec_logs): GET/POST/DELETE on the libpod API through this thread's client.
"""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any

from podman import PodmanClient

from kctl.runtime.hostprobe import HostUnreachable
from kctl.runtime.interface import RuntimeError_
from kctl.runtime.podman.errors import calling
from kctl.ssh import SSHError, SSHTarget, SSHTunnel


class ServiceConnection:
    """A local unix socket to the service (direct or tunnelled over SSH) and one podman-py client per thread."""

    def __init__(self, base_url: str, *, identity: str | None, known_hosts: str | None,
                 timeout: float, keep_alive: bool = True) -> None:
        self.timeout = timeout
        self.keep_alive = keep_alive
        self._revoked: RuntimeError_ | None = None  # revoke(): every call raises it from then on
        self._tunnel: SSHTunnel | None = None
        if base_url.startswith("ssh://"):
            with calling("Podman URL"):
                address = SSHTarget.parse(base_url)
                if not address.path:
                    raise ValueError(f"not an ssh://user@host[:port]/path URL: {base_url!r}")
            self._tunnel = SSHTunnel(address, identity=identity, known_hosts=known_hosts, connect_timeout=timeout)
            self._socket = ""
        elif base_url.startswith("unix://"):
            self._socket = base_url[len("unix://"):]
        else:
            raise RuntimeError_(f"unsupported Podman URL {base_url!r} (use unix:// or ssh://)")
        self._local = threading.local()
        self._clients: list[PodmanClient] = []
        self._lock = threading.Lock()
        self._suspended = ""  # why the host cannot be reached (the heartbeat said so); "" normally
        self._generation = 0  # bumped by suspend(): each thread then makes a new client

    def socket_path(self) -> str:
        """The local socket of the service: Podman's own, or the SSH tunnel's (started when not running)."""
        if self._revoked is not None:
            raise type(self._revoked)(str(self._revoked))
        if self._suspended:
            raise HostUnreachable(self._suspended)
        if self._tunnel is not None:
            try:
                return self._tunnel.ensure()
            except SSHError as error:
                raise RuntimeError_(str(error)) from None
        return self._socket

    def control_path(self) -> str:
        """The SSH master's control socket of the tunnel while it runs ("" for unix:// or no tunnel now)."""
        return self._tunnel.control_path if self._tunnel is not None and not self._suspended else ""

    def client(self) -> PodmanClient:
        """This thread's podman-py client (a new one after suspend(): the old socket may be dead)."""
        socket_path = self.socket_path()
        client = getattr(self._local, "client", None)
        if client is not None and getattr(self._local, "generation", 0) != self._generation:
            with contextlib.suppress(Exception):
                client.close()
            client = None
        if client is None:
            client = PodmanClient(base_url=f"unix://{socket_path}", timeout=self.timeout)
            if not self.keep_alive:  # the service closes each connection after its answer
                client.api.headers["Connection"] = "close"
            self._local.client = client
            self._local.generation = self._generation
            with self._lock:
                self._clients.append(client)
        return client

    def suspend(self, reason: str) -> None:
        """Calls fail at once with HostUnreachable(reason) until resume(); the ssh tunnel is ended."""
        first = not self._suspended
        self._suspended = reason or "the host cannot be reached"
        if first:
            self._generation += 1
            if self._tunnel is not None:
                self._tunnel.reset()

    def resume(self) -> None:
        """Calls go through again (over a fresh tunnel)."""
        self._suspended = ""

    def revoke(self, reason: str, *, error: type[RuntimeError_] = RuntimeError_) -> None:
        """Calls fail at once with error(reason) from now on (resume() does not undo it); the tunnel
        is ended, so streams over it end too, and every thread's client is closed."""
        self._revoked = error(reason)
        self._generation += 1
        if self._tunnel is not None:
            self._tunnel.reset()
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            with contextlib.suppress(Exception):
                client.close()

    def close(self) -> None:
        """Close every thread's client and the tunnel."""
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            with contextlib.suppress(Exception):
                client.close()
        self._local = threading.local()
        if self._tunnel is not None:
            self._tunnel.close()


class ServiceCalls:
    """The libpod API calls of one runtime, over its connection (the base of every part of PodmanRuntime)."""

    _connection: ServiceConnection
    _timeout: float

    def _api(self) -> Any:
        """podman-py's APIClient of this thread (requests-style get/post/put/delete on libpod paths)."""
        return self._connection.client().api

    def _get(self, path: str, *, params: dict[str, Any] | None = None,
             timeout: float | None = None) -> Any:
        response = self._api().get(path, params=params, timeout=timeout)
        response.raise_for_status()
        return response.json() if response.status_code != 204 else None

    def _post(self, path: str, *, params: dict[str, Any] | None = None,
              body: Any = None, timeout: float | None = None) -> Any:
        data = json.dumps(body) if body is not None else None
        response = self._api().post(path, params=params, data=data, timeout=timeout,
                                    headers={"Content-Type": "application/json"})
        response.raise_for_status()
        return response

    def _delete(self, path: str, *, params: dict[str, Any] | None = None) -> None:
        response = self._api().delete(path, params=params)
        if response.status_code != 404:
            response.raise_for_status()


__all__ = ["ServiceCalls", "ServiceConnection"]
