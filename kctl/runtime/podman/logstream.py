"""A container's log from Podman (`GET /libpod/containers/{id}/logs`) as an iterator that close() ends from any thread.

PodmanRuntime.logs (kctl.runtime.podman.exec_logs) opens one on the runtime's local socket (Podman's
own, or the local end of the SSH tunnel). It speaks HTTP itself (http.client over the unix socket,
kctl.runtime.podman.events.UnixHTTPConnection) rather than through podman-py, whose response keeps its
socket to itself: a follower of a quiet container (the HTTPS API's `logs -f` whose client left) is then
ended at once by close(), which shuts the socket down, instead of at the container's next line.
The body is Podman's multiplexed frames (8-byte header: stream, size); each payload is one piece.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import urllib.parse
from typing import Any, Iterator

from kctl.runtime.interface import NotFoundInRuntime, RuntimeError_
from kctl.runtime.podman.errors import one_line
from kctl.runtime.podman.events import UnixHTTPConnection


class _Closed(Exception):
    """The stream was closed (from another thread) while a call on it was under way."""


class PodmanLogStream:
    """One open logs request: iterate for the payloads (bytes); close() from any thread ends the iteration."""

    def __init__(self, socket_path: str, path_prefix: str, container_id: str, params: dict[str, Any], *,
                 timeout: float, follow: bool) -> None:
        """Send the request and (unless following: Podman sends a followed log's head with its first line) read
        the answer's head: NotFoundInRuntime / RuntimeError_ (one line) when refused."""
        self._what = f"logs of container {container_id[:12]}"
        self._closed = threading.Event()
        self._lock = threading.Lock()
        query = urllib.parse.urlencode({k: str(v).lower() if isinstance(v, bool) else v for k, v in params.items()})
        self._connection = UnixHTTPConnection(socket_path, timeout=timeout)
        self._response: http.client.HTTPResponse | None = None
        with self._failing():
            self._connection.request("GET", f"{path_prefix}containers/{container_id}/logs?{query}")
            if follow:  # Podman answers a follow only with the first line: read the head in the iteration
                if self._connection.sock is not None:
                    self._connection.sock.settimeout(None)  # a followed log may stay quiet for hours
            else:
                self._open()

    @contextlib.contextmanager
    def _failing(self) -> Iterator[None]:
        """Close the connection on any failure; the OS's and http.client's errors become RuntimeError_, and any
        error after close() (from another thread) becomes _Closed."""
        try:
            yield
        except RuntimeError_:
            self.close()
            raise
        except Exception as error:
            closed = self._closed.is_set()
            self.close()
            if closed:
                raise _Closed from None
            if isinstance(error, (OSError, http.client.HTTPException)):
                raise RuntimeError_(f"{self._what}: cannot reach the Podman service: "
                                    f"{one_line(str(error)) or type(error).__name__}") from error
            raise

    def _open(self) -> http.client.HTTPResponse:
        """The answer's head (read once): NotFoundInRuntime / RuntimeError_ (one line) when refused."""
        if self._response is None:
            response = self._connection.getresponse()
            if response.status >= 400:
                body = response.read(65536).decode(errors="replace")
                with contextlib.suppress(ValueError, AttributeError):
                    body = json.loads(body).get("message", body)
                error = NotFoundInRuntime if response.status == 404 else RuntimeError_
                raise error(f"{self._what}: {one_line(body) or response.reason}")
            self._response = response
        return self._response

    def __iter__(self) -> PodmanLogStream:
        return self

    def __next__(self) -> bytes:
        if self._closed.is_set():
            raise StopIteration
        if self._response is None:
            try:
                with self._failing():
                    self._open()
            except _Closed:  # closed from another thread while waiting for the head
                raise StopIteration from None
        while True:
            header = self._read(8)
            if len(header) < 8:
                self.close()
                raise StopIteration
            size = int.from_bytes(header[4:8], "big")
            if size:
                payload = self._read(size)
                if len(payload) < size and not payload:
                    self.close()
                    raise StopIteration
                return payload

    def _read(self, size: int) -> bytes:
        """Up to `size` bytes of the body (fewer only at its end); b"" once closed."""
        data = b""
        while len(data) < size and not self._closed.is_set():
            try:
                chunk = self._open().read(size - len(data))
            except (OSError, ValueError, AttributeError, http.client.HTTPException) as error:
                if self._closed.is_set():
                    return b""
                raise RuntimeError_(f"{self._what}: {one_line(str(error)) or type(error).__name__}") from error
            if not chunk:
                break
            data += chunk
        return data

    def close(self) -> None:
        """End the stream (idempotent, any thread): a blocked iteration stops."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            sock = self._connection.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self._connection.close()


__all__ = ["PodmanLogStream"]
