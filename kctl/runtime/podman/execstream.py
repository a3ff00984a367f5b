"""Exec over Podman's hijacked exec-start stream: stdin in, stdout and stderr out, a deadline.

podman-py's exec loses stdin and, over SSH, the output; the runtime (kctl.runtime.podman.exec_logs)
creates the exec session through the API and then speaks the upgraded stream itself on the
service's local unix socket (Podman's own, or the local end of the SSH tunnel): all at once
(exec_stream, for Runtime.exec) or as it comes (StreamingExec, for Runtime.exec_session).
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from typing import TYPE_CHECKING

from kctl.runtime.interface import NotFoundInRuntime, RuntimeError_
from kctl.runtime.podman.errors import one_line

if TYPE_CHECKING:
    from collections.abc import Callable


def demux_frames(data: bytes) -> tuple[bytes, bytes, bytes]:
    """Split a multiplexed stream into (stdout, stderr, rest-not-yet-complete)."""
    out, err = bytearray(), bytearray()
    index = 0
    while len(data) - index >= 8:
        kind, size = struct.unpack_from(">BxxxL", data, index)
        if len(data) - index - 8 < size:
            break
        payload = data[index + 8: index + 8 + size]
        (err if kind == 2 else out).extend(payload)
        index += 8 + size
    return bytes(out), bytes(err), data[index:]


def _http_head(sock: socket.socket, request: bytes) -> tuple[int, bytes, bytes]:
    """Send one request; return (status, header block, bytes read after the headers)."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the Podman service closed the connection")
        data += chunk
        if len(data) > 1 << 20:
            raise ConnectionError("oversized response header")
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, head, rest


def _error_body(sock: socket.socket, head: bytes, rest: bytes) -> str:
    length = 0
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    text = rest.decode(errors="replace")
    with contextlib.suppress(ValueError, AttributeError):
        text = json.loads(text).get("message", text)
    return one_line(text)


def _feed_stdin(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)


def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def exec_start_request(path_prefix: str, exec_id: str, *, tty: bool) -> bytes:
    """The request that starts exec session `exec_id` (its stream upgrades the connection)."""
    body = json.dumps({"Detach": False, "Tty": tty}).encode()
    return (f"POST {path_prefix}exec/{exec_id}/start HTTP/1.1\r\nHost: d\r\n"
            "Content-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def attach_request(path_prefix: str, container_id: str, *, stdin: bool) -> bytes:
    """The request that attaches to a container's main process (its output from now on, stdin if asked)."""
    query = f"stream=true&logs=false&stdout=true&stderr=true&stdin={str(stdin).lower()}"
    return (f"POST {path_prefix}containers/{container_id}/attach?{query} HTTP/1.1\r\nHost: d\r\n"
            "Connection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n").encode()


def _upgrade(sock: socket.socket, request: bytes, *, what: str = "exec") -> bytes:
    """Send an upgrading request on a connected socket; the bytes of the stream already read."""
    status, head, rest = _http_head(sock, request)
    if status >= 400:
        message = _error_body(sock, head, rest)
        if status == 404:
            raise NotFoundInRuntime(f"{what}: {message}")
        raise RuntimeError_(f"{what}: {message}")
    return rest


def _start(sock: socket.socket, path_prefix: str, exec_id: str, *, tty: bool) -> bytes:
    """Start the exec session on a connected socket; the bytes of the stream already read."""
    return _upgrade(sock, exec_start_request(path_prefix, exec_id, tty=tty))


def exec_stream(socket_path: str, path_prefix: str, exec_id: str, *, stdin: bytes | None,
                deadline: float | None) -> tuple[bytes, bytes]:
    """Start exec session `exec_id` on the service, feed stdin, collect (stdout, stderr)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(_remaining(deadline))
        sock.connect(socket_path)
        rest = _start(sock, path_prefix, exec_id, tty=False)
        if stdin is not None:
            threading.Thread(target=_feed_stdin, args=(sock, stdin), daemon=True).start()
        return _read_frames(sock, rest, deadline)


def _read_frames(sock: socket.socket, pending: bytes, deadline: float | None) -> tuple[bytes, bytes]:
    out, err = bytearray(), bytearray()
    while True:
        more_out, more_err, pending = demux_frames(pending)
        out += more_out
        err += more_err
        sock.settimeout(_remaining(deadline))
        chunk = sock.recv(65536)
        if not chunk:
            return bytes(out), bytes(err)
        pending += chunk


class StreamingExec:
    """kctl.runtime.interface.ExecSession on Podman's hijacked exec stream (frames, or raw with a TTY)."""

    def __init__(self, socket_path: str, request: bytes, *, tty: bool, timeout: float,
                 exit_code: Callable[[], int], resize: Callable[[int, int], None], half_close: bool = True,
                 what: str = "exec") -> None:
        """Connect and send `request` (exec_start_request or attach_request): RuntimeError_ when the service
        refuses it. Without `half_close`, close_stdin() only stops sending (an attach keeps the stdin open)."""
        self._tty, self._half_close = tty, half_close
        self._exit_code, self._resize = exit_code, resize
        self._pending: list[tuple[int, bytes]] = []
        self._buffer = b""
        self._closed = False
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(timeout)
            self._sock.connect(socket_path)
            self._buffer = _upgrade(self._sock, request, what=what)
            self._sock.settimeout(None)
        except BaseException:
            self._sock.close()
            raise

    def read(self) -> tuple[int, bytes] | None:
        """The next (stream, data) of the command's output; None at its end (or once closed)."""
        while not self._pending:
            if self._tty and self._buffer:
                self._pending.append((1, self._buffer))
                self._buffer = b""
                break
            if not self._tty:
                out, err, self._buffer = demux_frames(self._buffer)
                self._pending += [(n, data) for n, data in ((1, out), (2, err)) if data]
                if self._pending:
                    break
            try:
                chunk = self._sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                return None
            self._buffer += chunk
        return self._pending.pop(0)

    def write(self, data: bytes) -> None:
        """Send data to the command's stdin (an OSError after it ended is ignored)."""
        with contextlib.suppress(OSError):
            self._sock.sendall(data)

    def close_stdin(self) -> None:
        """Half-close: the command reads EOF (unless the stream was made without half_close)."""
        if not self._half_close:
            return
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)

    def resize(self, width: int, height: int) -> None:
        """Resize the session's TTY (nothing without one)."""
        if self._tty and width > 0 and height > 0:
            self._resize(width, height)

    def exit_code(self) -> int:
        """The command's exit status, once its output ended."""
        return self._exit_code()

    def close(self) -> None:
        """End the stream (from any thread): a blocked read() returns None."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


__all__ = ["StreamingExec", "attach_request", "demux_frames", "exec_start_request", "exec_stream"]
